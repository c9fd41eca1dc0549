"""`classifiers annotate`: label a sample of documents with an LLM, FineWeb-Edu's way.

FineWeb-Edu (Penedo et al. 2024, "The FineWeb Datasets", arXiv:2406.17557, section 3.3 and appendix)
had Llama-3-70B-Instruct score 450k web documents 0-5 for educational value with an additive rubric,
then trained a small model on those scores. This command is the first half, against any OpenAI-
compatible chat endpoint (classifiers/chat_client.py); `train-quality --labels OUTPUT/labels.jsonl`
is the second (a binary fastText model at `score_threshold`, 3 as FineWeb-Edu's).

A run:
1. checks everything before any request: the URL (http/https with a host, a port in 1-65535), every
   numeric setting against what its consumer can take (`CLIENT_BOUNDS`), the model name, the prompt
   file (UTF-8, holding the `{text}` placeholder), the sample size, the API key's environment variable
   (named in the config, `client.api_key_env`; never a flag, never written anywhere), the output folder;
2. reads the documents (`text` of JSONL records or of Parquet files/folders; `id` kept when there is
   one), drops exact duplicate texts, and samples `sample` of them with `seed`;
3. estimates what is left to pay for (prompt + document characters / `cost.chars_per_token`, plus
   `cost.reply_tokens` per document, at the config's prices per million tokens), prints it, and refuses
   to start above `cost.max_cost` (`--max-cost`, exit 2). `--dry-run` stops here and writes nothing;
4. labels the rest with `client.concurrency` workers under the rate limits (each try bounded in bytes
   and in time, the server being untrusted: classifiers/chat_client.py), appending each result to
   OUTPUT/labels.jsonl the moment it comes back (flushed), keyed by a hash of (model, prompt, request
   settings, document text). A rerun, or a run resumed after a crash or Ctrl-C, reads the file and sends
   only the documents without a line: a reply that came back is never paid for twice (Ctrl-C ends the
   requests in flight at once, and those are asked again). A line cut by a crash is dropped;
5. parses the score from the reply (`request.score_pattern`, its last match, within `request.min_score`
   .. `max_score`). An unparseable reply is kept, with `score: null` and the raw reply, and counted; a
   document whose request failed (tries used up) gets no line, is counted and listed, and is retried by
   the next run. Exit status 1 when some failed, as every job of the project.

The folder records what made it (core/output.py's `_config.json`): the model, the prompt's sha256 and the
request settings, which decide every label; a rerun with other ones is refused. How the labels are fetched
(endpoint, limits, retries, prices) and which documents were sampled may change between runs: each run
appends its own record (endpoint, inputs, sample, settings, estimate, counts) to `runs.jsonl`, and
`summary.json` describes the last one. The folder must be local: labels.jsonl is appended to.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import math
import os
import random
import re
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import Field, model_validator

from classifiers.chat_client import (
    ChatClient,
    ClientOptions,
    EndpointError,
    Pacer,
    Reply,
    RequestFailed,
    Stopped,
)
from classifiers.data import DataError, expand, file_format, iter_jsonl, parquet_texts
from core.config import ConfigModel, check_at_least, check_positive, fingerprint_of
from core.errors import ConfigError, InputError, OutputConflict, UserError
from core.output import atomic_write_json, check_folder_path, guard_folder
from core.safe_json import loads_checked
from core.storage import is_object_store

JOB = "annotate"
PLACEHOLDER = "{text}"
LABELS_FILE = "labels.jsonl"
RUNS_FILE = "runs.jsonl"
SUMMARY_FILE = "summary.json"


DAY_S = 86_400.0

CLIENT_BOUNDS: dict[str, tuple[float | None, float]] = {
    # key: (lowest, highest); lowest None: above 0. Each bound is what its consumer can take, with room:
    # socket.settimeout, Event.wait and time.sleep raise OverflowError past ~9.2e9 s (issue 44:
    # timeout_s=1e30), and a wait longer than a day is a mistake, not a setting.
    "timeout_s": (None, 3600.0),  # one connect or read; an LLM sending nothing for an hour is down
    "deadline_s": (None, DAY_S),  # one try, connect to last byte
    "max_reply_bytes": (1024, 64 * 2**20),  # held in memory per worker: x concurrency at most 16 GiB
    "max_tries": (1, 100),  # backoff is base x 2^(try-1): 2^99 is still a float
    "backoff_base_s": (None, 3600.0),
    "backoff_max_s": (None, DAY_S),
    "max_retry_after_s": (0.0, DAY_S),  # 0: never wait for a Retry-After
    "concurrency": (1, 256),  # one thread and one connection each
    "requests_per_minute": (60 / DAY_S, 1e9),  # one request a day at least: the pacer sleeps 60/rpm s
    "tokens_per_minute": (1.0, 1e12),  # and plan() checks that one try's tokens fit in a minute's
    "progress_s": (None, DAY_S),
}


def check_range(key: str, value: float, lowest: float | None, highest: float) -> None:
    """`value` in [lowest, highest] (lowest None: above 0, 0 excluded); the error names `key`."""
    low_ok = value > 0 if lowest is None else value >= lowest
    if not (low_ok and value <= highest):
        low = "> 0" if lowest is None else f">= {lowest:g}"
        raise ConfigError(f"{key} must be {low} and <= {highest:g}, got {value!r}")


class RequestSettings(ConfigModel):
    """What decides each label: fingerprinted in `_config.json` and hashed into every cache key."""

    temperature: float = 0.0
    """0 = the model's most likely reply, so a label does not depend on luck."""
    max_tokens: int = 512
    """Reply length allowed: FineWeb-Edu's prompt asks for a justification of up to 100 words. At most
    10M (the largest context windows are a few million tokens); the pacer charges it per try."""
    max_doc_chars: int = 20_000
    """Documents are cut here before they go into the prompt (about 5k tokens: inside an 8k context)."""
    score_pattern: str = r"Educational score:\s*\**\s*(\d+(?:\.\d+)?)"
    """Regular expression whose first group is the score; its last match in the reply counts."""
    min_score: float = 0.0
    max_score: float = 5.0

    @model_validator(mode="after")
    def _check(self) -> RequestSettings:
        check_at_least("request.temperature", self.temperature, 0.0)
        check_range("request.max_tokens", self.max_tokens, 1, 10_000_000)
        check_range("request.max_doc_chars", self.max_doc_chars, 1, 100_000_000)
        try:
            groups = re.compile(self.score_pattern).groups
        except re.error as e:
            raise ConfigError(f"request.score_pattern is not a regular expression ({e})") from None
        if groups < 1:
            raise ConfigError("request.score_pattern must capture the score in a group, e.g. 'score: (\\d+)'")
        if self.min_score >= self.max_score:
            raise ConfigError(
                f"request.min_score must be < max_score, got {self.min_score} >= {self.max_score}"
            )
        return self


