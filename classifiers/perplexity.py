"""The `perplexity` scorer: per-document perplexity and bits per byte under a small reference LM.

cc_net scores documents with a KenLM model of Wikipedia; Ankner et al. (2024, "Perplexed by
Perplexity") show a small reference transformer works as well. The model folder is what
`python -m classifiers train-lm` makes (through `trainer.export_lm`): `lm.pt2` (a torch.export
program), `tokenizer.json` and `metadata.json` (format, languages, seq_len, sha256 of both files). Format
`refinery-lm/2`: the program maps tokens (B, T) to the final hidden states (B, T, C), and the LM head's
weight (V, C) is the program parameter metadata `head_weight` names. Format `refinery-lm/1` (older
folders): the program returns the logits (B, T, V); still scored, through the slower logits path. The
program is loaded without running code from the file (classifiers/lm_archive.py), and the files must
still have the hashes of metadata.json.

What is scored. A document is tokenized and its first `max_chunks × (max_tokens − 1) + 1` tokens are
kept (default one chunk of the model's row length: the first 512 tokens for train-lm's model; the rest of a long document is not read, so the cost
per document is bounded and the score describes how the document opens, where boilerplate and
spam show). They are cut into windows of `max_tokens` tokens that overlap by one token, each run
as one row from position 0, as the trainer's document mask showed each document: every kept token
after the first is predicted exactly once, from at most `max_tokens − 1` tokens of its own document.
The first token has no context and is not scored. With NLL the summed negative log-likelihood (nats)
of the n predicted tokens and B the UTF-8 bytes of the text they cover (from the end of the first
token to the end of the last):

    perplexity      = exp(NLL / n)          per token, so it depends on the tokenizer
    perplexity_bpb  = NLL / ln 2 / B         bits per byte, comparable across tokenizers

Null (NaN) for null text, a language the model does not list in its metadata (several models, one
per language, fill one column in the score job), and a text of fewer than 2 tokens.

Speed. Long texts are not tokenized whole: the tokenizer sees a prefix cut at a space after a
non-space character, longer than needed (5 characters per wanted token; when that yields too few, the
prefix grows by the characters per token it showed, ×1.25, at least doubling);
with byte-level BPE and its GPT-2 split (no normalizer) the tokens of such a prefix are exactly the
first tokens of the whole text (the split never joins across that boundary; tested on real pages).
Rows are sorted by length and grouped into batches of at most `batch_tokens` padded tokens; rows are
right-padded, which causal attention makes exact (a position never sees a later one), and padded
positions are not scored. For a format-2 model the head runs only over the scored positions (not the
padding, not a row's last token), HEAD_ROWS at a time, without ever holding a batch's logits, so a
batch can be 8,192 tokens and the program's fixed cost per call (~2 ms of Python over its graph) is
paid 16 times less often. `head_precision` (default bf16; `_head_bf16`): the projection runs in bf16
(fp32 accumulation) and the softmax over those logits, and each position's NLL is corrected by its
target logit recomputed in fp32, so only the normaliser is approximate; the head costs ~1.7-2x less
than in fp32 (whose projection then matches the logits path to 1.2e-7 relative). Scores move by
< 1e-3 relative, almost all of it a common +3.5e-4 bias (bf16 rounding noise raises a
logsumexp): Spearman 0.999998 with fp32 on 313 English pages of the shared WARCs, none of them
changes side of the demo recipe's perplexity band (2 of all 1,124 pages do, each within 3.5e-4 of a
threshold); bench/classifiers/perplexity_precision.py. `compile` (default "auto": on for jobs of more than
COMPILE_PAYBACK_DOCS documents per process, see `PerplexityScorer.plan`) runs the program through
torch.compile: ~15-20% less time in it, after a compile of 25-75 s per process, which pays back after
~16,000 documents (warm inductor cache) to ~50,000 (cold); a failed compile is logged and the
exported program runs instead. `threads` (default 1, what one Spark executor core gets) sets torch's
intra-op threads for the process. bench/classifiers/perplexity_throughput.py measures documents per CPU-second
of each setting side by side and where the time goes: at 512 tokens, 89-93 (fp32, as before) ->
104-115 (bf16 head) -> 124-139 (bf16 head, compiled) documents/s/core at load 4-6 and ~4, short of
the issue's 200:
the compiled program (causal attention over head_dim 16, the blocks, their small ops) and the
tokenizer alone take ~2 s per 399 documents, ~200/s with a head that cost nothing (its docstring).
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import model_validator

from classifiers.model import ModelError, read_folder_json, read_model_json
from classifiers.scorer import Scorer
from core.config import ConfigError, ConfigModel, build_config, check_choice
from core.files import sha256_file
from core.languages import LanguageSet

log = logging.getLogger(__name__)

PROGRAM, TOKENIZER, METADATA = "lm.pt2", "tokenizer.json", "metadata.json"
FORMAT = "refinery-lm/2"  # the program returns hidden states; the scorer runs the head in chunks
FORMAT_LOGITS = "refinery-lm/1"  # the program returns logits: still read, through the slow path
BATCH_TOKENS = {FORMAT: 8192, FORMAT_LOGITS: 512}  # default batch_tokens (see PerplexityOptions)
HEAD_ROWS = 256  # positions per head chunk ((256, 4,096) fp32 logits, 4 MB): of 128/256/1024 measured fastest
# First guess of the prefix to tokenize. train-lm's 4,096-token BPE needs 3.1 characters per token on
# the bench's real pages (p99 3.6, max 3.9); a 50K-vocabulary BPE ~4.5 on English. 8 (before) tokenized
# ~2.5x the text needed: 0.76 CPU-s against 0.47 with 5 to tokenize those 399 pages.
CHARS_PER_TOKEN = 5
HEAD_PRECISIONS = ("bf16", "fp32")
# Documents per process after which compiling pays back its 25-75 s: ~16,000 with inductor's cache warm,
# ~50,000 cold (bench/classifiers/perplexity_throughput.py, module docstring); "auto" takes the cold case.
COMPILE_PAYBACK_DOCS = 50_000
MAX_SEQ_LEN = 1 << 20  # tokens per row; far past any LM here, a bound so a forged number cannot size windows
MAX_VOCAB = 1 << 24
MAX_TOKENIZER_BYTES = 256 << 20  # a 50K-vocabulary BPE's tokenizer.json is a few MB


class PerplexityOptions(ConfigModel):
    """`--option perplexity.KEY=VALUE` of the score job."""

    max_tokens: int | None = None
    """Tokens per window (one model row); default and most: the model's training seq_len (train-lm: 512)."""
    max_chunks: int = 1
    """Windows per document: 1 scores the first max_tokens tokens; more reads further, at more cost."""
    batch_tokens: int | None = None
    """Padded tokens per forward call (rows × longest row): short rows share a call. Default: 8,192 for a
    format-2 model (hidden states; the head runs in chunks, so a large call only amortises the program's
    per-call cost, ~2 ms), 512 for a format-1 model (its logits of larger calls fall out of cache);
    measured by bench/classifiers/perplexity_throughput.py."""
    threads: int = 1
    """torch intra-op threads of the process (a Spark executor core: 1)."""
    head_precision: str | None = None
    """The LM head of a format-2 model: "bf16" (default) projects bf16-rounded hidden states on a
    bf16 copy of the head weight (fp32 accumulation) and takes the softmax of those logits, then
    corrects each position's NLL by the target logit's rounding (the target logit is recomputed in
    fp32, so only the normaliser is approximate); "fp32" runs it all in fp32. bf16 scores differ from
    fp32 by < 1e-3 relative (see the module docstring: Spearman 0.999998 on 313 English shared-WARC
    pages, none changes side of the demo recipe's band) and the head runs ~1.7-2x faster on a CPU
    with avx512_bf16/AMX (slower without: a warning says so). A format-1 model is fp32 only."""
    compile: bool | Literal["auto"] = "auto"
    """torch.compile (inductor, CPU: needs a C++ compiler) the program: ~20% off its forward, after a
    one-off compile of ~25-75 s per process (cached across processes by inductor's FX graph cache).
    "auto" (default): the score job turns it on when each executor core will score at least
    COMPILE_PAYBACK_DOCS documents, where the compile has paid for itself (`PerplexityScorer.plan`),
    and off for smaller jobs and outside the score job. If compiling fails the scorer logs why and
    runs the program as exported."""

    @model_validator(mode="after")
    def _check(self) -> PerplexityOptions:
        if self.head_precision is not None:
            check_choice("perplexity.head_precision", self.head_precision, HEAD_PRECISIONS)
        if self.max_tokens is not None and self.max_tokens < 2:
            raise ConfigError(f"perplexity.max_tokens must be >= 2, got {self.max_tokens}")
        for key in ("max_chunks", "batch_tokens", "threads"):
            if getattr(self, key) is not None and getattr(self, key) < 1:
                raise ConfigError(f"perplexity.{key} must be >= 1, got {getattr(self, key)}")
        return self

    @property
    def kept_tokens(self) -> int:
        return self.max_chunks * (self.max_tokens - 1) + 1


