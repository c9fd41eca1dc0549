"""Input resolution (globs, folders, listings, URLs) and fetching over real HTTP on loopback."""

from __future__ import annotations

import functools
import gzip
import http.server
import threading
from pathlib import Path

import pytest

from core.storage import local_input
from curation.inputs import InputError, resolve_inputs


def test_glob_and_dir(warc_dir):
    g = resolve_inputs([str(warc_dir / "pages-trafilatura-eval-part*.warc.gz")])
    assert [p.rsplit("/", 1)[1] for p in g] == [f"pages-trafilatura-eval-part{i}.warc.gz" for i in range(4)]
    d = resolve_inputs([str(warc_dir / "quirks")])
    assert len(d) == 8
    # Duplicates across arguments are dropped, order kept.
    both = resolve_inputs([str(warc_dir / "quirks"), str(warc_dir / "quirks" / "*.warc.gz")])
    assert both == d


def test_missing_inputs_fail_before_spark(tmp_path):
    with pytest.raises(InputError, match="input not found"):
        resolve_inputs([str(tmp_path / "nope.warc.gz")])
    with pytest.raises(InputError, match="no file matches"):
        resolve_inputs([str(tmp_path / "*.warc.gz")])


def test_cc_listing(tmp_path):
    listing = tmp_path / "warc.paths.gz"
    rel = "crawl-data/CC-MAIN-2024-22/segments/1/warc/CC-MAIN-x-00000.warc.gz"
    listing.write_bytes(gzip.compress(f"{rel}\n\n{rel.replace('00000', '00001')}\n".encode()))
    uris = resolve_inputs([str(listing)], cc_base_url="s3://commoncrawl/")
    assert uris == [f"s3://commoncrawl/{rel}", f"s3://commoncrawl/{rel.replace('00000', '00001')}"]


def test_unreadable_listing(tmp_path):
    bad = tmp_path / "warc.paths.gz"
    bad.write_bytes(b"not gzip at all")
    with pytest.raises(InputError, match="cannot read listing"):
        resolve_inputs([str(bad)])


@pytest.fixture()
def http_server(warc_dir):
    """A real HTTP server on 127.0.0.1 serving the shared WARC folder (read-only)."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(warc_dir))
    handler.log_message = lambda *a, **k: None
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()


def test_remote_fetch_over_http(http_server, warc_dir):
    uri = f"{http_server}/cc-main-2020-34-sample.warc.gz"
    assert resolve_inputs([uri]) == [uri]
    with local_input(uri) as path:
        data = Path(path).read_bytes()
    assert data == (warc_dir / "cc-main-2020-34-sample.warc.gz").read_bytes()


def test_remote_missing_raises_at_once(http_server):
    """A missing object is permanent: raised on the first 404, naming it, not retried (issue 44 item 7)."""
    with (
        pytest.raises(OSError, match=r"no such object, not retried"),
        local_input(f"{http_server}/nope.warc.gz", retries=3),
    ):
        pass


def test_a_failed_download_is_retried_and_the_copy_is_whole(warc_dir, caplog):
    """The server answers the first GET with 503, then serves the file: the second attempt's copy is
    byte-equal to the file, and the failed first attempt is logged with its number."""
    name = "cc-main-2020-34-sample.warc.gz"
    gets: list[str] = []

    class Flaky(http.server.SimpleHTTPRequestHandler):
        def do_GET(self):
            gets.append(self.path)
            if len(gets) == 1:
                self.send_error(503, "try again")
                return
            super().do_GET()

        def log_message(self, *args, **kwargs):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Flaky, directory=str(warc_dir)))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        with (
            caplog.at_level("WARNING", logger="core.storage"),
            local_input(f"http://127.0.0.1:{srv.server_address[1]}/{name}", retries=2) as path,
        ):
            data = Path(path).read_bytes()
    finally:
        srv.shutdown()
    assert data == (warc_dir / name).read_bytes()
    assert len(gets) >= 2 and "(attempt 1/2)" in caplog.text
