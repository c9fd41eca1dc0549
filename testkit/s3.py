"""A real S3 server for tests: moto's server on 127.0.0.1 (a free port), not mocked function calls.

`S3Server` runs moto's WSGI app as a real HTTP server in a thread of the test process
(`moto.server.ThreadedMotoServer`): jobs reach it over TCP like any S3 endpoint, from subprocesses
and Spark workers alike, through the standard AWS environment (`env`: AWS_ENDPOINT_URL and dummy
credentials). The bucket contents live in moto's in-process backend, so `stop()` makes the
endpoint refuse connections while keeping the objects, and `start()` brings it back on the same
port with them: the fault tests' "server stopped mid-job, back for the rerun".

moto is a test dependency (`moto[server]`, pinned in pyproject.toml's `test` extra); the tests
that need it skip with the install hint when it is missing.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from trainer.launch import free_port

__all__ = ["S3Server", "s3_env", "upload_tree"]


class S3Server:
    def __init__(self) -> None:
        moto_server = pytest.importorskip(
            "moto.server", reason="moto[server] is a test dependency: pip install -e '.[test]'"
        )
        self._cls = moto_server.ThreadedMotoServer
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._server = None

    @property
    def env(self) -> dict[str, str]:
        """The AWS environment a job needs to reach this server (no real credential anywhere)."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
            # a developer's own ~/.aws must not leak into (or be used by) the tests
            "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        }

    def start(self) -> None:
        # moto binds in its thread and would wait forever if that failed: the port is probed first
        # (with SO_REUSEADDR, as the server binds) so a port that is not free fails here instead.
        for attempt in range(50):
            try:
                with socket.socket() as s:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    s.bind(("127.0.0.1", self.port))
                break
            except OSError:
                if attempt == 49:
                    raise
                time.sleep(0.2)
        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
        self._server = self._cls(ip_address="127.0.0.1", port=self.port, verbose=False)
        self._server.start()
        for _ in range(100):
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            time.sleep(0.05)
        raise RuntimeError(f"moto server did not come up on port {self.port}")

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None

    @property
    def running(self) -> bool:
        return self._server is not None


@contextlib.contextmanager
def s3_env(server: S3Server) -> Iterator[None]:
    """This process's environment pointed at `server` (and fsspec's cached clients dropped)."""
    import s3fs

    old = {k: os.environ.get(k) for k in server.env}
    os.environ.update(server.env)
    s3fs.S3FileSystem.clear_instance_cache()  # a client made for another endpoint keeps it
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        s3fs.S3FileSystem.clear_instance_cache()


def upload_tree(local: Path, uri: str) -> list[str]:
    """Upload a file or every file under a folder to `uri` (same relative names); returns the URIs."""
    import fsspec

    fs, _, _ = fsspec.get_fs_token_paths(uri)
    key = uri.split("://", 1)[1].rstrip("/")
    files = [local] if local.is_file() else sorted(p for p in local.rglob("*") if p.is_file())
    out = []
    for f in files:
        dest = key if local.is_file() else f"{key}/{f.relative_to(local).as_posix()}"
        fs.put_file(str(f), dest)
        out.append(f"s3://{dest}")
    return out