def read_lm_metadata(model_dir: str | Path) -> dict[str, Any]:
    """metadata.json of an LM folder, after checking the folder has what scoring needs."""
    d, meta = read_folder_json(
        model_dir, "an LM folder", (PROGRAM, TOKENIZER, METADATA), "make one with train-lm", METADATA
    )
    if not isinstance(meta, dict) or meta.get("format") not in (FORMAT, FORMAT_LOGITS):
        raise ModelError(f"{d / METADATA}: not an LM of format {FORMAT} (not written by trainer.export_lm?)")
    if meta["format"] == FORMAT and not isinstance(meta.get("head_weight"), str):
        raise ModelError(f"{d / METADATA}: `head_weight` must name the program's LM-head parameter")
    langs = meta.get("languages")
    if not (isinstance(langs, list) and langs and all(isinstance(x, str) for x in langs)):
        raise ModelError(f"{d / METADATA}: `languages` must be a non-empty list of language codes")
    # the numbers that size the scorer's rows and the head check: bounded, not just present
    mc = meta.get("model_config")
    for key, value, low, high in (
        ("seq_len", meta.get("seq_len"), 2, MAX_SEQ_LEN),
        ("vocab_size", meta.get("vocab_size"), 1, MAX_VOCAB),
        ("model_config.d_model", mc.get("d_model") if isinstance(mc, dict) else None, 1, MAX_VOCAB),
    ):
        if value is None and key != "seq_len" and meta["format"] == FORMAT_LOGITS:
            continue  # a format-1 program has no separate head to check them against
        if type(value) is not int or not low <= value <= high:
            raise ModelError(
                f"{d / METADATA}: `{key}` must be an integer in [{low}, {high}], got {str(value)[:40]}"
            )
    return meta


