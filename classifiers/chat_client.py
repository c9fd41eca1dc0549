"""A client of any OpenAI-compatible chat-completions endpoint (vLLM, a llama.cpp server, a hosted API).

The protocol is the documented one: `POST {base}/chat/completions` with a JSON body
`{"model", "messages": [{"role": "user", "content": PROMPT}], "temperature", "max_tokens"}`, answered by
JSON whose `choices[0].message.content` is the reply and whose `usage` (`prompt_tokens`,
`completion_tokens`) is what was billed. The API key, when there is one, goes as `Authorization: Bearer`
and nowhere else. Each worker thread keeps one connection alive across its requests (what matters when
many workers label against one local server).

The transport is the standard library's http.client on sockets this module opens and watches, not a
pooled library, because the server is not trusted to be reasonable (issue 44 measured each of these):
- a reply is read in 64 KiB pieces and counted: past `max_reply_bytes` (a chat reply is kilobytes) the
  try fails, and a `Content-Length` above it fails before any body is read. Memory is bounded by
  concurrency x max_reply_bytes whatever the server sends (a 2 GiB body, an endless chunked one);
- a socket timeout bounds one read, not a request (a server sending a byte every 2 s keeps every read
  short), so each try also has a deadline (`deadline_s`, monotonic clock) kept by one watchdog thread
  per client that shuts down the socket of any try past it: connect, TLS handshake, headers and body
  alike. Each read's own timeout is min(`timeout_s`, time left);
- `abort()` (Ctrl-C, a fatal error elsewhere) shuts down every socket in flight: a thread blocked in
  recv() cannot be interrupted otherwise, and the process could not exit while it waited;
- redirects are not followed: the key would go wherever a Location says, and a POST may turn into a GET;
- text from the server that reaches a message (an error body, a Location) or a record (the reply) has
  the client's own key removed (a server that echoes `Authorization` would otherwise put it in stderr,
  summary.json and labels.jsonl) and, in messages, terminal control sequences stripped (`printable`).
  Only the key's literal, JSON-escaped and percent-encoded forms are recognised: this is a guard
  against echoes, not against a server that sets out to disguise what it was sent.

Failures, by kind:
- 429, any 5xx, a timeout, a dropped connection or a deadline passed: retried, `max_tries` tries in
  all, after a wait of exponential backoff with "equal jitter" (half the backoff plus a uniform random
  half, so workers that failed together do not retry together) or the server's `Retry-After` if it asks
  for longer (seconds or an HTTP date). A server asking for more than `max_retry_after_s` is not waited
  for: the document fails.
- 401, 403, 404, any redirect, a certificate that does not verify: the key, the model or the URL is
  wrong, and every other request would fail the same way: `EndpointError` (a UserError) stops the run.
- any other 4xx, a malformed body, a reply over `max_reply_bytes`, or the tries used up:
  `RequestFailed`; the caller counts the document as failed and a rerun retries it.

`Pacer` spaces the start of every try (first tries and retries alike) so that neither `requests_per_minute`
nor `tokens_per_minute` is ever exceeded: each has a timeline, a try starts at the later of now and both
timelines' next free instant, and pushes each forward by its share (60/rpm s; tokens x 60/tpm s). That is
a rate limiter without bursts (a generic cell-rate algorithm with a burst of one): never above the limit
in any window, at the price of not using a provider's burst allowance.
"""

from __future__ import annotations

import contextlib
import email.utils
import errno
import http.client
import json
import os
import random
import re
import select
import socket
import ssl
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit

from core.errors import UserError
from core.safe_json import JSONFileError, loads_checked

RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})
FATAL_STATUS = {401: "the API key was refused", 403: "access is forbidden", 404: "no such URL or model"}
READ_CHUNK = 64 * 1024
"""Bytes asked of the socket per read of a reply: a chat reply usually fits in one."""
ERROR_BODY_BYTES = 4096
"""What is read of a body that is not a 200's: its start names the error, the rest is not needed."""
SNIPPET_CHARS = 200
POLL_S = 0.1
"""How often a connect in progress looks at `stop` and the deadline (a blocking connect cannot be
interrupted from another thread on Linux, so it is made non-blocking and polled)."""
REDACTED = "[API key]"