class ClientSettings(ConfigModel):
    """How labels are fetched (classifiers/chat_client.py); none of it changes a label."""

    api_key_env: str | None = None
    """Name of the environment variable holding the API key (e.g. OPENAI_API_KEY); null: no key (a local
    server). Named, it must be set. The key itself is never read from the command line or written."""
    timeout_s: float = 120.0
    """Longest wait for one connect or one read of the socket."""
    deadline_s: float = 600.0
    """Longest time one try may take, connect to the reply's last byte, however the server trickles it
    (a timeout bounds one read, and a byte every few seconds keeps each read short). Past it the try
    counts as a timeout and is retried."""
    max_reply_bytes: int = 1 << 20
    """A reply body above this fails the document unread (a chat reply is kilobytes; 1 MiB leaves room
    for max_tokens in the tens of thousands). Bounds memory at concurrency x this, whatever the server sends."""
    max_tries: int = 6
    backoff_base_s: float = 1.0
    backoff_max_s: float = 60.0
    max_retry_after_s: float = 300.0
    """A server asking (Retry-After) for a longer wait fails the document instead (a quota, not a blip)."""
    concurrency: int = 8
    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    """Charged per try: the prompt's estimated tokens plus request.max_tokens, as providers count it."""
    progress_s: float = 10.0
    """A progress line goes to stderr this often while labelling."""

    @model_validator(mode="after")
    def _check(self) -> ClientSettings:
        for key, (lowest, highest) in CLIENT_BOUNDS.items():
            if getattr(self, key) is not None:
                check_range(f"client.{key}", getattr(self, key), lowest, highest)
        if self.api_key_env is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", self.api_key_env):
            raise ConfigError(
                f"client.api_key_env must be an environment variable name, got {self.api_key_env!r}"
            )
        return self

    def options(self) -> ClientOptions:
        return ClientOptions(
            timeout_s=self.timeout_s,
            deadline_s=self.deadline_s,
            max_reply_bytes=self.max_reply_bytes,
            max_tries=self.max_tries,
            backoff_base_s=self.backoff_base_s,
            backoff_max_s=self.backoff_max_s,
            max_retry_after_s=self.max_retry_after_s,
            concurrency=self.concurrency,
        )