def _options(options: dict[str, Any], meta: dict[str, Any], model: str) -> PerplexityOptions:
    """The options with max_tokens (the model's seq_len when not given) and batch_tokens resolved."""
    opts = build_config(PerplexityOptions, options, "perplexity options")
    if opts.head_precision is None:  # a logits program has no separate head to run in bf16
        opts = opts.replace(head_precision="bf16" if meta["format"] == FORMAT else "fp32")
    elif opts.head_precision != "fp32" and meta["format"] != FORMAT:
        raise ConfigError(f"perplexity.head_precision={opts.head_precision} needs a {FORMAT} model; "
                          f"{model} is {meta['format']} (its program returns fp32 logits)")  # fmt: skip
    if opts.batch_tokens is None:
        opts = opts.replace(batch_tokens=BATCH_TOKENS[meta["format"]])
    if opts.max_tokens is None:
        return opts.replace(max_tokens=meta["seq_len"])
    if opts.max_tokens > meta["seq_len"]:
        raise ConfigError(f"perplexity.max_tokens={opts.max_tokens} is longer than the rows {model} was "
                          f"trained on (seq_len {meta['seq_len']})")  # fmt: skip
    return opts


def _prefix_safe(tokenizer_json: dict[str, Any]) -> bool:
    """True when a prefix cut before whitespace tokenizes as the start of the whole text (see docstring)."""
    pre = tokenizer_json.get("pre_tokenizer") or {}
    return (
        tokenizer_json.get("normalizer") is None
        and pre.get("type") == "ByteLevel"
        and pre.get("use_regex", True)
    )


