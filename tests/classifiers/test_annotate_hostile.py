"""`classifiers annotate` against hostile chat servers (issue 44, item 2, and the client part of item 4).

Every server here is a real one on 127.0.0.1 (nothing leaves the machine), started per test and stopped
with it; each handler loop is bounded by a byte count, a time limit and the server's own stop event, so
a client that misbehaves fails the test instead of hanging it. One class of hostile input per test, each
parametrized over its members: replies too large however they are framed; servers too slow in whatever
phase they stall; Ctrl-C wherever the workers wait; the key echoed in whatever place and form; terminal
control sequences of each kind; every redirect status; every out-of-range port; every client setting out
of the range its consumer can take. Bytes and seconds are measured, not guessed: the client's own count of
bytes read (`reply_bytes`), what the server managed to send, the monotonic clock around a try.
"""

from __future__ import annotations

import json
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import get_args
from urllib.parse import quote

import pytest

from classifiers.annotate import CLIENT_BOUNDS, DAY_S, ClientSettings, chat_url
from classifiers.chat_client import (
    ChatClient,
    EndpointError,
    Pacer,
    RequestFailed,
    Stopped,
    parse_retry_after,
    printable,
)
from classifiers.cli import main
from core.errors import ConfigError

pytestmark = pytest.mark.security

REPO = Path(__file__).resolve().parents[2]
PROMPT = REPO / "configs" / "prompts" / "fineweb-edu.txt"
SERVER_LIMIT_S = 30.0  # no handler of these servers runs longer, whatever the client does
SERVER_LIMIT_BYTES = 1 << 30  # nor sends more
CAP = 4096  # max_reply_bytes of the unit tests: small, so a reply just past it is quick to send
KEY = "sk-Test_0123456789/abc+def=XYZ"  # '/', '+', '=' make its percent-encoded form differ
OK_BODY = json.dumps({"choices": [{"message": {"content": "Educational score: 3"}}], "usage": {}}).encode()


class Hostile:
    """An HTTP/1.1 server on 127.0.0.1 whose `respond(handler)` writes the raw reply to each POST.

    It records each request's headers and, per request, the bytes `respond` managed to send and whether
    the client went away first (`closed`)."""

    def __init__(
        self,
        respond: Callable[[BaseHTTPRequestHandler], int],
        keep_alive: bool = False,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.stop = threading.Event()
        self.requests: list[dict[str, str]] = []
        self.sent: list[int] = []
        self.closed: list[bool] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            server_stop = self.stop  # what every loop of `respond` waits on, so close() ends it

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with server.lock:
                    server.requests.append(dict(self.headers))
                try:
                    n, gone = respond(self), False
                except (BrokenPipeError, ConnectionResetError):
                    n, gone = getattr(self, "written", -1), True
                with server.lock:
                    server.sent.append(n)
                    server.closed.append(gone)
                self.close_connection = not keep_alive

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        if tls is not None:
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}/v1"
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()

    def close(self) -> None:
        self.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()