class CostSettings(ConfigModel):
    """The estimate printed before a run starts, and the ceiling it must stay under."""

    chars_per_token: float = 4.0
    """English text runs at about 4 characters per token in GPT/Llama-3 tokenizers; other scripts fewer.
    0.01 .. 1000: the estimate divides by it (a tiny one made an infinite count)."""
    reply_tokens: int = 150
    """Expected reply length: a justification of up to 100 words (~130 tokens) and the score line."""
    price_input_per_million: float = 0.0
    price_output_per_million: float = 0.0
    max_cost: float | None = None
    """Refuse to start when the estimate is above it (`--max-cost`); null: no ceiling."""

    @model_validator(mode="after")
    def _check(self) -> CostSettings:
        check_range("cost.chars_per_token", self.chars_per_token, 0.01, 1000.0)
        check_range("cost.reply_tokens", self.reply_tokens, 0, 10_000_000)
        check_at_least("cost.price_input_per_million", self.price_input_per_million, 0.0)
        check_at_least("cost.price_output_per_million", self.price_output_per_million, 0.0)
        if self.max_cost is not None:
            check_at_least("cost.max_cost", self.max_cost, 0.0)
        return self


class AnnotateConfig(ConfigModel):
    """`annotate`'s settings (configs/annotate.yaml); `--sample`, `--seed`, `--max-cost` are aliases."""

    sample: int | None = None
    """Documents to label, drawn with `seed` from the distinct texts of the inputs; null: all of them."""
    seed: int = 0
    request: RequestSettings = Field(default_factory=RequestSettings)
    client: ClientSettings = Field(default_factory=ClientSettings)
    cost: CostSettings = Field(default_factory=CostSettings)

    @model_validator(mode="after")
    def _check(self) -> AnnotateConfig:
        if self.sample is not None:
            check_positive("sample", self.sample)
        return self


@dataclass(frozen=True)
class Job:
    """One sampled document: where it came from, the text sent (cut at max_doc_chars), its cache key."""

    id: str
    source: str
    text: str
    truncated: bool
    key: str


# -- checks made before anything is read or sent ---------------------------------------------------------