class EndpointError(UserError):
    """The endpoint refuses every request (bad key, URL or model; a redirect): the run stops, naming why."""


class RequestFailed(Exception):
    """One document's request failed (tries used up, a 4xx, a malformed or oversized answer); a rerun retries it."""


class Stopped(Exception):
    """The run is stopping (Ctrl-C, a fatal error elsewhere): no further try is made."""


@dataclass(frozen=True, kw_only=True)
class ClientOptions:
    """How the client calls (classifiers.annotate.ClientSettings, which bounds each): none of it decides a label."""

    timeout_s: float
    """Longest wait for one connect or one read."""
    deadline_s: float
    """Longest time one try may take, from connect to the reply's last byte."""
    max_reply_bytes: int
    """A reply body larger than this fails the try without being read further."""
    max_tries: int
    backoff_base_s: float
    backoff_max_s: float
    max_retry_after_s: float
    concurrency: int


@dataclass(frozen=True)
class Reply:
    content: str
    prompt_tokens: int | None
    completion_tokens: int | None
    tries: int


class Pacer:
    """Starts tries no faster than `rpm` requests and `tpm` tokens per minute (None = no limit)."""

    def __init__(self, rpm: float | None, tpm: float | None, clock=time.monotonic, sleep=time.sleep) -> None:
        self.rpm, self.tpm = rpm, tpm
        self._clock, self._sleep = clock, sleep
        self._lock = threading.Lock()
        self._next_request = self._next_token = float("-inf")

    def wait(self, tokens: int, stop: threading.Event | None = None) -> None:
        """Block until a try of about `tokens` tokens (prompt + allowed reply) may start; with `stop`,
        the wait ends early (raising Stopped) when the run stops, so Ctrl-C never waits out a slot."""
        if self.rpm is None and self.tpm is None:
            return
        with self._lock:
            now = self._clock()
            start = max(now, self._next_request, self._next_token)
            if self.rpm is not None:
                self._next_request = start + 60.0 / self.rpm
            if self.tpm is not None:
                self._next_token = start + tokens * 60.0 / self.tpm
        if start > now:
            if stop is None:
                self._sleep(start - now)
            elif stop.wait(start - now):
                raise Stopped


