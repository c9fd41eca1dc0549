"""`classifiers annotate` against a local chat-completions server, on the DCLM human-labelled documents.

The server (a threading http.server on 127.0.0.1, nothing on the network) speaks the OpenAI protocol:
POST /v1/chat/completions, JSON in and out, `choices[0].message.content` and `usage`. Its "model" is this
file's own: it finds the document inside the prompt and scores it from the document's length in words
(log2 of words/40, capped at 5), so labels vary with the real texts; about one document in ten (by a hash
of its text) gets a reply without a score line, which must be kept and counted as unparseable. The server
records every request (arrival time, document, status answered), so the tests check what was sent, and
paid for, on the server side: a resume never pays twice, Retry-After is waited for, the rate limit holds.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from classifiers.chat_client import Pacer, parse_retry_after
from classifiers.cli import main

REPO = Path(__file__).resolve().parents[2]
PROMPT = REPO / "configs" / "prompts" / "fineweb-edu.txt"
HEAD, TAIL = PROMPT.read_text(encoding="utf-8").split("{text}")


def edu_model(doc: str) -> str:
    """The server's deterministic "LLM" reply for one document."""
    if hashlib.sha256(doc.encode()).digest()[0] < 26:  # ~1 in 10 (26/256): a reply with no score line
        return "I am unable to rate this extract."
    words = len(doc.split())
    return f"The extract runs to {words} words.\nEducational score: {min(5, int(math.log2(1 + words / 40)))}"


def expected_score(doc: str) -> float | None:
    reply = edu_model(doc)
    return float(reply.rsplit(": ", 1)[1]) if "score:" in reply else None


class ChatServer:
    """The local endpoint. `fail(doc, n)` -> (status, headers) fails the n-th request (1-based) of a doc."""

    def __init__(self, fail=None, kill_at: int | None = None) -> None:
        self.fail, self.kill_at, self.kill_pid = fail, kill_at, None
        self.log: list[dict] = []  # one per request: t (arrival), doc, status, sent (when answered)
        self.auth: list[str | None] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                t = time.monotonic()
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                content = body["messages"][0]["content"]
                assert (
                    self.path == "/v1/chat/completions"
                    and content.startswith(HEAD)
                    and content.endswith(TAIL)
                )
                doc = content[len(HEAD) : len(content) - len(TAIL)]
                with server.lock:
                    n = sum(r["doc"] == doc for r in server.log) + 1
                    entry = {"t": t, "doc": doc, "status": None}
                    server.log.append(entry)
                    server.auth.append(self.headers.get("Authorization"))
                    if server.kill_at is not None and len(server.log) == server.kill_at:
                        os.kill(
                            server.kill_pid, signal.SIGKILL
                        )  # the client dies with this request unanswered
                        return
                status, headers = (server.fail and server.fail(doc, n)) or (200, {})
                reply = edu_model(doc)
                usage = {"prompt_tokens": len(content) // 4, "completion_tokens": len(reply) // 4}
                data = {"choices": [{"message": {"role": "assistant", "content": reply}}], "usage": usage}
                payload = json.dumps(data if status == 200 else {"error": "busy"}).encode()
                entry["status"], entry["sent"] = status, time.monotonic()
                self.send_response(status)
                for k, v in {**headers, "Content-Type": "application/json"}.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()

    def paid(self) -> Counter:
        """Documents -> replies answered 200 (what a hosted API bills)."""
        return Counter(r["doc"] for r in self.log if r["status"] == 200)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server_factory():
    servers: list[ChatServer] = []

    def make(**kw) -> ChatServer:
        servers.append(ChatServer(**kw))
        return servers[-1]

    yield make
    for s in servers:
        s.close()


def args(labelled: Path, server: ChatServer, out: Path, *extra: str) -> list[str]:
    return [
        "annotate", "--input", str(labelled), "--endpoint", server.url, "--model", "edu-test",
        "--prompt", str(PROMPT), "--output", str(out), *extra,
    ]  # fmt: skip


def labels(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "labels.jsonl").read_text(encoding="utf-8").splitlines()]