def chat_url(endpoint: str) -> str:
    """The chat-completions URL of `endpoint` (a base such as http://host:8000/v1, or the full URL)."""
    parts = urlsplit(endpoint.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(
            f"--endpoint {endpoint!r}: expected an http(s) URL such as http://localhost:8000/v1"
        )
    if parts.username or parts.password:
        raise ConfigError(
            "--endpoint must not hold credentials; name the key's variable in client.api_key_env"
        )
    if parts.query or parts.fragment:
        raise ConfigError(f"--endpoint {endpoint!r}: no query or fragment, only the base URL")
    try:
        port = parts.port  # None when the URL names none; ValueError when not a number or above 65535
    except ValueError:
        port = -1
    if port is not None and not 1 <= port <= 65535:
        raise ConfigError(f"--endpoint {endpoint!r}: the port must be a number from 1 to 65535")
    base = endpoint.strip().rstrip("/")
    return base if base.endswith("/chat/completions") else base + "/chat/completions"


def check_model_name(model: str) -> str:
    if not model or not model.strip() or any(c.isspace() or ord(c) < 32 for c in model) or len(model) > 256:
        raise ConfigError(f"--model {model!r}: expected a model name as the endpoint knows it (no spaces)")
    return model


def read_prompt(path: str | Path) -> str:
    """The prompt template: a UTF-8 text file holding `{text}` where the document goes (once)."""
    p = Path(path)
    try:
        prompt = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"--prompt {p}: no such file") from None
    except (UnicodeDecodeError, IsADirectoryError, PermissionError) as e:
        raise InputError(f"--prompt {p}: not a readable UTF-8 text file ({e})") from None
    n = prompt.count(PLACEHOLDER)
    if n != 1:
        raise InputError(f"--prompt {p}: must hold the placeholder {PLACEHOLDER} exactly once, found {n}")
    return prompt


def read_api_key(settings: ClientSettings) -> str | None:
    if settings.api_key_env is None:
        return None
    key = os.environ.get(settings.api_key_env, "")
    if not key.strip():
        raise ConfigError(f"client.api_key_env names {settings.api_key_env}, which is not set (or empty)")
    return key.strip()


# -- documents ---------------------------------------------------------------------------------------


def read_documents(inputs: list[str]) -> tuple[list[tuple[str, str, str]], Counter]:
    """(id, source file, text) of every non-empty document of the inputs, and what was skipped."""
    if not inputs:
        raise DataError("no input given")
    docs: list[tuple[str, str, str]] = []
    skipped: Counter = Counter()
    for arg in inputs:
        for path in expand(arg):
            fmt = file_format(path)
            if fmt == "jsonl":
                rows = ((obj.get("id"), obj.get("text"), f"line {n}") for n, obj in iter_jsonl(path))
            elif fmt == "parquet":
                rows = _parquet_rows(path)
            else:
                raise DataError(
                    f"{path}: annotate reads JSONL (.jsonl/.json) or Parquet, not {path.suffix or 'this'}"
                )
            for doc_id, text, where in rows:
                if text is not None and not isinstance(text, str):
                    raise DataError(f"{path}: {where}: 'text' must be a string, got {type(text).__name__}")
                if not text or not text.strip():
                    skipped["empty_text"] += 1
                    continue
                docs.append((str(doc_id) if doc_id is not None else f"{path.name}:{where}", str(path), text))
    if not docs:
        raise DataError(f"{', '.join(inputs)}: no documents with text")
    return docs, skipped


def _parquet_rows(path: Path):
    """(id, text, where) of each row; classifiers.data checks the file and its `text` column."""
    import pyarrow.parquet as pq

    texts = list(parquet_texts(path))
    ids = (
        pq.read_table(path, columns=["id"]).column(0).to_pylist()
        if "id" in pq.read_schema(path).names
        else [None] * len(texts)
    )
    for row, (doc_id, text) in enumerate(zip(ids, texts, strict=True)):
        yield doc_id, text, f"row {row}"


def make_jobs(
    docs: list[tuple[str, str, str]], cfg: AnnotateConfig, model: str, prompt: str
) -> tuple[list[Job], int]:
    """The sampled jobs (in input order) and how many duplicate texts were dropped first."""
    label_key = fingerprint_of({"model": model, "prompt": prompt, "request": cfg.request.to_dict()}, 64)
    jobs: list[Job] = []
    seen: set[str] = set()
    for doc_id, source, text in docs:
        sent = text[: cfg.request.max_doc_chars]
        key = hashlib.sha256(f"{label_key}\n{sent}".encode()).hexdigest()[:32]
        if key not in seen:
            seen.add(key)
            jobs.append(Job(doc_id, source, sent, len(text) > len(sent), key))
    dropped = len(docs) - len(jobs)
    if cfg.sample is None:
        return jobs, dropped
    if cfg.sample > len(jobs):
        raise ConfigError(f"sample is {cfg.sample}, but the inputs hold {len(jobs)} distinct documents")
    picked = sorted(random.Random(cfg.seed).sample(range(len(jobs)), cfg.sample))
    return [jobs[i] for i in picked], dropped


