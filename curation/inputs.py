"""Input resolution (on the driver, before Spark starts) and fetching (in the task).

An input argument is a local path, a glob (`**` allowed), a directory (its files), an `s3://` or
`https://` URL (s3 globs allowed), or a Common Crawl listing (`warc.paths`, `warc.paths.gz`, local
or remote) whose relative entries are joined to `cc_base_url`. Everything that can fail for the
user's input (a glob that matches nothing, a missing file, an unreadable listing) fails here with
an `InputError`, so no Spark job starts on a bad command line.

In the task, a remote WARC is downloaded to a local temporary file first: the reader needs a
seekable stream to resynchronise after a corrupt record, and a retry restarts a clean download.
"""

from __future__ import annotations

import contextlib
import glob
import gzip
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from core.errors import InputError

log = logging.getLogger(__name__)

REMOTE_SCHEMES = ("s3://", "s3a://", "https://", "http://")
LISTING_SUFFIXES = (".paths", ".paths.gz")


def is_remote(uri: str) -> bool:
    return uri.startswith(REMOTE_SCHEMES)


def is_listing(uri: str) -> bool:
    return uri.endswith(LISTING_SUFFIXES)


def resolve_inputs(args: list[str], cc_base_url: str = "https://data.commoncrawl.org/") -> list[str]:
    """Expand input arguments to an ordered, de-duplicated list of WARC URIs (local paths absolute)."""
    if not args:
        raise InputError("no --input given")
    out: list[str] = []
    for arg in args:
        if is_listing(arg):
            out.extend(_read_listing(arg, cc_base_url))
        elif is_remote(arg):
            out.extend(_expand_remote(arg))
        else:
            out.extend(_expand_local(arg))
    seen: set[str] = set()
    unique = [u for u in out if not (u in seen or seen.add(u))]
    if not unique:
        raise InputError(f"inputs {args} resolve to no files")
    return unique


def _expand_local(arg: str) -> list[str]:
    p = Path(arg).expanduser()
    if any(ch in arg for ch in "*?["):
        matches = sorted(m for m in glob.glob(str(p), recursive=True) if Path(m).is_file())
        if not matches:
            raise InputError(f"no file matches {arg!r}")
        return [str(Path(m).resolve()) for m in matches]
    if p.is_dir():
        files = sorted(str(f.resolve()) for f in p.iterdir() if f.is_file() and not f.name.startswith("."))
        if not files:
            raise InputError(f"directory {arg!r} holds no files")
        return files
    if not p.is_file():
        raise InputError(f"input not found: {arg!r}")
    if not os.access(p, os.R_OK):
        raise InputError(f"input not readable: {arg!r}")
    return [str(p.resolve())]


def _expand_remote(arg: str) -> list[str]:
    if arg.startswith(("s3://", "s3a://")) and any(ch in arg for ch in "*?["):
        import fsspec

        fs, _, _ = fsspec.get_fs_token_paths(arg)
        try:
            matches = sorted(fs.glob(arg))
        except Exception as e:  # network or credentials: the user's problem to fix, said clearly
            raise InputError(f"cannot list {arg!r}: {e}") from None
        if not matches:
            raise InputError(f"no object matches {arg!r}")
        return [f"s3://{m}" for m in matches]
    return [arg]


def _read_listing(arg: str, cc_base_url: str) -> list[str]:
    """Read a Common Crawl `warc.paths(.gz)` listing: one path per line, relative to the bucket."""
    try:
        if is_remote(arg):
            import fsspec

            with fsspec.open(arg, "rb") as f:
                raw = f.read()
        else:
            raw = Path(arg).expanduser().read_bytes()
        if arg.endswith(".gz"):
            raw = gzip.decompress(raw)
        text = raw.decode("utf-8")
    except (OSError, EOFError, UnicodeDecodeError, gzip.BadGzipFile) as e:
        raise InputError(f"cannot read listing {arg!r}: {e}") from None
    except Exception as e:  # fsspec/network errors come in many types
        raise InputError(f"cannot read listing {arg!r}: {e}") from None
    base = cc_base_url if cc_base_url.endswith("/") else cc_base_url + "/"
    entries = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if is_remote(line) or line.startswith("/"):
            entries.append(line)
        elif "\x00" in line or " " in line:
            raise InputError(f"listing {arg!r} line {n} is not a path: {line[:80]!r}")
        else:
            entries.append(base + line)
    if not entries:
        raise InputError(f"listing {arg!r} is empty")
    return entries


@contextlib.contextmanager
def local_copy(uri: str, retries: int = 3, tmp_dir: str | None = None) -> Iterator[str]:
    """Yield a local path for `uri`: the path itself if local, else a downloaded temporary copy."""
    if not is_remote(uri):
        yield uri
        return
    import fsspec

    fd, tmp = tempfile.mkstemp(prefix="refinery-warc-", suffix=Path(uri).suffix, dir=tmp_dir)
    os.close(fd)
    try:
        for attempt in range(1, retries + 1):
            try:
                with fsspec.open(uri, "rb") as src, open(tmp, "wb") as dst:
                    shutil.copyfileobj(src, dst, length=4 * 2**20)
                break
            except Exception as e:
                if attempt == retries:
                    raise OSError(f"download of {uri} failed after {retries} attempts: {e}") from e
                log.warning("download of %s failed (attempt %d/%d): %s", uri, attempt, retries, e)
                time.sleep(min(2**attempt, 30))
        yield tmp
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