def check_labels(out: Path, server: ChatServer, n: int) -> dict[str, float | None]:
    """Every sampled document has exactly one label, the server's score for the text it was sent."""
    recs = labels(out)
    assert len(recs) == n and len({r["key"] for r in recs}) == n and len({r["id"] for r in recs}) == n
    for r in recs:
        assert r["score"] == expected_score(r["text"]), r["reply"]
        assert r["score"] is not None or r["reply"] == edu_model(r["text"])  # the raw reply is kept
    assert set(server.paid()) == {r["text"] for r in recs}
    return {r["id"]: r["score"] for r in recs}


def test_resume_after_kill_pays_nothing_twice(labelled, server_factory, tmp_path):
    """A run SIGKILLed at its 13th request resumes to the labels of an uninterrupted run; no reply paid twice."""
    server = server_factory(kill_at=13)
    cmd = [sys.executable, "-m", "classifiers", *args(labelled, server, tmp_path / "a", "--sample", "40")]
    cmd += ["--set", "client.concurrency=1"]  # one request in flight: the kill leaves exactly 12 labels
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    server.kill_pid = proc.pid
    assert proc.wait(timeout=60) == -signal.SIGKILL, proc.stderr.read().decode()
    assert len(labels(tmp_path / "a")) == 12

    server.kill_at = None
    assert main(args(labelled, server, tmp_path / "a", "--sample", "40")) == 0
    resumed = check_labels(tmp_path / "a", server, 40)
    assert max(server.paid().values()) == 1  # the 13th was never answered, so not paid; the rest once
    assert len(server.log) == 41
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert summary["counts"]["cached"] == 12 and summary["counts"]["labelled"] == 28
    unparseable = sum(s is None for s in resumed.values())
    assert unparseable >= 1 and len(set(resumed.values())) >= 3  # labels vary with the texts
    assert summary["score_histogram"]["None"] == unparseable

    clean = server_factory()
    assert main(args(labelled, clean, tmp_path / "b", "--sample", "40")) == 0
    assert check_labels(tmp_path / "b", clean, 40) == resumed


def test_retries_honour_retry_after_and_failed_documents_rerun(labelled, server_factory, tmp_path, capsys):
    """429 (Retry-After: 1) and 500s are retried; a document past max_tries fails, and the rerun labels it."""

    def fail(doc: str, n: int):
        h = hashlib.sha256(doc.encode()).digest()[1] % 8
        if h == 7:  # answered 500 five times: fails a run of 3 tries, then the rerun's 3rd try succeeds
            return (500, {}) if n <= 5 else None
        if h == 0 and n == 1:
            return 429, {"Retry-After": "1"}
        if h in (1, 2) and n <= 2:
            return 503, {}
        return None

    server = server_factory(fail=fail)
    base = args(labelled, server, tmp_path / "out", "--sample", "60", "--set", "client.max_tries=3")
    base += ["--set", "client.backoff_base_s=0.05", "--set", "client.concurrency=4"]
    assert main(base) == 1  # the stubborn documents failed
    err = capsys.readouterr().err
    stubborn = {r["doc"] for r in server.log if r["status"] == 500}
    assert stubborn and f"{len(stubborn)} document(s) failed" in err and "HTTP 500, 3 tries" in err
    assert not stubborn & {r["text"] for r in labels(tmp_path / "out")}
    assert main(base) == 0
    check_labels(tmp_path / "out", server, 60)
    assert max(server.paid().values()) == 1

    by_doc: dict[str, list[dict]] = {}
    for r in server.log:
        by_doc.setdefault(r["doc"], []).append(r)
    throttled = [rs for rs in by_doc.values() if rs[0]["status"] == 429]
    assert len(throttled) >= 3 and all(len(rs) == 2 for rs in throttled)
    # Same process, same monotonic clock: the retry may not arrive before 1 s after the 429 was sent.
    assert min(rs[1]["t"] - rs[0]["sent"] for rs in throttled) >= 1.0
    # Backoff without Retry-After: base 0.05 s, equal jitter, so >= 0.025 s then >= 0.05 s.
    for rs in (rs for rs in by_doc.values() if rs[0]["status"] == 503):
        assert rs[1]["t"] - rs[0]["sent"] >= 0.025 and rs[2]["t"] - rs[1]["sent"] >= 0.05
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["counts"]["cached"] == 60 - len(stubborn) and summary["counts"]["labelled"] == len(
        stubborn
    )