# -- the cache: labels.jsonl ---------------------------------------------------------------------------


def read_labels(path: Path) -> dict[str, dict[str, Any]]:
    """key -> record of every complete line; a last line cut by a crash is removed from the file."""
    if not path.is_file():
        return {}
    data = path.read_bytes()
    end = data.rfind(b"\n") + 1
    if end < len(data):  # the unterminated tail of a write that was killed: nothing was cached there
        with open(path, "r+b") as f:
            f.truncate(end)
    out: dict[str, dict[str, Any]] = {}
    for n, line in enumerate(data[:end].splitlines(), 1):
        try:
            rec = loads_checked(line, f"{path}:{n}")  # a file on disk: the checked reader
            out[rec["key"]] = rec
        except (ValueError, KeyError, TypeError):
            raise OutputConflict(
                f"{path}:{n} is not a label record; the file was edited or damaged. Use another --output, "
                "or remove that line."
            ) from None
    return out


class LabelWriter:
    """Appends one JSON line per result, flushed at once; holds an exclusive lock on the file."""

    def __init__(self, path: Path) -> None:
        self._f = open(path, "a", encoding="utf-8")  # noqa: SIM115 (held open, and locked, for the run)
        try:
            fcntl.flock(self._f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._f.close()
            raise OutputConflict(
                f"{path} is being written by another annotate run; wait for it to end"
            ) from None
        self._lock = threading.Lock()

    def write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False) + "\n"
        with self._lock:
            self._f.write(line)
            self._f.flush()

    def close(self) -> None:
        self._f.close()  # releases the lock


# -- cost ----------------------------------------------------------------------------------------------


def prompt_tokens(prompt: str, text: str, cost: CostSettings) -> int:
    """Estimated prompt tokens of one request: characters of the filled prompt / chars_per_token."""
    return math.ceil((len(prompt) - len(PLACEHOLDER) + len(text)) / cost.chars_per_token)


def estimate(jobs: list[Job], prompt: str, cost: CostSettings) -> dict[str, Any]:
    tokens_in = sum(prompt_tokens(prompt, j.text, cost) for j in jobs)
    tokens_out = cost.reply_tokens * len(jobs)
    usd = (tokens_in * cost.price_input_per_million + tokens_out * cost.price_output_per_million) / 1e6
    return {"documents": len(jobs), "input_tokens": tokens_in, "output_tokens": tokens_out, "cost": usd}


def estimate_line(est: dict[str, Any], cached: int, cost: CostSettings) -> str:
    return (
        f"estimate: {est['documents']} documents to label ({cached} already labelled), "
        f"~{est['input_tokens']:,} input + ~{est['output_tokens']:,} output tokens "
        f"({cost.chars_per_token:g} chars/token, {cost.reply_tokens} per reply) = ${est['cost']:.4f} at "
        f"${cost.price_input_per_million:g} / ${cost.price_output_per_million:g} per million tokens"
    )


# -- the run -------------------------------------------------------------------------------------------


def parse_score(reply: str, request: RequestSettings) -> float | None:
    """The last match of score_pattern in `reply`, if inside [min_score, max_score]; else None."""
    matches = re.findall(request.score_pattern, reply)
    if not matches:
        return None
    last = matches[-1]
    try:
        score = float(last[0] if isinstance(last, tuple) else last)
    except ValueError:
        return None
    return score if request.min_score <= score <= request.max_score else None


@dataclass
class Plan:
    """Everything checked and read before the first request."""

    url: str
    model: str
    prompt: str
    prompt_sha256: str
    cfg: AnnotateConfig
    output: Path
    jobs: list[Job]
    todo: list[Job]
    counts: Counter
    estimate: dict[str, Any]