def _cut(text: str, limit: int) -> int | None:
    """The largest cut <= limit where text[cut] is a space or newline after a non-space; None if none."""
    i = limit
    while True:
        i = max(text.rfind(" ", 0, i), text.rfind("\n", 0, i))
        if i <= 0:
            return None
        if not text[i - 1].isspace():
            return i


def _head_weight(program, meta: dict[str, Any], model: str):
    """The LM-head weight a format-2 program's hidden states are projected with, looked up among the
    program's parameters by the name metadata gives (no attribute lookup by a name from the file)."""
    w = dict(program.named_parameters(remove_duplicate=False)).get(meta["head_weight"])  # tied: both names
    if w is None:
        raise ModelError(
            f"{model}: the program has no parameter {meta['head_weight']!r} (metadata head_weight)"
        )
    want = (meta.get("vocab_size"), meta.get("model_config", {}).get("d_model"))
    if w.dim() != 2 or tuple(w.shape) != want or w.dtype.is_complex or not w.dtype.is_floating_point:
        raise ModelError(f"{model}: head weight {meta['head_weight']} is {tuple(w.shape)} {w.dtype}, "
                         f"not (vocab_size, d_model) = {want} floating point")  # fmt: skip
    return w.detach()


def _native_bf16() -> bool:
    """True when oneDNN runs bf16 matmuls natively on this CPU (else it emulates them, slower than fp32)."""
    import torch

    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):  # a build without oneDNN: treat as emulated
        return False


def _compiled(program, model: str):
    """`torch.compile(program)` (inductor, shapes dynamic: one compile serves every batch), compiled
    now on a small batch so that a failure (no C++ compiler, an unsupported op) shows here: then the
    reason is logged and the exported program is returned as it was."""
    import torch

    t0 = time.time()
    try:
        compiled = torch.compile(program, dynamic=True)
        with torch.inference_mode():
            compiled(torch.zeros((2, 8), dtype=torch.long))  # >= 2 rows: see _run_program
    except Exception as e:  # any compile failure: the exported program still scores exactly
        log.warning("perplexity.compile: compiling %s failed, scoring with the exported program "
                    "uncompiled: %s: %s", model, type(e).__name__, str(e).splitlines()[0] if str(e) else "")  # fmt: skip
        return program
    log.info("perplexity.compile: %s compiled in %.1f s", model, time.time() - t0)
    return compiled


@dataclass(slots=True)
class DocNLL:
    """Sums over the scored tokens of each document (arrays of len(texts))."""

    nll: np.ndarray  # float64 nats
    tokens: np.ndarray  # int64 predicted tokens
    bytes: np.ndarray  # int64 UTF-8 bytes they cover


