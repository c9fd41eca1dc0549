"""Input resolution (on the driver, before Spark starts) and fetching (in the task).

An input argument is a local path, a glob (`**` allowed), a directory (its files), an `s3://` or
`https://` URL (s3 globs allowed), or a Common Crawl listing (`warc.paths`, `warc.paths.gz`, local
or remote) whose relative entries are joined to `cc_base_url`. Everything that can fail for the
user's input (a glob that matches nothing, a missing file, an unreadable listing) fails here with
an `InputError`, so no Spark job starts on a bad command line.

In the task, a remote WARC is downloaded to a local temporary file first (core.storage.local_input,
`reader.download_retries` attempts): the reader needs a seekable stream to resynchronise after a
corrupt record, and a retry restarts a clean download. `is_remote` is core.storage's: an object
store or http(s).

What comes from data never chooses what we read (CONVENTIONS.md, 14). A name found in an index
row (`warc_filename`, curation/index/job.py) or in a remote listing is resolved by ONE function,
`resolve_under(base, name)`: it must land under `base`, same scheme and host, after `..`,
percent-encoding (`%2e%2e`, `%2F`, double encoding), `;` path parameters, Unicode look-alike dots
and, for a local base, symbolic links have been taken into account; anything else (an absolute
path, `file://`, another scheme, host, port or bucket, userinfo, a backslash) raises
`UnsafeLocation`. Only a listing the user holds locally may still name any local path or URL: it
is the user's own command line, written down.
"""

from __future__ import annotations

import glob
import gzip
import os
import re
import unicodedata
from functools import lru_cache
from pathlib import Path
from urllib.parse import unquote, urlsplit

from core.errors import InputError
from core.storage import is_remote

LISTING_SUFFIXES = (".paths", ".paths.gz")


class UnsafeLocation(InputError):
    """A path or URL from data that does not resolve under its base; `reason` says why.

    An InputError: found on the driver it is exit status 2 before Spark starts (the caller adds
    which row or line); found in a task it is a counted drop (curation/index/job.py).
    """

    def __init__(self, name: object, base: str, reason: str) -> None:
        super().__init__(f"{name!r} does not resolve under {base}: {reason}")
        self.name, self.base, self.reason = name, base, reason


# `scheme:` at the start: `http:`, `file:`, `s3:`, `javascript:`, and a Windows `C:` alike
_SCHEME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_SCHEME_FAMILY = {"s3a": "s3"}  # one bucket namespace, two spellings
_DEFAULT_PORT = {"http": 80, "https": 443}
# Characters no WARC name has and that change what a path or URL means: a backslash (a separator
# to Windows and some servers), `?` and `#` (they end an HTTP path), controls (urlsplit silently
# drops tab and newline, so `ht\ttp://` would parse as `http://`).
_FORBIDDEN = re.compile(r"[\\?#\x00-\x1f\x7f]")


def _decoded(segment: str) -> str:
    """`segment` percent-decoded until nothing changes (`%252e` is `%2e` to a second decoder),
    NFKC-folded (`\uff0e` is `.` to a normalising server)."""
    for _ in range(8):
        nxt = unquote(segment, errors="strict") if "%" in segment else segment
        if nxt == segment:
            break
        segment = nxt
    return unicodedata.normalize("NFKC", segment)


def _segments(path: str, name: object, base: str) -> list[str]:
    """`path`'s segments with empty and `.` ones dropped and `..` applied; UnsafeLocation where a
    `..` climbs above the start or a segment only looks harmless until someone decodes it."""
    out: list[str] = []
    for seg in path.split("/"):
        if seg in ("", "."):
            continue
        if seg == "..":
            if not out:
                raise UnsafeLocation(name, base, "'..' climbs above the base")
            out.pop()
            continue
        try:
            plain = _decoded(seg)
        except UnicodeDecodeError:
            raise UnsafeLocation(name, base, "a percent-encoding that is not UTF-8") from None
        # `..;x` is `..` to Tomcat-style servers; `%2e%2e` and `%2F` are `..` and `/` to most
        if plain.split(";", 1)[0] in (".", "..") or "/" in plain or _FORBIDDEN.search(plain):
            raise UnsafeLocation(
                name, base, f"segment {seg!r} reads as {plain!r} to a server that decodes or folds it"
            )
        out.append(seg)
    return out