def plan(
    inputs: list[str], output: str, endpoint: str, model: str, prompt_file: str, cfg: AnnotateConfig
) -> Plan:
    """Check and read everything (no request, nothing written but a torn cache line removed)."""
    url, model = chat_url(endpoint), check_model_name(model)
    prompt = read_prompt(prompt_file)
    read_api_key(cfg.client)
    if is_object_store(output):
        raise ConfigError(f"--output {output}: annotate appends to a local labels.jsonl; name a local folder")
    out = Path(check_folder_path(output))
    docs, counts = read_documents(inputs)
    jobs, dropped = make_jobs(docs, cfg, model, prompt)
    counts.update(documents=len(docs), duplicate_texts=dropped, sampled=len(jobs))
    cached = read_labels(out / LABELS_FILE)
    todo = [j for j in jobs if j.key not in cached]
    check_token_rate(todo, prompt, cfg)
    counts["cached"] = len(jobs) - len(todo)
    est = estimate(todo, prompt, cfg.cost)
    sha = hashlib.sha256(prompt.encode()).hexdigest()
    return Plan(url, model, prompt, sha, cfg, out, jobs, todo, counts, est)


def check_token_rate(jobs: list[Job], prompt: str, cfg: AnnotateConfig) -> None:
    """Each try must fit in a minute's tokens_per_minute: a larger one would wait longer than a minute
    for its slot (tokens x 60/tpm s, past a day for a tiny limit), and a provider refuses it anyway."""
    tpm = cfg.client.tokens_per_minute
    if tpm is None or not jobs:
        return
    largest = max(prompt_tokens(prompt, j.text, cfg.cost) for j in jobs) + cfg.request.max_tokens
    if largest > tpm:
        raise ConfigError(
            f"client.tokens_per_minute={tpm:g} is below one request's estimated tokens ({largest:,}: the "
            "longest prompt and request.max_tokens); raise it, or lower request.max_doc_chars"
        )


def check_cost(p: Plan) -> None:
    ceiling = p.cfg.cost.max_cost
    if ceiling is not None and p.estimate["cost"] > ceiling:
        raise UserError(
            f"the estimated cost ${p.estimate['cost']:.4f} is above --max-cost ${ceiling:g}; "
            "label fewer documents (--sample), or raise the ceiling"
        )


def folder_config(p: Plan) -> dict[str, Any]:
    """What `_config.json` records and fingerprints: what decides every label of the folder."""
    return {"model": p.model, "prompt_sha256": p.prompt_sha256, "request": p.cfg.request.to_dict()}