def test_rate_limit_measured_on_the_server(labelled, server_factory, tmp_path):
    """600 requests/min: any k+1 consecutive arrivals span >= k x 0.1 s (tolerance below); without it they burst."""
    free = server_factory()
    assert (
        main(args(labelled, free, tmp_path / "free", "--sample", "16", "--set", "client.concurrency=4")) == 0
    )
    limited = server_factory()
    extra = ["--sample", "16", "--set", "client.concurrency=4", "--set", "client.requests_per_minute=600"]
    assert main(args(labelled, limited, tmp_path / "limited", *extra)) == 0

    def shortest_spans(log: list[dict]) -> list[float]:
        t = sorted(r["t"] for r in log)
        return [min(t[i + k] - t[i] for i in range(len(t) - k)) - k * 0.1 for k in range(1, len(t))]

    # Starts are spaced by the client; arrival adds loopback delivery and thread scheduling delay, which
    # differs between two requests by at most a few ms when idle and tens of ms on a loaded 2-core machine:
    # 0.03 s of tolerance, under a third of the interval so a broken limiter (a burst of 4) still fails.
    assert min(shortest_spans(limited.log)) >= -0.03
    assert min(shortest_spans(free.log)) < -0.03  # the control: unlimited, 4 workers arrive together


def test_pacer_tokens_per_minute_exact():
    """Fake clock: 6,000 tokens/min, tries of 500 tokens start 5 s apart; with 60 requests/min too, the later wins."""
    now = [0.0]
    starts = []

    def sleep(s: float) -> None:
        now[0] += s

    pacer = Pacer(rpm=None, tpm=6000, clock=lambda: now[0], sleep=sleep)
    for _ in range(4):
        pacer.wait(500)
        starts.append(now[0])
    assert starts == [0.0, 5.0, 10.0, 15.0]
    both = Pacer(rpm=60, tpm=6000, clock=lambda: now[0], sleep=sleep)
    t0 = now[0]
    for tokens in (10, 10, 1000, 10):  # 1 s per request; 0.1 s, then 10 s for the 1,000-token try
        both.wait(tokens)
        starts.append(now[0] - t0)
    assert starts[4:] == [0.0, 1.0, 2.0, 12.0]
    assert (
        parse_retry_after("7") == 7.0
        and parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470) == 10.0
    )
    assert parse_retry_after("soon") is None


def test_cost_estimate_dry_run_and_max_cost(labelled, server_factory, tmp_path, capsys):
    """The estimate is printed; --dry-run and --max-cost (exit 2) send nothing and write nothing;
    the estimated prompt tokens match what the server billed."""
    server = server_factory()
    prices = ["--set", "cost.price_input_per_million=3", "--set", "cost.price_output_per_million=15"]
    out = tmp_path / "out"
    assert main(args(labelled, server, out, "--sample", "20", "--dry-run", *prices)) == 0
    line = capsys.readouterr().out
    assert line.startswith("estimate: 20 documents to label (0 already labelled)")
    assert main(args(labelled, server, out, "--sample", "20", "--max-cost", "0.001", *prices)) == 2
    assert "above --max-cost $0.001" in capsys.readouterr().err
    assert server.log == [] and not out.exists()

    assert main(args(labelled, server, out, "--sample", "20", *prices)) == 0
    summary = json.loads((out / "summary.json").read_text())
    est, billed = summary["estimate"], summary["billed_tokens"]["prompt"]
    # The server bills floor(chars / 4), the estimate is ceil(chars / 4) per document: within 1 token each.
    assert 0 <= est["input_tokens"] - billed <= 20
    assert est["cost"] == pytest.approx((est["input_tokens"] * 3 + 20 * 150 * 15) / 1e6)
    assert f"${est['cost']:.4f}" in line
    assert main(args(labelled, server, out, "--sample", "20", "--dry-run")) == 0
    assert "estimate: 0 documents to label (20 already labelled)" in capsys.readouterr().out