@lru_cache(maxsize=64)
def _base_parts(base: str) -> tuple[str, str, int | None, list[str]] | None:
    """(scheme family, host or bucket, port, path segments) of a URL base; None for a local folder."""
    if "://" not in base:
        return None
    parts = urlsplit(base)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    port = parts.port or _DEFAULT_PORT.get(scheme)
    return _SCHEME_FAMILY.get(scheme, scheme), host, port, [s for s in parts.path.split("/") if s]


def resolve_under(base: str, name: object) -> str:
    """Where `name` (a relative path from an index row or a listing line) is: under `base`.

    `base` is a URL prefix (http(s)://host[:port]/prefix, s3://bucket/prefix) or a local folder.
    A relative `name` is joined to it after `..` is applied; an absolute URL is accepted only when
    it already lies under `base` (same scheme, host, port, no userinfo, path below the prefix), and
    is rewritten onto `base`. Raises UnsafeLocation for anything else; touches the network never
    and the disk only to resolve symbolic links under a local base.
    """
    if not isinstance(name, str) or not name.strip():
        raise UnsafeLocation(name, base, "an empty name")
    if _FORBIDDEN.search(name):
        raise UnsafeLocation(name, base, "a backslash, '?', '#' or a control character")
    where = _base_parts(base)
    if _SCHEME_RE.match(name):
        if where is None:
            raise UnsafeLocation(name, base, "a URL, where the base is a local folder")
        scheme, host, port, prefix = where
        try:
            parts = urlsplit(name)
            their_port = parts.port or _DEFAULT_PORT.get(parts.scheme.lower())
        except ValueError as e:  # a port that is not a number, an unbalanced [
            raise UnsafeLocation(name, base, f"not a URL ({e})") from None
        if _SCHEME_FAMILY.get(parts.scheme.lower(), parts.scheme.lower()) != scheme:
            raise UnsafeLocation(name, base, f"scheme {parts.scheme}:, not the base's")
        if "@" in parts.netloc:  # https://data.commoncrawl.org@evil/ is a request to evil
            raise UnsafeLocation(name, base, "a user name or password in the URL")
        if (parts.hostname or "").lower() != host or their_port != port:
            raise UnsafeLocation(name, base, f"host {parts.netloc!r}, not the base's")
        if parts.query or parts.fragment:
            raise UnsafeLocation(name, base, "a ?query or #fragment")
        segs = _segments(parts.path, name, base)
        if segs[: len(prefix)] != prefix:
            raise UnsafeLocation(name, base, "a path outside the base's prefix")
        segs = segs[len(prefix) :]
    elif name.startswith("/"):  # `/etc/...`, and `//evil/x` (a scheme-relative URL to a browser)
        raise UnsafeLocation(name, base, "an absolute path")
    else:
        segs = _segments(name, name, base)
    if not segs:
        raise UnsafeLocation(name, base, "names the base itself, not a file under it")
    joined = base.rstrip("/") + "/" + "/".join(segs)
    if where is None:  # a local folder: a symbolic link under it must not lead out of it
        root = os.path.realpath(base)
        real = os.path.realpath(joined)
        if os.path.commonpath([root, real]) != root:
            raise UnsafeLocation(name, base, f"a symbolic link to {real}, outside the base")
    return joined


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
    # A listing on the user's own disk is the user's command line written down: it may name any
    # local path or URL. One fetched from elsewhere is data: its lines resolve under cc_base_url.
    own = not is_remote(arg)
    entries = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if own and (is_remote(line) or line.startswith("/")):
            entries.append(line)
        elif "\x00" in line or " " in line:
            raise InputError(f"listing {arg!r} line {n} is not a path: {line[:80]!r}")
        else:
            try:
                entries.append(resolve_under(cc_base_url, line))
            except UnsafeLocation as e:
                raise InputError(f"listing {arg!r} line {n} is refused: {e}") from None
    if not entries:
        raise InputError(f"listing {arg!r} is empty")
    return entries