def execute(p: Plan, say: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Label `p.todo`, appending to labels.jsonl; write summary.json and a runs.jsonl line; the summary.
    `say` takes the progress lines (default: stderr)."""
    record = folder_config(p)
    guard_folder(p.output, JOB, record, fingerprint_of(record))
    client = ChatClient(
        p.url,
        p.model,
        p.cfg.client.options(),
        {"temperature": p.cfg.request.temperature, "max_tokens": p.cfg.request.max_tokens},
        Pacer(p.cfg.client.requests_per_minute, p.cfg.client.tokens_per_minute),
        api_key=read_api_key(p.cfg.client),
    )
    counts, failed = Counter(p.counts), []
    started = time.time()
    writer = LabelWriter(p.output / LABELS_FILE)
    try:
        _label_all(p, client, writer, counts, failed, say or _to_stderr)
    finally:
        writer.close()
        summary = _summary(p, counts, failed, client.counts, time.time() - started)
        atomic_write_json(p.output / SUMMARY_FILE, summary)
        with open(p.output / RUNS_FILE, "a", encoding="utf-8") as f:
            f.write(json.dumps(_run_record(p, summary, started), sort_keys=True) + "\n")
    return summary


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def progress_line(done: int, failed: int, in_flight: int, total: int, seconds: float) -> str:
    """`annotate: 37/200 done (2 failed), 8 in flight, 1.9/s, ~86 s left` (no rate before the first)."""
    line = f"annotate: {done}/{total} done ({failed} failed), {in_flight} in flight"
    if done and seconds > 0:
        rate = done / seconds
        line += f", {rate:.3g}/s, ~{(total - done) / rate:.0f} s left"
    else:
        line += f", {seconds:.0f} s without a reply"  # a stuck server is seen, not silent
    return line


def _label_all(
    p: Plan,
    client: ChatClient,
    writer: LabelWriter,
    counts: Counter,
    failed: list,
    say: Callable[[str], None],
) -> None:
    lock = threading.Lock()
    in_flight = [0]

    def one(job: Job) -> None:
        tokens = prompt_tokens(p.prompt, job.text, p.cfg.cost) + p.cfg.request.max_tokens
        with lock:
            in_flight[0] += 1
        try:
            reply = client.complete(p.prompt.replace(PLACEHOLDER, job.text), tokens)
        except RequestFailed as e:
            with lock:
                counts["failed"] += 1
                failed.append({"id": job.id, "key": job.key, "error": str(e)})
            return
        except Stopped:
            return
        except EndpointError:
            client.stop.set()  # at once, from this worker: no other worker starts a try that would fail the same
            raise
        finally:
            with lock:
                in_flight[0] -= 1
        rec = _record(job, reply, p)
        writer.write(rec)
        with lock:
            counts["labelled"] += 1
            counts["unparseable" if rec["score"] is None else "scored"] += 1

    start = time.monotonic()
    pool = ThreadPoolExecutor(p.cfg.client.concurrency, thread_name_prefix="annotate")
    try:
        pending = {pool.submit(one, job) for job in p.todo}
        while pending:
            # Wakes every progress_s to print a line, so a run waiting on a slow server says so.
            finished, pending = wait(pending, timeout=p.cfg.client.progress_s, return_when=FIRST_EXCEPTION)
            for fut in finished:
                fut.result()  # an EndpointError (or a bug) of any worker stops the run here
            if pending:
                with lock:
                    done, n_failed, active = (
                        counts["labelled"] + counts["failed"],
                        counts["failed"],
                        in_flight[0],
                    )
                say(progress_line(done, n_failed, active, len(p.todo), time.monotonic() - start))
    finally:
        # Ctrl-C or an error: no new try starts, and the tries in flight end now (their sockets are shut
        # down), so the workers, hence the process, end in well under a second; a reply cut off this way
        # has no line, and the next run asks for it again.
        client.abort()
        pool.shutdown(wait=True, cancel_futures=True)
        client.close()


def _record(job: Job, reply: Reply, p: Plan) -> dict[str, Any]:
    return {
        "key": job.key,
        "id": job.id,
        "source": job.source,
        "score": parse_score(reply.content, p.cfg.request),
        "reply": reply.content,
        "text": job.text,
        "truncated": job.truncated,
        "model": p.model,
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.completion_tokens,
        "tries": reply.tries,
    }


def _summary(
    p: Plan, counts: Counter, failed: list, client_counts: Counter, seconds: float
) -> dict[str, Any]:
    labels = read_labels(p.output / LABELS_FILE)
    sampled = [labels[j.key] for j in p.jobs if j.key in labels]
    hist = Counter(str(r["score"]) for r in sampled)
    return {
        "counts": dict(sorted(counts.items())),
        "requests": dict(sorted(client_counts.items())),
        "sampled_labelled": len(sampled),
        "score_histogram": dict(sorted(hist.items())),
        "billed_tokens": {
            "prompt": sum(r.get("prompt_tokens") or 0 for r in sampled),
            "completion": sum(r.get("completion_tokens") or 0 for r in sampled),
        },
        "estimate": p.estimate,
        "failed": failed[:100],
        "seconds": round(seconds, 2),
    }


def _run_record(p: Plan, summary: dict[str, Any], started: float) -> dict[str, Any]:
    settings = p.cfg.to_dict()
    return {
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "endpoint": p.url,
        "inputs": sorted({j.source for j in p.jobs}),
        "sample": p.cfg.sample,
        "seed": p.cfg.seed,
        "client": settings["client"],
        "cost": settings["cost"],
        "estimate": p.estimate,
        "counts": summary["counts"],
        "requests": summary["requests"],
    }
