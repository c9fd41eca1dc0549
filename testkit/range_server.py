"""A real HTTP server on 127.0.0.1 that honours `Range`, with injected failures, for the index tests.

The handler is rangehttpserver's (`RangeHTTPServer.RangeRequestHandler`, pinned in the `test`
extra), serving a folder over HTTP/1.1 keep-alive from a thread of the test process; jobs reach it
over TCP like any web server, Spark workers included. Subclassed only to:
- answer `fail_status` (503 by default) to every `fail_every`-th GET (a thread-safe count over
  all clients), or to every GET with `fail_every=1`: the retry tests' "503 Slow Down";
- count the requests, the injected failures and the body bytes sent (the benchmark's "bytes
  fetched" is what the server sent, not what the client says it got);
- hold each answer `delay` seconds and record the most requests in flight at once (the per-host
  limit test), or ignore `Range` altogether (`honour_range=False`: a server that sends whole files).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import socket
import threading
import time
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

__all__ = ["RangeServer", "serving"]


class RangeServer:
    def __init__(
        self,
        root: Path,
        fail_every: int = 0,
        fail_status: int = 503,
        delay: float = 0.0,
        honour_range: bool = True,
    ) -> None:
        rhs = pytest.importorskip(
            "RangeHTTPServer", reason="rangehttpserver is a test dependency: pip install -e '.[test]'"
        )
        self.root, self.fail_every, self.fail_status = Path(root), fail_every, fail_status
        self.delay = delay
        self.requests = self.failed = self.bytes_sent = 0
        self.in_flight = self.max_in_flight = 0
        self.ranges: list[str] = []
        self._lock = threading.Lock()
        server = self

        class Handler(rhs.RangeRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as real servers and urllib3's pool use

            def do_GET(self) -> None:
                with server._lock:
                    server.requests += 1
                    n = server.requests
                    server.ranges.append(self.headers.get("Range", ""))
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    time.sleep(server.delay)
                    if server.fail_every and n % server.fail_every == 0:
                        with server._lock:
                            server.failed += 1
                        self.send_response(server.fail_status)
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    if not honour_range and "Range" in self.headers:
                        del self.headers["Range"]
                    super().do_GET()
                finally:
                    with server._lock:
                        server.in_flight -= 1

            def copyfile(self, source, outputfile) -> None:
                counted = _Counting(outputfile)
                super().copyfile(source, counted)
                with server._lock:
                    server.bytes_sent += counted.n

            def log_message(self, format: str, *args) -> None:  # one line per request otherwise
                pass

        self._handler = functools.partial(Handler, directory=str(self.root))
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/"

    def reset_counts(self) -> None:
        with self._lock:
            self.requests = self.failed = self.bytes_sent = 0
            self.max_in_flight = 0
            self.ranges = []

    def start(self) -> None:
        logging.getLogger("RangeHTTPServer").setLevel(logging.ERROR)
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        socket.create_connection(self._httpd.server_address, timeout=5).close()

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None


class _Counting:
    def __init__(self, out) -> None:
        self.out, self.n = out, 0

    def write(self, data: bytes) -> int:
        self.n += len(data)
        return self.out.write(data)


@contextlib.contextmanager
def serving(root: Path, fail_every: int = 0, **kwargs) -> Iterator[RangeServer]:
    server = RangeServer(root, fail_every, **kwargs)
    server.start()
    try:
        yield server
    finally:
        server.stop()