_RETRY_AFTER_SECONDS = re.compile(r"\d{1,12}(\.\d{1,6})?")


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds asked by a `Retry-After` header (delta-seconds or an HTTP date); None if absent or unreadable.

    Only digits count as seconds (RFC 9110's delta-seconds): float() would also take "inf", "nan" and
    "1e400" from a server, and an infinite wait is not something to compare and sleep on."""
    if not value:
        return None
    value = value.strip()
    if _RETRY_AFTER_SECONDS.fullmatch(value):
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:  # an HTTP date is GMT by definition
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


# -- text from the server --------------------------------------------------------------------------

# ESC followed by a CSI (ESC [ params final), an OSC (ESC ] ... BEL or ESC \) or a two-character
# sequence; what is left of a DCS/APC body after its ESC P is plain text, harmless once ESC is gone.
_ESCAPE_SEQUENCE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]?|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\^_`-~]?)")
# Every other C0 and C1 control (the C1 CSI \x9b included), DEL, and the bidirectional overrides and
# isolates that reorder what a terminal shows ("Trojan Source", CVE-2021-42574).
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """`text` safe to print on a terminal, on one line: escape sequences removed, every other control
    character (newlines and tabs included) and bidirectional control replaced by a space."""
    return _CONTROL.sub(" ", _ESCAPE_SEQUENCE.sub("", text))


def secret_forms(key: str | None) -> tuple[str, ...]:
    """The forms in which a server may echo `key`: as sent, JSON-escaped, percent-encoded; longest first."""
    if not key:
        return ()
    forms = {key, json.dumps(key)[1:-1], json.dumps(key, ensure_ascii=True)[1:-1], quote(key, safe="")}
    return tuple(sorted(forms, key=len, reverse=True))


def redact(text: str, secrets: tuple[str, ...]) -> str:
    for s in secrets:
        text = text.replace(s, REDACTED)
    return text


# -- the watchdog ----------------------------------------------------------------------------------


class _Watch:
    __slots__ = ("deadline", "fired", "sock")

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self.sock, self.deadline, self.fired = sock, deadline, False


def _shutdown(sock: socket.socket) -> None:
    """End every blocked call on `sock` now (Linux: recv returns EOF, send fails); the owner closes it."""
    with contextlib.suppress(OSError):  # already closed or never connected: nothing is blocked on it
        sock.shutdown(socket.SHUT_RDWR)


class _Watchdog:
    """Shuts down the socket of each try past its deadline, and (`abort`) of every try in flight.

    One daemon thread, started on the first watch, asleep until the nearest deadline or a change.
    Shutting down (not closing) is safe while the owner thread still uses the socket: the descriptor
    stays valid until the owner closes it, so it cannot be reused under that thread."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._watches: set[_Watch] = set()
        self._aborted = False
        self._thread: threading.Thread | None = None

    def watch(self, sock: socket.socket, deadline: float) -> _Watch:
        w = _Watch(sock, deadline)
        with self._cond:
            if self._aborted:  # the run stopped while this try was being set up
                w.fired = True
                _shutdown(sock)
            self._watches.add(w)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="chat-watchdog", daemon=True)
                self._thread.start()
            self._cond.notify()
        return w

    def forget(self, w: _Watch | None) -> None:
        if w is not None:
            with self._cond:
                self._watches.discard(w)

    def abort(self) -> None:
        with self._cond:
            self._aborted = True
            for w in self._watches:
                w.fired = True
                _shutdown(w.sock)
            self._cond.notify()

    def _run(self) -> None:
        with self._cond:
            while not self._aborted:
                now = time.monotonic()
                for w in self._watches:
                    if not w.fired and w.deadline <= now:
                        w.fired = True
                        _shutdown(w.sock)
                pending = [w.deadline for w in self._watches if not w.fired]
                self._cond.wait(min(pending) - now if pending else None)


def _readable(sock: socket.socket, timeout: float) -> bool:
    poller = select.poll()  # not select.select: it cannot take a descriptor above 1023
    poller.register(sock, select.POLLIN | select.POLLERR | select.POLLHUP)
    return bool(poller.poll(timeout * 1000))


def _writable(sock: socket.socket, timeout: float) -> bool:
    poller = select.poll()
    poller.register(sock, select.POLLOUT | select.POLLERR | select.POLLHUP)
    return bool(poller.poll(timeout * 1000))


# -- the client ------------------------------------------------------------------------------------


class _Aborted(OSError):
    """The watchdog shut this try's socket (its deadline passed, or the run stopped)."""