class Silent:
    """A TCP listener on 127.0.0.1 that accepts and then says nothing: no status line, no TLS handshake."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.held: list[socket.socket] = []
        self.sock.settimeout(0.05)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        end = time.monotonic() + SERVER_LIMIT_S
        while not self.stop.is_set() and time.monotonic() < end:
            try:
                self.held.append(self.sock.accept()[0])
            except TimeoutError:
                continue

    def close(self) -> None:
        self.stop.set()
        self.thread.join()  # within one accept timeout: then nothing uses the listener any more
        for s in self.held:
            s.close()
        self.sock.close()


@pytest.fixture
def servers():
    made: list = []

    def make(kind=Hostile, *a):
        made.append(kind(*a))
        return made[-1]

    yield make
    for s in made:
        s.close()


def write(h: BaseHTTPRequestHandler, data: bytes) -> None:
    h.wfile.write(data)
    h.written = getattr(h, "written", 0) + len(data)


def head(h: BaseHTTPRequestHandler, status: int, headers: dict[str, str]) -> None:
    h.send_response(status)
    for k, v in headers.items():
        h.send_header(k, v)
    h.end_headers()


def stream(h: BaseHTTPRequestHandler, framing: str, size: int | None, filler: bytes | None = None) -> int:
    """A 200 of `size` bytes (None: endless, up to the server's limits) framed by Content-Length, chunks,
    or the end of the connection; `filler` (exact) replaces the default padding. Returns body bytes sent."""
    total = SERVER_LIMIT_BYTES if size is None else size
    headers = {"Content-Type": "application/json", "Connection": "close"}
    if framing == "length":
        headers["Content-Length"] = str(total)
    elif framing == "chunked":
        headers["Transfer-Encoding"] = "chunked"
    head(h, 200, headers)
    h.written = 0
    body = filler if filler is not None else None
    piece = b" " * 65536
    end = time.monotonic() + SERVER_LIMIT_S
    sent = 0
    while sent < total and time.monotonic() < end and not h.server_stop.is_set():
        part = body[sent : sent + 65536] if body is not None else piece[: total - sent]
        write(h, b"%x\r\n%s\r\n" % (len(part), part) if framing == "chunked" else part)
        sent += len(part)
    if framing == "chunked":
        write(h, b"0\r\n\r\n")
    return sent


def client(url: str, api_key: str | None = None, **options) -> ChatClient:
    settings = ClientSettings(**{"max_tries": 1, "max_reply_bytes": CAP, **options})
    return ChatClient(
        url + "/chat/completions", "m", settings.options(), {}, Pacer(None, None), api_key=api_key
    )


def padded(size: int) -> bytes:
    """A valid chat reply of exactly `size` bytes (JSON allows trailing whitespace)."""
    return OK_BODY + b" " * (size - len(OK_BODY))


# -- replies too large -----------------------------------------------------------------------------


@pytest.mark.parametrize("framing", ["length", "chunked", "close"])
@pytest.mark.parametrize("size", [CAP, CAP + 1, 2 << 30, None], ids=["cap", "cap+1", "2GiB", "endless"])
def test_reply_over_the_cap_fails_and_reads_at_most_cap_plus_one_byte(servers, framing, size):
    """Up to the cap a reply is read; past it the try fails, however the body is framed, and the client
    has read at most cap + 1 bytes (a declared Content-Length above the cap: none at all)."""
    filler = padded(size) if size == CAP else None
    server = servers(Hostile, lambda h: stream(h, framing, size, filler))
    c = client(server.url)
    if size == CAP:
        assert c.complete("x", 1).content == "Educational score: 3"
        assert c.counts["reply_bytes"] == CAP
        return
    with pytest.raises(RequestFailed, match=r"client\.max_reply_bytes=4,096") as e:
        c.complete("x", 1)
    assert c.counts["reply_bytes"] <= CAP + 1 and c.counts["reply_too_large"] == 1
    if framing == "length":
        assert "(Content-Length)" in str(e.value) and c.counts["reply_bytes"] == 0
    # The server saw the client go: it stopped far below what it would have sent. What it did send is
    # bounded by the cap plus what the two loopback socket buffers hold (net.ipv4.tcp_wmem/rmem maxima,
    # 4 MiB + 6 MiB by default); 64 MiB leaves room for tuned kernels and is still 1/16 of the limit.
    deadline = time.monotonic() + 10
    while not server.sent and time.monotonic() < deadline:
        time.sleep(0.01)
    if size != CAP + 1:  # cap + 1 bytes fit in the socket buffers: that server finished its reply
        assert server.closed == [True] and 0 <= server.sent[0] < 64 << 20, server.sent


def test_default_cap_is_one_mebibyte_and_a_hostile_json_reply_fails_cleanly(servers):
    assert ClientSettings().max_reply_bytes == 1 << 20
    deep = b"[" * 100_000 + b"]" * 100_000  # nested past the decoder's recursion limit
    server = servers(Hostile, lambda h: stream(h, "length", len(deep), deep))
    with pytest.raises(RequestFailed, match="not JSON"):
        client(server.url, max_reply_bytes=1 << 20).complete("x", 1)


def test_annotate_counts_and_lists_oversized_replies(labelled, servers, tmp_path, capsys):
    """Through the command: each document fails with the cap named, exit 1, summary.json counts them."""
    server = servers(Hostile, lambda h: stream(h, "length", 2 << 30))
    argv = [
        "annotate", "--input", str(labelled), "--endpoint", server.url, "--model", "m",
        "--prompt", str(PROMPT), "--output", str(tmp_path / "out"), "--sample", "4",
        "--set", "client.max_tries=1",
    ]  # fmt: skip
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "4 document(s) failed" in err and "more than client.max_reply_bytes=1,048,576" in err
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["requests"]["reply_too_large"] == 4 and summary["requests"].get("reply_bytes", 0) == 0


# -- servers too slow ------------------------------------------------------------------------------

DRIP_S = 0.2  # one byte this often: every read is far inside timeout_s, only the deadline can end it


def drip(h: BaseHTTPRequestHandler, data: bytes) -> int:
    end = time.monotonic() + SERVER_LIMIT_S
    for i in range(len(data)):
        if h.server_stop.wait(DRIP_S) or time.monotonic() > end:
            return i
        write(h, data[i : i + 1])
    return len(data)


def drip_status_line(h):
    return drip(h, b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(OK_BODY), OK_BODY))


def drip_headers(h):
    write(h, b"HTTP/1.1 200 OK\r\n")
    return drip(h, b"X-Slow: " + b"a" * 400 + b"\r\n\r\n")


def drip_body(h):
    head(h, 200, {"Content-Length": str(len(OK_BODY))})
    return drip(h, OK_BODY)


def drip_chunks(h):
    head(h, 200, {"Transfer-Encoding": "chunked"})
    return drip(h, b"".join(b"1\r\n%s\r\n" % OK_BODY[i : i + 1] for i in range(len(OK_BODY))) + b"0\r\n\r\n")


def drip_trailer(h):
    head(h, 200, {"Transfer-Encoding": "chunked"})
    write(h, b"%x\r\n%s\r\n0\r\n" % (len(OK_BODY), OK_BODY))
    return drip(h, b"X-Trailer: 1\r\n" * 100)  # the body is complete; its trailer never ends


# Which phase of a try stalls: silence after the connection (http: no status line; https: no TLS
# handshake), then a byte every DRIP_S in the status line, the headers, the body, the chunks, the trailer.
STALLS = {
    "silent-http": None,
    "silent-https": None,
    "status-line": drip_status_line,
    "headers": drip_headers,
    "body": drip_body,
    "chunks": drip_chunks,
    "trailer": drip_trailer,
}


def stalled(servers, stall: str) -> str:
    if STALLS[stall] is None:
        s = servers(Silent)
        return s.url.replace("http:", "https:") if stall == "silent-https" else s.url
    return servers(Hostile, STALLS[stall]).url


@pytest.mark.parametrize("stall", list(STALLS))
def test_a_try_ends_at_its_deadline_whatever_phase_stalls(servers, stall):
    """timeout_s=30 per read, deadline_s=1 per try: every stall ends at the deadline, counted as one.
    What ends it is read off the failure, not a clock: a read's own timeout would fail with a
    timeout, and only the deadline's watchdog says `deadline:` (measured: 1.0 s + ~5 ms)."""
    url = stalled(servers, stall)
    c = client(url, timeout_s=30.0, deadline_s=1.0)
    with pytest.raises(
        RequestFailed, match=r"^deadline: no complete reply within client\.deadline_s=1, 1 tries"
    ):
        c.complete("x", 1)
    assert c.counts["retried_deadline"] == 1


@pytest.mark.parametrize("stall", ["silent-http", "silent-https", "body", "chunks"])
def test_abort_ends_a_try_in_flight_at_once(servers, stall):
    """What Ctrl-C calls: a worker blocked in any phase returns (Stopped) within a second, not at
    timeout_s or deadline_s (both far off here)."""
    c = client(stalled(servers, stall), timeout_s=60.0, deadline_s=600.0)
    result: list = []
    worker = threading.Thread(target=lambda: result.append(_outcome(c)))
    worker.start()
    time.sleep(0.5)  # the worker is now blocked on its socket
    t0 = time.monotonic()
    c.abort()
    worker.join(timeout=5)
    assert not worker.is_alive() and time.monotonic() - t0 < 1.0
    assert result == [Stopped]


def _outcome(c: ChatClient):
    try:
        return c.complete("x", 1)
    except Exception as e:
        return type(e)


def test_abort_ends_a_connect_that_hangs():
    """A listener whose accept queue is full drops further SYNs: connect() itself hangs, and is polled."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    try:
        for _ in range(4):  # fill the queue (Linux keeps backlog + 1)
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", port))
            fillers.append(s)
        c = client(f"http://127.0.0.1:{port}/v1", timeout_s=60.0, deadline_s=600.0)
        result: list = []
        worker = threading.Thread(target=lambda: result.append(_outcome(c)))
        worker.start()
        time.sleep(0.5)
        c.abort()
        worker.join(timeout=5)
        assert not worker.is_alive() and result == [Stopped]
    finally:
        for s in fillers:
            s.close()
        listener.close()


# -- Ctrl-C through the command ------------------------------------------------------------------


def hold(h: BaseHTTPRequestHandler) -> int:
    h.server_stop.wait(SERVER_LIMIT_S)  # the request is in, the reply never comes
    return 0


def busy(h: BaseHTTPRequestHandler) -> int:
    head(h, 503, {"Retry-After": "120", "Content-Length": "0"})
    return 0


def answer(h: BaseHTTPRequestHandler) -> int:
    head(h, 200, {"Content-Type": "application/json", "Content-Length": str(len(OK_BODY))})
    write(h, OK_BODY)
    return len(OK_BODY)


# Where the 4 workers wait when Ctrl-C comes: on a reply (in flight), in a Retry-After wait (120 s), in
# the pacer (0.1 requests/minute: after the first request, the next may start in 10 minutes).
WAITS = {
    "in-flight": (hold, [], 4),
    "retry-after": (busy, [], 4),
    "pacer": (answer, ["--set", "client.requests_per_minute=0.1"], 1),
}


@pytest.mark.parametrize("where", list(WAITS))
def test_ctrl_c_exits_130_promptly_wherever_the_workers_wait(labelled, servers, tmp_path, where):
    """SIGINT to a running `annotate`: exit 130 with `interrupted` before any wait it was in could have
    ended (measured: under 1 s; before the fix the process waited for timeout_s=120 s, the Retry-After
    of 120 s or the pacer's 10 minutes: 60 s is not a speed bound but half the shortest), no traceback,
    summary.json written, progress lines printed meanwhile (a stuck run is not silent)."""
    respond, extra, seen = WAITS[where]
    server = servers(Hostile, respond)
    out = tmp_path / "out"
    cmd = [
        sys.executable, "-m", "classifiers", "annotate", "--input", str(labelled), "--endpoint", server.url,
        "--model", "m", "--prompt", str(PROMPT), "--output", str(out), "--sample", "12",
        "--set", "client.concurrency=4", "--set", "client.progress_s=0.2", *extra,
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        start = time.monotonic()
        while len(server.requests) < seen and time.monotonic() - start < 120 and proc.poll() is None:
            time.sleep(0.05)
        assert len(server.requests) == seen, proc.poll()
        time.sleep(0.6)  # a progress line or more, and every worker settled in its wait
        proc.send_signal(signal.SIGINT)
        # the server never answers: without Ctrl-C ending the requests in flight the run would not
        # end, and communicate's timeout (a hang guard, not a speed bound) would fail the test
        _, stderr = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, stderr[-2000:]
    assert stderr.rstrip().endswith("interrupted") and "Traceback" not in stderr
    assert "annotate: " in stderr and "/12 done" in stderr
    assert json.loads((out / "summary.json").read_text())["counts"]["sampled"] == 12
    if where == "in-flight":
        assert "4 in flight" in stderr
    if where == "pacer":  # the one reply that came back before Ctrl-C is kept
        assert len((out / "labels.jsonl").read_text().splitlines()) == 1
    assert len(server.requests) == seen  # nothing was sent after Ctrl-C


# -- the key and control sequences in server text -------------------------------------------------


def echo_forms(auth: str) -> str:
    """What an echoing server writes: the header as sent, JSON-escaped, percent-encoded, broken up by
    escape sequences (whole again once they are stripped)."""
    key = auth.removeprefix("Bearer ")
    broken = key[:5] + "\x1b[0m" + key[5:12] + "\x1b]0;t\x07" + key[12:]
    return f"auth={auth} json={json.dumps(key)} pct={quote(key, safe='')} broken={broken}"


def echo_in(status: int, where: str):
    def respond(h: BaseHTTPRequestHandler) -> int:
        text = echo_forms(h.headers["Authorization"])
        if where == "content":
            body = json.dumps({"choices": [{"message": {"content": text + "\nEducational score: 2"}}]})
        elif where == "json-error":
            body = json.dumps({"error": {"message": text, "headers": dict(h.headers)}})
        else:
            body = text
        data = body.encode()
        headers = {"Content-Length": str(len(data)), "Connection": "close"}
        if where == "location":
            headers["Location"] = "http://127.0.0.1:9/v1?" + text.replace("\n", " ")
        head(h, status, headers)
        write(h, data)
        return len(data)

    return respond


# (status, where the echo goes, exit status): a failed document (stderr, summary.json), a fatal status
# (stderr), a redirect's Location (stderr), a 200's reply (labels.jsonl), a malformed 200 (failed list).
ECHOES = [
    (400, "text-error", 1),
    (422, "json-error", 1),
    (401, "text-error", 2),
    (404, "json-error", 2),
    (307, "location", 2),
    (200, "content", 0),
    (200, "json-error", 1),
]


@pytest.mark.parametrize(("status", "where", "rc"), ECHOES)
def test_the_key_a_server_echoes_is_in_no_output(
    labelled, servers, tmp_path, monkeypatch, capsys, status, where, rc
):
    monkeypatch.setenv("REFINERY_TEST_LLM_KEY", KEY)
    server = servers(Hostile, echo_in(status, where))
    out = tmp_path / "out"
    argv = [
        "annotate", "--input", str(labelled), "--endpoint", server.url, "--model", "m",
        "--prompt", str(PROMPT), "--output", str(out), "--sample", "3",
        "--set", "client.api_key_env=REFINERY_TEST_LLM_KEY", "--set", "client.max_tries=1",
    ]  # fmt: skip
    assert main(argv) == rc
    assert all(r["Authorization"] == f"Bearer {KEY}" for r in server.requests)  # it was sent, and echoed
    printed = capsys.readouterr()
    for form in (KEY, quote(KEY, safe=""), KEY[:12]):  # whole, encoded, or the start of it cut at 200
        assert form not in printed.out + printed.err
        for f in out.iterdir() if out.exists() else ():
            assert form not in f.read_text(encoding="utf-8"), f.name
    if rc == 0:
        replies = [json.loads(line)["reply"] for line in (out / "labels.jsonl").read_text().splitlines()]
        assert all("[API key]" in r and KEY not in printable(r) for r in replies)  # as a terminal shows it
        assert json.loads((out / "summary.json").read_text())["requests"]["key_redacted"] == 3
    else:
        assert "[API key]" in printed.err


# Terminal control of each kind: CSI (clear screen, colour), OSC (window title, hyperlink), the 8-bit CSI,
# a two-character escape (reset), bell and backspace, a carriage return that rewrites the line, a newline
# that forges a line of our own, and the bidirectional override that reorders what is shown.
CONTROLS = {
    "csi": "\x1b[2J\x1b[31m",
    "osc-title": "\x1b]0;pwned\x07",
    "osc-link": "\x1b]8;;http://evil.invalid\x1b\\",
    "c1-csi": "\x9b31m",
    "esc-c": "\x1bc",
    "bell-bs": "\x07\x08\x08",
    "cr": "\rOK nothing failed",
    "newline": "\nerror: forged line",
    "bidi": "\u202egnp.exe",
    "nul-del": "\x00\x7f",
}


def has_control(text: str) -> bool:
    return any(
        (ord(c) < 32 and c != "\n") or 0x7F <= ord(c) <= 0x9F or 0x202A <= ord(c) <= 0x202E for c in text
    )


@pytest.mark.parametrize("kind", list(CONTROLS))
@pytest.mark.parametrize("where", ["error-body", "location"])
def test_control_sequences_from_the_server_are_not_printed(labelled, servers, tmp_path, capsys, kind, where):
    seq = CONTROLS[kind]

    def respond(h: BaseHTTPRequestHandler) -> int:
        data = f"bad request {seq} end".encode()
        headers = {"Content-Length": str(len(data))}
        if where == "location":
            # A header value cannot hold CR or LF (http.server would send them raw and break framing).
            # A header value cannot hold CR or LF (http.server would send them raw and break framing), and
            # goes as latin-1: other characters go as their UTF-8 bytes, as a server would send them.
            raw = seq.replace("\r", "").replace("\n", "").encode().decode("latin-1")
            headers["Location"] = "http://127.0.0.1:9/" + raw
        head(h, 307 if where == "location" else 400, headers)
        write(h, data)
        return len(data)

    server = servers(Hostile, respond)
    argv = [
        "annotate", "--input", str(labelled), "--endpoint", server.url, "--model", "m",
        "--prompt", str(PROMPT), "--output", str(tmp_path / "out"), "--sample", "2", "--set", "client.max_tries=1",
    ]  # fmt: skip
    assert main(argv) == (2 if where == "location" else 1)
    err = capsys.readouterr().err
    assert not has_control(err), repr(err)
    assert (
        ("bad request" in err and " end" in err)
        if where == "error-body"
        else "Location: http://127.0.0.1:9/" in err
    )
    assert "error: forged line" not in err.splitlines()


def test_printable_strips_each_kind_and_keeps_the_text():
    for kind, seq in CONTROLS.items():
        out = printable(f"a{seq}b")
        assert out.startswith("a") and out.endswith("b") and not has_control(out), kind
        assert "\x1b" not in out and "\n" not in out
    assert printable("plain: ü, 中文, emoji 🙂") == "plain: ü, 中文, emoji 🙂"


# -- redirects, ports, settings ----------------------------------------------------------------


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_redirects_are_refused_by_name_and_never_followed(
    labelled, servers, tmp_path, capsys, monkeypatch, status
):
    """The key would go wherever Location says: the run stops (exit 2) naming the Location, and the
    target (a second local server) receives nothing."""
    monkeypatch.setenv("REFINERY_TEST_LLM_KEY", KEY)
    target = servers(Hostile, answer)

    def respond(h):
        head(h, status, {"Location": target.url + "/chat/completions", "Content-Length": "0"})
        return 0

    server = servers(Hostile, respond)
    argv = [
        "annotate", "--input", str(labelled), "--endpoint", server.url, "--model", "m",
        "--prompt", str(PROMPT), "--output", str(tmp_path / "out"), "--sample", "3",
        "--set", "client.api_key_env=REFINERY_TEST_LLM_KEY",
    ]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert (
        f"answered HTTP {status}: redirects are not followed (Location: {target.url}/chat/completions)" in err
    )
    assert target.requests == []


@pytest.mark.parametrize("port", ["0", "65536", "99999", "-1", "8o80", "1" * 30])
def test_endpoint_port_out_of_range_is_a_config_error(port):
    with pytest.raises(ConfigError, match="the port must be a number from 1 to 65535"):
        chat_url(f"http://127.0.0.1:{port}/v1")


@pytest.mark.parametrize("port", ["1", "65535"])
def test_endpoint_port_edges_are_accepted(port):
    assert chat_url(f"http://127.0.0.1:{port}/v1") == f"http://127.0.0.1:{port}/v1/chat/completions"


def out_of_range(key: str) -> list:
    """0 and -1 for a setting that must be above 0, else just below its lowest; twice its highest; 1e30."""
    lowest, highest = CLIENT_BOUNDS[key]
    below = [0, -1] if lowest is None else [lowest - 1 if lowest == int(lowest) else lowest / 2]
    return [*below, highest * 2, 1e30]


@pytest.mark.parametrize(
    ("key", "value"), [(k, v) for k in CLIENT_BOUNDS for v in out_of_range(k)], ids=lambda x: str(x)
)
def test_every_client_setting_out_of_range_exits_2_naming_it(labelled, servers, tmp_path, capsys, key, value):
    server = servers(Hostile, answer)
    argv = [
        "annotate", "--input", str(labelled), "--endpoint", server.url, "--model", "m",
        "--prompt", str(PROMPT), "--output", str(tmp_path / "out"), "--set", f"client.{key}={value}",
    ]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and f"client.{key}" in err and "Traceback" not in err
    assert server.requests == []


def test_every_numeric_client_setting_has_a_bound_and_its_consumers_take_the_extremes():
    """A new numeric setting without a bound fails here; each bound is one its consumer accepts."""
    numeric = {
        k
        for k, f in ClientSettings.model_fields.items()
        if {int, float} & {f.annotation, *get_args(f.annotation)}
    }
    assert numeric == set(CLIENT_BOUNDS)
    assert threading.TIMEOUT_MAX >= DAY_S
    socket.socket().settimeout(CLIENT_BOUNDS["timeout_s"][1])
    highest = ClientSettings(**{k: hi for k, (_, hi) in CLIENT_BOUNDS.items()})
    c = ChatClient("http://127.0.0.1:9/v1/chat/completions", "m", highest.options(), {}, Pacer(None, None))
    assert c._delay(highest.max_tries, None) <= DAY_S  # base x 2^99, capped by backoff_max_s
    slowest = Pacer(rpm=CLIENT_BOUNDS["requests_per_minute"][0], tpm=None, sleep=lambda s: None)
    slowest.wait(1)
    assert slowest._next_request - time.monotonic() <= DAY_S + 1


def test_tokens_per_minute_below_one_request_is_refused(labelled, servers, tmp_path, capsys):
    server = servers(Hostile, answer)
    argv = [
        "annotate", "--input", str(labelled), "--endpoint", server.url, "--model", "m",
        "--prompt", str(PROMPT), "--output", str(tmp_path / "out"), "--set", "client.tokens_per_minute=100",
    ]  # fmt: skip
    assert main(argv) == 2
    assert "client.tokens_per_minute=100 is below one request's estimated tokens" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("7", 7.0), (" 12 ", 12.0), ("1.5", 1.5), ("inf", None), ("nan", None), ("1e400", None), ("-5", None),
     ("1_000", None), ("9" * 40, None), ("", None), ("Wed, 21 Oct 2015 07:28:00", None)],
)  # fmt: skip
def test_retry_after_takes_only_delta_seconds_or_an_http_date(value, seconds):
    assert parse_retry_after(value) == seconds


def test_connections_are_kept_alive_across_tries(servers):
    """Keep-alive survives the rewrite: 5 requests of one worker to an HTTP/1.1 server share a connection."""
    conns: list = []

    def keep(h: BaseHTTPRequestHandler) -> int:
        conns.append(h.client_address)
        h.send_response(200)
        h.send_header("Content-Length", str(len(OK_BODY)))
        h.end_headers()
        write(h, OK_BODY)
        return len(OK_BODY)

    server = servers(Hostile, keep, True)
    c = client(server.url)
    for _ in range(5):
        assert c.complete("x", 1).content == "Educational score: 3"
    c.close()
    assert len(conns) == 5 and len(set(conns)) == 1


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 (in its subjectAltName) signed by its own key: (cert.pem, key.pem)."""
    pytest.importorskip("cryptography")
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "\x1b[31mlocal test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    (folder / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (folder / "key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return folder / "cert.pem", folder / "key.pem"


@pytest.mark.parametrize("trusted", [True, False])
def test_https_verifies_the_certificate_and_keeps_the_connection(servers, tmp_path, monkeypatch, trusted):
    """The handshake runs under the watchdog on the client's own socket: with the certificate trusted,
    replies come over one kept-alive TLS connection; untrusted, the run stops (no retry can fix it)."""
    cert, key = self_signed(tmp_path)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    conns: list = []

    def keep(h: BaseHTTPRequestHandler) -> int:
        conns.append(h.client_address)
        return answer(h)

    server = servers(Hostile, keep, True, tls)
    if trusted:  # the client's default context, trusting this one certificate as well
        default = ssl.create_default_context
        monkeypatch.setattr(ssl, "create_default_context", lambda: default(cafile=str(cert)))
    c = client(server.url)
    if not trusted:
        with pytest.raises(EndpointError, match="the server's certificate is not trusted") as e:
            c.complete("x", 1)
        assert not has_control(str(e.value)) and conns == []
        return
    for _ in range(3):
        assert c.complete("x", 1).content == "Educational score: 3"
    c.close()
    assert len(conns) == 3 and len(set(conns)) == 1