def test_torn_last_line_relabels_that_document_only(labelled, server_factory, tmp_path):
    server = server_factory()
    out = tmp_path / "out"
    assert main(args(labelled, server, out, "--sample", "8")) == 0
    raw = (out / "labels.jsonl").read_bytes()
    (out / "labels.jsonl").write_bytes(raw[: raw.rstrip(b"\n").rfind(b"\n") + 30])  # a crash mid-line
    assert main(args(labelled, server, out, "--sample", "8")) == 0
    check_labels(out, server, 8)
    assert len(server.log) == 9 and sorted(server.paid().values()) == [1] * 7 + [2]


def test_api_key_sent_never_written_and_401_stops(labelled, server_factory, tmp_path, monkeypatch, capsys):
    secret = "sk-test-" + "7" * 24
    monkeypatch.setenv("REFINERY_TEST_LLM_KEY", secret)
    server = server_factory()
    key = ["--set", "client.api_key_env=REFINERY_TEST_LLM_KEY"]
    assert main(args(labelled, server, tmp_path / "out", "--sample", "5", *key)) == 0
    assert server.auth == [f"Bearer {secret}"] * 5
    for f in (tmp_path / "out").iterdir():
        assert secret not in f.read_text(encoding="utf-8"), f

    refused = server_factory(fail=lambda doc, n: (401, {}))
    assert main(args(labelled, refused, tmp_path / "o401", "--sample", "30", *key)) == 2
    assert "HTTP 401 (the API key was refused" in capsys.readouterr().err
    assert len(refused.log) <= 8  # the workers in flight (concurrency 8), then nothing more is sent


@pytest.mark.parametrize(
    "change, message",
    [
        ({"--endpoint": "ftp://127.0.0.1/v1"}, "expected an http(s) URL"),
        ({"--endpoint": "localhost:8000/v1"}, "expected an http(s) URL"),
        ({"--endpoint": "http://user:pw@127.0.0.1/v1"}, "must not hold credentials"),
        ({"--model": "two words"}, "expected a model name"),
        ({"--prompt": "NOPLACEHOLDER"}, "placeholder {text} exactly once"),
        ({"--sample": "0"}, "sample must be > 0"),
        ({"--sample": "100000"}, "distinct documents"),
        ({"--set": "client.api_key_env=REFINERY_TEST_UNSET_KEY"}, "not set"),
        ({"--set": "request.score_pattern=no group"}, "capture the score"),
        ({"--input": "README.md"}, "annotate reads JSONL"),
    ],
)
def test_bad_input_exits_2_before_any_request(labelled, server_factory, tmp_path, capsys, change, message):
    server = server_factory()
    argv = args(labelled, server, tmp_path / "out")
    for flag, value in change.items():
        if value == "NOPLACEHOLDER":
            value = str(tmp_path / "p.txt")
            Path(value).write_text(HEAD + "{document}" + TAIL, encoding="utf-8")
        if value == "README.md":
            value = str(REPO / value)
        if flag in argv:
            argv[argv.index(flag) + 1] = value
        else:
            argv += [flag, value]
    assert main(argv) == 2
    assert message in capsys.readouterr().err
    assert server.log == [] and not (tmp_path / "out").exists()


def test_parquet_input_keeps_ids(labelled, server_factory, tmp_path):
    """A Parquet folder with `id` and `text` (extract's docs/ layout): its ids name the labels."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    texts = [json.loads(x)["text"] for x in labelled.read_text(encoding="utf-8").splitlines()[:12]]
    (tmp_path / "docs").mkdir()
    table = pa.table({"id": [f"doc-{i}" for i in range(12)], "text": [*texts[:11], None]})
    pq.write_table(table, tmp_path / "docs" / "part-0.parquet")
    server = server_factory()
    argv = args(labelled, server, tmp_path / "out")
    argv[argv.index("--input") + 1] = str(tmp_path / "docs")
    assert main(argv) == 0
    assert {r["id"]: r["text"] for r in labels(tmp_path / "out")} == {f"doc-{i}": texts[i] for i in range(11)}
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["counts"]["empty_text"] == 1
