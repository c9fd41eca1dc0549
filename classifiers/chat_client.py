"""A client of any OpenAI-compatible chat-completions endpoint (vLLM, a llama.cpp server, a hosted API).

The protocol is the documented one, spoken over HTTP with urllib3 (already a pinned dependency; its
`PoolManager` is thread-safe and keeps connections alive across requests, which matters when many
workers label against one local server): `POST {base}/chat/completions` with a JSON body
`{"model", "messages": [{"role": "user", "content": PROMPT}], "temperature", "max_tokens"}`, answered by
JSON whose `choices[0].message.content` is the reply and whose `usage` (`prompt_tokens`,
`completion_tokens`) is what was billed. The API key, when there is one, goes as `Authorization: Bearer`
and nowhere else.

Failures, by kind:
- 429, any 5xx, a timeout or a dropped connection: retried, `max_tries` tries in all, after a wait of
  exponential backoff with "equal jitter" (half the backoff plus a uniform random half, so workers that
  failed together do not retry together) or the server's `Retry-After` if it asks for longer (seconds or
  an HTTP date). A server asking for more than `max_retry_after_s` is not waited for: the document fails.
- 401, 403, 404: the key, the model or the URL is wrong, and every other request would fail the same
  way: `EndpointError` (a UserError) stops the run.
- any other 4xx, a malformed body, or the tries used up: `RequestFailed`; the caller counts the document
  as failed and a rerun retries it.

`Pacer` spaces the start of every try (first tries and retries alike) so that neither `requests_per_minute`
nor `tokens_per_minute` is ever exceeded: each has a timeline, a try starts at the later of now and both
timelines' next free instant, and pushes each forward by its share (60/rpm s; tokens x 60/tpm s). That is
a rate limiter without bursts (a generic cell-rate algorithm with a burst of one): never above the limit
in any window, at the price of not using a provider's burst allowance.
"""

from __future__ import annotations

import email.utils
import json
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import urllib3

from core.errors import UserError

RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})
FATAL_STATUS = {401: "the API key was refused", 403: "access is forbidden", 404: "no such URL or model"}


class EndpointError(UserError):
    """The endpoint refuses every request (bad key, URL or model): the run stops, naming the status."""


class RequestFailed(Exception):
    """One document's request failed (tries used up, a 4xx, a malformed answer); a rerun retries it."""


class Stopped(Exception):
    """The run is stopping (Ctrl-C, a fatal error elsewhere): no further try is made."""


@dataclass(frozen=True)
class ClientOptions:
    """How the client calls (classifiers.annotate.ClientSettings, flattened): none of it decides a label."""

    timeout_s: float
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

    def wait(self, tokens: int) -> None:
        """Block until a try of about `tokens` tokens (prompt + allowed reply) may start."""
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
            self._sleep(start - now)


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds asked by a `Retry-After` header (delta-seconds or an HTTP date); None if absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # an HTTP date is GMT by definition
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


@dataclass
class ChatClient:
    """POSTs one prompt at a time to `url` (…/chat/completions); thread-safe. `counts`: tries and retries."""

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
        self._lock = threading.Lock()
        self._http = urllib3.PoolManager(maxsize=self.options.concurrency, retries=False)
        self._headers = {"Content-Type": "application/json"}
        if self.api_key:
            self._headers["Authorization"] = f"Bearer {self.api_key}"

    def _count(self, key: str) -> None:
        with self._lock:
            self.counts[key] += 1

    def complete(self, prompt: str, tokens: int) -> Reply:
        """The reply to `prompt`; `tokens` (prompt + allowed reply) is what the pacer charges per try."""
        body = json.dumps(
            {"model": self.model, "messages": [{"role": "user", "content": prompt}], **self.request}
        ).encode()
        for attempt in range(1, self.options.max_tries + 1):
            if self.stop.is_set():
                raise Stopped
            self.pacer.wait(tokens)
            if self.stop.is_set():
                raise Stopped
            self._count("tries")
            why, retry_after, response = self._post(body)
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

    def _post(self, body: bytes) -> tuple[str, float | None, Any]:
        """(why it failed and may be retried, Retry-After, None) or ("", None, the decoded 200 body)."""
        try:
            resp = self._http.request(
                "POST", self.url, body=body, headers=self._headers, timeout=self.options.timeout_s
            )
        except urllib3.exceptions.TimeoutError:
            return "timeout", None, None
        except (urllib3.exceptions.HTTPError, OSError) as e:  # refused, reset, dropped mid-answer
            return f"connection: {type(e).__name__}", None, None
        if resp.status == 200:
            try:
                return "", None, json.loads(resp.data)
            except ValueError as e:
                raise RequestFailed(f"HTTP 200 with a body that is not JSON ({e})") from None
        if resp.status in FATAL_STATUS:
            raise EndpointError(
                f"{self.url} answered HTTP {resp.status} ({FATAL_STATUS[resp.status]}, model {self.model!r}): "
                f"{_snippet(resp.data)}"
            )
        if resp.status not in RETRYABLE_STATUS:
            raise RequestFailed(f"HTTP {resp.status}: {_snippet(resp.data)}")
        return f"HTTP {resp.status}", parse_retry_after(resp.headers.get("Retry-After")), None

    def _reply(self, data: Any, tries: int) -> Reply:
        try:
            content = data["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise RequestFailed(f"HTTP 200 without choices[0].message.content: {_snippet(data)}") from None
        if not isinstance(content, str):
            raise RequestFailed(f"choices[0].message.content is {type(content).__name__}, not a string")
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        return Reply(
            content,
            _int_or_none(usage.get("prompt_tokens")),
            _int_or_none(usage.get("completion_tokens")),
            tries,
        )

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        backoff = min(self.options.backoff_max_s, self.options.backoff_base_s * 2 ** (attempt - 1))
        jittered = backoff / 2 + self.rng.uniform(0, backoff / 2)
        return jittered if retry_after is None else max(retry_after, jittered)

    def _wait(self, seconds: float) -> None:
        if self.stop.wait(seconds):  # returns at once when the run stops
            raise Stopped


def _int_or_none(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def _snippet(data: Any, limit: int = 200) -> str:
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else json.dumps(data, default=str)
    return text[:limit] + ("…" if len(text) > limit else "")