class PerplexityScorer(Scorer):
    kind = "perplexity"

    def __init__(
        self, program, tokenizer, metadata: dict[str, Any], options: PerplexityOptions, head=None
    ) -> None:
        self.program = program
        self.head = head  # (V, C) LM-head weight for a hidden-state program (format 2); None: logits program
        # its bf16 copy, made once, for head_precision=bf16 (None: the head runs in fp32)
        self.head_bf16 = None
        if head is not None and options.head_precision == "bf16":
            import torch

            self.head_bf16 = head.to(torch.bfloat16)
        self.eager_program = program  # what `program` falls back to if a compiled one fails later
        self.tokenizer = tokenizer
        self.metadata = metadata
        self.options = options
        # matched as languages (core/languages.py): a model trained for `en` scores `eng_Latn` documents
        self.languages = LanguageSet(metadata["languages"])
        # `tokenizers`' own serialization of the tokenizer it loaded (and checked), not outside text
        self.prefix_safe = _prefix_safe(json.loads(tokenizer.to_str()))
        self.chars_per_token = CHARS_PER_TOKEN  # the bench sets 8 to time the scorer as it was
        # where the time goes, accumulated over calls (bench/classifiers/perplexity_throughput.py reads it)
        self.seconds = {"tokenize": 0.0, "forward": 0.0, "nll": 0.0}

    @property
    def columns(self) -> tuple[str, ...]:
        return ("perplexity", "perplexity_bpb")

    # ---------------------------------------------------------------- driver side
    @classmethod
    def describe(cls, model: str, options: dict[str, Any]) -> dict[str, Any]:
        meta = read_lm_metadata(model)
        opts = _options(options, meta, model)
        files = meta.get("files") or {}
        for name in (PROGRAM, TOKENIZER):
            if sha256_file(Path(model) / name) != files.get(name):
                raise ModelError(f"{model}/{name} does not match the sha256 of its metadata.json")
        # tokenizer.json through the checked reader before the tokenizers library parses it: its hash
        # only proves it is the file metadata.json names, and a deep or non-finite one is refused by name
        read_model_json(Path(model) / TOKENIZER, MAX_TOKENIZER_BYTES)
        # the archive's static check here, on the driver: a hostile lm.pt2 is refused before Spark
        # starts or an output folder exists (load_program checks it again where it loads)
        from classifiers.lm_archive import check_archive

        check_archive(Path(model) / PROGRAM)
        return {
            "model_sha256": files[PROGRAM],
            "tokenizer_sha256": files[TOKENIZER],
            "languages": sorted(meta["languages"]),
            **opts.to_dict(),
        }

    @classmethod
    def plan(cls, options: dict[str, Any], docs_per_process: int) -> dict[str, Any]:
        """compile="auto" (the default) resolved for the job: on where each process scores enough
        documents for the compile to pay back."""
        if options.get("compile", "auto") != "auto":
            return options
        return {**options, "compile": docs_per_process >= COMPILE_PAYBACK_DOCS}

    @classmethod
    def load(cls, model: str, options: dict[str, Any]) -> PerplexityScorer:
        try:
            import torch
        except ImportError as e:
            raise ImportError("perplexity scoring runs the LM with torch: pip install torch==2.13.0") from e
        from tokenizers import Tokenizer

        from classifiers.lm_archive import load_program

        cls.describe(model, options)  # the hashes again: this process may run long after the driver checked
        meta = read_lm_metadata(model)
        opts = _options(options, meta, model)
        torch.set_num_threads(opts.threads)
        program = load_program(Path(model) / PROGRAM)
        head = _head_weight(program, meta, model) if meta["format"] == FORMAT else None
        tokenizer = Tokenizer.from_file(str(Path(model) / TOKENIZER))
        # as `tokens tokenize` made the training shards: a special token's text in a document is plain text
        tokenizer.encode_special_tokens = True
        if opts.head_precision == "bf16" and not _native_bf16():
            log.warning("perplexity.head_precision=bf16 on a CPU without native bf16 matmuls (avx512_bf16 "
                        "or AMX): same scores, but the head runs slower than in fp32")  # fmt: skip
        scorer = cls(program, tokenizer, meta, opts, head)
        if opts.compile is True:  # "auto" left unresolved (evaluate, train-ensemble: small jobs): off
            scorer.program = _compiled(program, model)
        return scorer

    # ---------------------------------------------------------------- tokens
    def _encode(self, text: str):
        try:
            return self._encode_prefix(text)
        except UnicodeEncodeError:  # lone surrogates from badly decoded pages cannot cross into Rust
            return self._encode_prefix(text.encode("utf-8", "replace").decode("utf-8"))

    def _encode_prefix(self, text: str):
        need = self.options.kept_tokens
        limit = need * self.chars_per_token
        while self.prefix_safe and len(text) > limit:
            cut = _cut(text, limit)
            if cut is None:
                break
            enc = self.tokenizer.encode(text[:cut], add_special_tokens=False)
            if len(enc.ids) >= need:
                return enc
            # too few tokens (a rare second call): at least double, more if this prefix showed more
            # characters per token; doubling also gets past a long run without spaces before `limit`
            limit = max(2 * limit, int(cut * need / max(len(enc.ids), 1) * 1.25))
        return self.tokenizer.encode(text, add_special_tokens=False)

    def windows(self, text: str) -> tuple[list[list[int]], int]:
        """The rows one text is scored as (windows overlapping by one token) and the bytes they predict."""
        t0 = time.process_time()
        enc = self._encode(text)
        self.seconds["tokenize"] += time.process_time() - t0
        ids = enc.ids[: self.options.kept_tokens]
        if len(ids) < 2:
            return [], 0
        offsets = enc.offsets
        scored = text[offsets[0][1] : offsets[len(ids) - 1][1]]
        step = self.options.max_tokens - 1
        rows = [ids[s : s + self.options.max_tokens] for s in range(0, len(ids) - 1, step)]
        return rows, len(scored.encode("utf-8", "replace"))

    # ---------------------------------------------------------------- model
    def nll(self, texts: list[str]) -> DocNLL:
        """Summed NLL, predicted tokens and bytes per text (zeros for a text of fewer than 2 tokens)."""
        n = len(texts)
        out = DocNLL(np.zeros(n), np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64))
        rows: list[tuple[int, list[int]]] = []
        for i, text in enumerate(texts):
            doc_rows, out.bytes[i] = self.windows(text)
            rows += [(i, r) for r in doc_rows]
        rows.sort(key=lambda r: -len(r[1]))  # longest first: each batch pads to its first row
        start = 0
        while start < len(rows):
            width = len(rows[start][1])
            end = start + max(1, self.options.batch_tokens // width)
            batch = rows[start:end]
            sums = self._forward([r for _, r in batch], width)
            for (doc, ids), s in zip(batch, sums):
                out.nll[doc] += s
                out.tokens[doc] += len(ids) - 1
            start = end
        return out

    def _forward(self, rows: list[list[int]], width: int) -> np.ndarray:
        """Summed NLL of each row's tokens 1.. (float64 sums of fp32 per-token values)."""
        import torch

        b = len(rows)
        tokens = torch.zeros((b, width), dtype=torch.long)
        targets = torch.full((b, width), -100, dtype=torch.long)  # -100: not scored (padding, last position)
        for j, ids in enumerate(rows):
            t = torch.tensor(ids, dtype=torch.long)
            tokens[j, : len(ids)] = t
            targets[j, : len(ids) - 1] = t[1:]
        if self.head is not None:
            return self._forward_hidden(tokens, targets)
        with torch.inference_mode():
            t0 = time.process_time()
            logits = self._run_program(tokens)  # (B, T, V); right padding cannot reach earlier positions
            t1 = time.process_time()
            # -log softmax at the target, from softmax itself: torch's CPU softmax runs ~2x faster than its
            # log_softmax / cross_entropy here (1.3 vs 3.0 ms for 512 x 4,096, bench/classifiers/perplexity_throughput.py),
            # and loses nothing: softmax is exact to ~1e-7 relative for any p >= 1.2e-38 (fp32 tiny),
            # below which a token counts as -log(tiny) = 87.3 nats (e^87 perplexity: no real text).
            probs = torch.softmax(logits.view(b * width, -1), dim=-1)  # (B*T, V)
            p = probs.gather(1, targets.view(-1, 1).clamp(min=0)).view(b, width)
            nll = -torch.log(p.clamp(min=torch.finfo(p.dtype).tiny)) * (targets >= 0)
            sums = nll.double().sum(dim=1).numpy()
        self.seconds["forward"] += t1 - t0
        self.seconds["nll"] += time.process_time() - t1
        return sums

    def _run_program(self, tokens):
        """The program on one batch. A compiled program gets at least 2 rows (a padding row is added to
        a 1-row batch, its output dropped): torch.compile specialises size 1, so a 1-row batch would
        compile a second time. If the compiled program fails, the reason is logged and this scorer
        runs the exported program from then on."""
        if self.program is self.eager_program:
            return self.program(tokens)
        import torch

        b = tokens.shape[0]
        x = torch.cat([tokens, torch.zeros_like(tokens)]) if b == 1 else tokens
        try:
            return self.program(x)[:b]
        except Exception as e:  # as in _compiled
            log.warning("perplexity.compile: the compiled program failed on a (%d, %d) batch, scoring with "
                        "the exported program from now on: %s: %s", *x.shape, type(e).__name__, e)  # fmt: skip
            self.program = self.eager_program
            return self.program(tokens)

    def _forward_hidden(self, tokens, targets) -> np.ndarray:
        """Format 2: the program's hidden states, then the head over the scored positions only, HEAD_ROWS
        at a time, so a batch's (B, T, V) logits never exist (a chunk's stay in cache). Per position the
        same fp32 ops as the logits path: projection, softmax, the target's probability, its -log."""
        import torch

        b, width = tokens.shape
        with torch.inference_mode():
            t0 = time.process_time()
            hidden = self._run_program(tokens)  # (B, T, C); right padding cannot reach earlier positions
            t1 = time.process_time()
            scored = (targets >= 0).view(-1)
            h = hidden.reshape(b * width, -1)[scored]  # (N, C): neither padding nor a row's last position
            tgt = targets.view(-1)[scored]
            p = torch.empty(len(tgt))
            if self.head_bf16 is None:
                for s in range(0, len(tgt), HEAD_ROWS):
                    # the fast path: see _forward
                    probs = torch.softmax(h[s : s + HEAD_ROWS] @ self.head.t(), dim=-1)
                    p[s : s + HEAD_ROWS] = probs.gather(1, tgt[s : s + HEAD_ROWS, None])[:, 0]
                nll = -torch.log(p.clamp(min=torch.finfo(p.dtype).tiny))
            else:
                nll = self._head_bf16(h, tgt, p)
            row = torch.arange(b).repeat_interleave(width)[scored]
            sums = torch.zeros(b, dtype=torch.float64).index_add_(0, row, nll.double()).numpy()
        self.seconds["forward"] += t1 - t0
        self.seconds["nll"] += time.process_time() - t1
        return sums

    def _head_bf16(self, h, tgt, p):
        """head_precision=bf16: -log p(target) per position, where the normaliser comes from bf16 logits
        and the target's logit is exact. Per chunk: logits = bf16(h) @ bf16(W)ᵀ (oneDNN, fp32
        accumulation, bf16 out: 2x the fp32 matmul's speed here) and their softmax (fp32 inside, bf16
        out; faster than logsumexp), giving -log p16 = lse16 − l16[t]. Adding l16[t] − l32[t], the
        target logit's rounding, with l32[t] = h · W[t] in fp32 (64 multiply-adds per position), leaves
        lse16 − l32[t]: only the normaliser is from bf16 logits, an average over the vocabulary whose
        rounding errors mostly cancel (3x smaller document error than the plain bf16 softmax)."""
        import torch

        corr = torch.empty_like(p)
        for s in range(0, len(tgt), HEAD_ROWS):
            hs, ts = h[s : s + HEAD_ROWS], tgt[s : s + HEAD_ROWS, None]
            logits = hs.to(torch.bfloat16) @ self.head_bf16.t()  # (n, V) bf16
            p[s : s + HEAD_ROWS] = torch.softmax(logits, dim=-1).gather(1, ts)[:, 0]
            corr[s : s + HEAD_ROWS] = logits.gather(1, ts)[:, 0].float() - (hs * self.head[ts[:, 0]]).sum(-1)
        # bf16 has fp32's exponent range: the same floor as the fp32 path for an underflowed p
        return corr - torch.log(p.clamp(min=torch.finfo(p.dtype).tiny))

    def score(self, texts: list[str | None], langs: list[str | None]) -> dict[str, np.ndarray]:
        ppl = np.full(len(texts), np.nan, dtype=np.float32)
        bpb = np.full(len(texts), np.nan, dtype=np.float32)
        idx = [i for i, (t, lang) in enumerate(zip(texts, langs)) if t is not None and lang in self.languages]
        if idx:
            r = self.nll([texts[i] for i in idx])
            ok = (r.tokens > 0) & (r.bytes > 0)
            sel = np.asarray(idx)[ok]
            ppl[sel] = np.exp(r.nll[ok] / r.tokens[ok])
            bpb[sel] = r.nll[ok] / math.log(2) / r.bytes[ok]
        return {"perplexity": ppl, "perplexity_bpb": bpb}