@dataclass
class ChatClient:
    """POSTs one prompt at a time to `url` (…/chat/completions); thread-safe. `counts`: tries, retries and
    bytes read. Call `abort()` to end the tries in flight, `close()` once no thread uses it any more."""

    url: str
    model: str
    options: ClientOptions
    request: dict[str, Any]
    """Body fields besides model and messages (temperature, max_tokens)."""
    pacer: Pacer
    api_key: str | None = None
    stop: threading.Event = field(default_factory=threading.Event)
    rng: random.Random = field(default_factory=random.Random)
    counts: Counter = field(default_factory=Counter)

    def __post_init__(self) -> None:
        parts = urlsplit(self.url)
        self._https = parts.scheme == "https"
        self._host = parts.hostname or ""
        self._port = parts.port or (443 if self._https else 80)
        self._path = parts.path or "/"
        self._tls = ssl.create_default_context() if self._https else None
        self._lock = threading.Lock()
        self._local = threading.local()  # each worker's kept-alive connection
        self._open: set[http.client.HTTPConnection] = set()
        self._watchdog = _Watchdog()
        self._secrets = secret_forms(self.api_key)
        self._headers = {"Content-Type": "application/json"}
        if self.api_key:
            self._headers["Authorization"] = f"Bearer {self.api_key}"

    def _count(self, key: str, n: int = 1) -> None:
        with self._lock:
            self.counts[key] += n

    def abort(self) -> None:
        """Stop: no new try starts, and every try in flight ends now (its reply, if any, is not read)."""
        self.stop.set()
        self._watchdog.abort()

    def close(self) -> None:
        """Close the kept-alive connections; only once no worker uses the client."""
        with self._lock:
            conns, self._open = self._open, set()
        for conn in conns:
            conn.close()
        self._watchdog.abort()  # nothing is in flight: this only ends the watchdog's thread

    def complete(self, prompt: str, tokens: int) -> Reply:
        """The reply to `prompt`; `tokens` (prompt + allowed reply) is what the pacer charges per try."""
        body = json.dumps(
            {"model": self.model, "messages": [{"role": "user", "content": prompt}], **self.request}
        ).encode()
        for attempt in range(1, self.options.max_tries + 1):
            if self.stop.is_set():
                raise Stopped
            self.pacer.wait(tokens, self.stop)
            if self.stop.is_set():
                raise Stopped
            self._count("tries")
            why, retry_after, response = self._try(body)
            if response is not None:
                return self._reply(response, attempt)
            self._count(f"retried_{why.split(':')[0].replace(' ', '_')}")
            if attempt == self.options.max_tries:
                raise RequestFailed(f"{why}, {attempt} tries")
            if retry_after is not None and retry_after > self.options.max_retry_after_s:
                raise RequestFailed(
                    f"{why}; the server asks to wait {retry_after:.0f} s, more than "
                    f"client.max_retry_after_s={self.options.max_retry_after_s:g}"
                )
            self._wait(self._delay(attempt, retry_after))
        raise AssertionError("unreachable")  # the loop returns or raises

    # -- one try -----------------------------------------------------------------------------------

    def _try(self, body: bytes) -> tuple[str, float | None, Any]:
        """(why it failed and may be retried, Retry-After, None) or ("", None, the decoded 200 body)."""
        deadline = time.monotonic() + self.options.deadline_s
        conn: http.client.HTTPConnection | None = None
        watch: _Watch | None = None
        resp: http.client.HTTPResponse | None = None
        keep = False
        try:
            conn, fresh = self._connection(deadline)
            # Held here: getresponse() sets conn.sock to None when the server will close after this reply
            # (the response then owns the socket, which stays open until the body is read).
            sock = conn.sock
            watch = self._watchdog.watch(sock, deadline)
            sock.settimeout(self._read_timeout(deadline))
            if fresh and self._https:
                sock.do_handshake()
            conn.request("POST", self._path, body=body, headers=self._headers)
            resp = conn.getresponse()
            why, retry_after, data = self._answer(resp, sock, watch, deadline)
            keep = data is not None and not resp.will_close
            return why, retry_after, data
        except (OSError, http.client.HTTPException) as e:  # refused, reset, dropped, timed out, shut down
            if self.stop.is_set():
                raise Stopped from None
            if isinstance(e, ssl.SSLCertVerificationError):  # every try would fail the same way
                why = printable(
                    e.verify_message or str(e)
                )  # names from the certificate are the server's text
                raise EndpointError(f"{self.url}: the server's certificate is not trusted ({why})") from None
            if (watch is not None and watch.fired) or time.monotonic() >= deadline:
                why = f"deadline: no complete reply within client.deadline_s={self.options.deadline_s:g}"
                return why, None, None
            if isinstance(e, TimeoutError):
                return "timeout", None, None
            return f"connection: {type(e).__name__}", None, None
        finally:
            self._watchdog.forget(watch)
            if not keep:
                # The response owns the socket when the server said it would close: closed here, not left
                # to the garbage collector (a traceback that holds this frame would keep it open).
                if resp is not None:
                    resp.close()
                self._discard(conn)

    def _connection(self, deadline: float) -> tuple[http.client.HTTPConnection, bool]:
        """This thread's kept-alive connection, or a new one: (connection, whether it is new)."""
        conn = getattr(self._local, "conn", None)
        # An idle kept-alive socket that is readable was closed by the server (or holds junk): not reused.
        if conn is not None and conn.sock is not None and not _readable(conn.sock, 0):
            return conn, False
        self._discard(conn)
        sock = self._connect(deadline)
        if self._https:
            conn = http.client.HTTPSConnection(self._host, self._port, context=self._tls)
            # The handshake runs in _try, under the watchdog; the context checks the certificate and the name.
            sock = self._tls.wrap_socket(sock, server_hostname=self._host, do_handshake_on_connect=False)
        else:
            conn = http.client.HTTPConnection(self._host, self._port)
        conn.sock = sock
        self._local.conn = conn
        with self._lock:
            self._open.add(conn)
        return conn, True

    def _discard(self, conn: http.client.HTTPConnection | None) -> None:
        if conn is None:
            return
        conn.close()
        with self._lock:
            self._open.discard(conn)
        if getattr(self._local, "conn", None) is conn:
            self._local.conn = None

    def _connect(self, deadline: float) -> socket.socket:
        """A connected socket. Non-blocking, polled: `stop` and the deadline end a connect in progress."""
        until = min(deadline, time.monotonic() + self.options.timeout_s)
        last: OSError = OSError(f"no address for {self._host}")
        addresses = socket.getaddrinfo(self._host, self._port, type=socket.SOCK_STREAM)
        for family, kind, proto, _, addr in addresses:
            sock = socket.socket(family, kind, proto)
            try:
                sock.setblocking(False)
                code = sock.connect_ex(addr)
                while code in (errno.EINPROGRESS, errno.EALREADY, errno.EWOULDBLOCK):
                    if self.stop.is_set():
                        raise Stopped
                    left = until - time.monotonic()
                    if left <= 0:
                        raise TimeoutError(f"connect to {self._host}:{self._port}")
                    if _writable(sock, min(POLL_S, left)):
                        code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if code:
                    raise OSError(code, os.strerror(code))
                sock.setblocking(True)
                return sock
            except OSError as e:
                sock.close()
                last = e
                if isinstance(e, TimeoutError):
                    break  # the time is spent: no other address gets a try
            except BaseException:
                sock.close()
                raise
        raise last

    def _before_read(self, resp: http.client.HTTPResponse, sock: socket.socket, deadline: float) -> None:
        """The next read waits at most min(timeout_s, time left). Not once the response is closed: the
        socket is closed with it when the server said it would close (reading then returns b"")."""
        if not resp.isclosed():
            sock.settimeout(self._read_timeout(deadline))

    def _read_timeout(self, deadline: float) -> float:
        left = deadline - time.monotonic()
        if left <= 0:
            raise _Aborted("deadline")
        return min(self.options.timeout_s, left)

    def _answer(
        self, resp: http.client.HTTPResponse, sock: socket.socket, watch: _Watch, deadline: float
    ) -> tuple[str, float | None, Any]:
        status = resp.status
        if status == 200:
            raw = self._read_body(resp, sock, watch, deadline)
            try:  # the checked reader: a reply is outside data (depth, duplicate keys, finite numbers)
                return "", None, loads_checked(raw, "the reply", max_bytes=len(raw))  # _read_body bounds it
            except JSONFileError as e:
                raise RequestFailed(f"HTTP 200 with a body that is not JSON the client reads ({e})") from None
        if 300 <= status < 400:
            location = self._text(resp.getheader("Location") or "none given")
            raise EndpointError(
                f"{self.url} answered HTTP {status}: redirects are not followed (Location: {location}); "
                "if that is the endpoint, pass it as --endpoint"
            )
        if status in RETRYABLE_STATUS:
            return f"HTTP {status}", parse_retry_after(resp.getheader("Retry-After")), None
        self._before_read(resp, sock, deadline)
        text = self._text(resp.read(ERROR_BODY_BYTES))
        if status in FATAL_STATUS:
            raise EndpointError(
                f"{self.url} answered HTTP {status} ({FATAL_STATUS[status]}, model {self.model!r}): {text}"
            )
        raise RequestFailed(f"HTTP {status}: {text}")

    def _read_body(
        self, resp: http.client.HTTPResponse, sock: socket.socket, watch: _Watch, deadline: float
    ) -> bytes:
        """The body, read in pieces of at most READ_CHUNK and never more than max_reply_bytes + 1 bytes."""
        cap = self.options.max_reply_bytes
        declared = resp.length  # None: chunked, or until the server closes
        if declared is not None and declared > cap:
            self._count("reply_too_large")
            raise RequestFailed(
                f"the reply declares {declared:,} bytes (Content-Length), more than "
                f"client.max_reply_bytes={cap:,}"
            )
        parts: list[bytes] = []
        total = 0
        while not resp.isclosed():
            self._before_read(resp, sock, deadline)
            part = resp.read(min(READ_CHUNK, cap + 1 - total))
            if watch.fired:  # a shut-down socket reads as a clean end: the body is not complete
                raise _Aborted("deadline or stop")
            if not part:
                break
            total += len(part)
            self._count("reply_bytes", len(part))
            if total > cap:
                self._count("reply_too_large")
                raise RequestFailed(
                    f"the reply is larger than client.max_reply_bytes={cap:,} bytes (stopped reading at {total:,})"
                )
            parts.append(part)
        if declared is not None and total < declared:
            raise http.client.IncompleteRead(b"", declared - total)
        return b"".join(parts)

    def _reply(self, data: Any, tries: int) -> Reply:
        try:
            content = data["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise RequestFailed(f"HTTP 200 without choices[0].message.content: {self._text(data)}") from None
        if not isinstance(content, str):
            raise RequestFailed(f"choices[0].message.content is {type(content).__name__}, not a string")
        clean = redact(content, self._secrets)
        if redact(printable(clean), self._secrets) != printable(clean):
            # The key broken up by escape sequences: whole on a terminal that shows the reply. The reply
            # is hostile; what is kept is its printable form, without the key.
            clean = redact(printable(clean), self._secrets)
        if clean != content:  # visible in summary.json: a reply that quoted our key back is not normal
            self._count("key_redacted")
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        return Reply(
            clean,
            _int_or_none(usage.get("prompt_tokens")),
            _int_or_none(usage.get("completion_tokens")),
            tries,
        )

    def _text(self, data: Any) -> str:
        """Server text for a message: the key removed (before cutting, so no part of it is left),
        control sequences stripped, cut at SNIPPET_CHARS."""
        if isinstance(data, bytes):
            text = data.decode("utf-8", "replace")
        elif isinstance(data, str):
            text = data
        else:
            try:
                text = json.dumps(data, default=str, ensure_ascii=False)
            except (ValueError, RecursionError):
                text = f"<{type(data).__name__}>"
        # Stripped first: a key broken up by escape sequences is whole again once they are gone.
        text = redact(printable(text), self._secrets)
        return text[:SNIPPET_CHARS] + ("…" if len(text) > SNIPPET_CHARS else "")

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        backoff = min(self.options.backoff_max_s, self.options.backoff_base_s * 2 ** (attempt - 1))
        jittered = backoff / 2 + self.rng.uniform(0, backoff / 2)
        return jittered if retry_after is None else max(retry_after, jittered)

    def _wait(self, seconds: float) -> None:
        if self.stop.wait(seconds):  # returns at once when the run stops
            raise Stopped


def _int_or_none(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None
