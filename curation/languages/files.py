"""The files the language commands read and write, handled safely (one job: their I/O): where a command
may write (`check_out`: never the shipped configs/ without --force), writing through a temporary name
(`write_text_atomic`, `write_settings` with the text `dump` validates first), and reading a reference as
a stream of bounded lines that refuses a FIFO or device (`open_regular`, `iter_lines`)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from core.config import build_config
from core.errors import InputError
from core.safe_yaml import load_yaml
from curation.languages.lookup import _cached
from curation.languages.schema import SHIPPED, LanguageSettings


def check_out(out: str | Path, force: bool, flag: str = "--out", *, parent: bool = True) -> Path:
    """The path a command may write: anywhere but the project's shipped configs (SHIPPED), and there
    only with `--force`. The path is resolved first, so `..` and links into configs/ count as in it.
    A calibration or a derived file replaces what a preset reads (a 3-language reference cut the
    shipped 67-language LID table to 3, and every run of the multilingual preset after it); the user
    must name the shipped file and say so."""
    out = Path(out)
    real = out.resolve()
    if real.is_relative_to(SHIPPED.resolve()) and not force:
        raise InputError(
            f"{flag} {out} is a shipped config of this project ({real.relative_to(SHIPPED.resolve().parent)}): "
            f"write it elsewhere, or add --force to replace the shipped file"
        )
    if parent and not real.parent.is_dir():  # `parent=False`: the writer makes it
        raise InputError(f"{flag}: no folder {out.parent}")
    return out


def write_text_atomic(path: Path, text: str) -> None:
    """`text` to `path` through a temporary name in the same folder, renamed on success: a reader
    never sees a half-written file, and a failed write leaves the old one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


MAX_LINE_CHARS = 1 << 20
"""Longest line a reference file may have (a `.jsonl` record is one line: a long Wikipedia article
is ~200K characters); a longer one is refused, naming the file and the line."""


def open_regular(path: str | Path):
    """`path` opened for reading UTF-8 text if it is a regular file (a link to one included); an
    InputError naming it otherwise. A FIFO, socket or device would block `open` or `read` forever (a
    FIFO in calibrate-lid's folder hung it): opened without blocking, checked on the descriptor
    (no race between the check and the open), then read as a file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as e:
        raise InputError(f"{path}: cannot be read ({e.strerror or e})") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InputError(f"{path}: not a regular file (a folder, FIFO, socket or device)")
        os.set_blocking(fd, True)
        return open(fd, encoding="utf-8", errors="strict")  # the caller closes it
    except BaseException:
        os.close(fd)
        raise


def is_regular(path: Path) -> bool:
    """Whether `path` is (a link to) a regular file, decided without opening it."""
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except OSError:
        return False


def iter_lines(path: str | Path, max_chars: int = MAX_LINE_CHARS) -> Iterator[tuple[int, str]]:
    """(line number, line without its end) of a UTF-8 text file, read as a stream: no line longer
    than `max_chars` is ever held (an InputError naming the file and the line), and a byte that is
    not UTF-8 is an InputError naming the file. Lines end where `str.splitlines` ends them."""
    with open_regular(path) as f:
        n = 0
        while True:
            try:
                raw = f.readline(max_chars + 1)
            except UnicodeDecodeError as e:
                raise InputError(f"{path}: not UTF-8 text after line {n}: {e.reason}") from None
            except OSError as e:
                raise InputError(f"{path}: cannot be read ({e.strerror or e})") from None
            if not raw:
                return
            n += 1
            if len(raw) > max_chars and not raw.endswith(("\n", "\r")):
                raise InputError(f"{path}:{n}: a line of more than {max_chars:,} characters")
            yield from ((n, part) for part in (raw.splitlines() or [""]))


def header(settings: LanguageSettings, how: str) -> str:
    """The comment atop a generated file: what it is, where its values come from, how to remake it."""
    return f"# Curation settings of {settings.language} (curation/languages/).\n# Source: {settings.source}\n# {how}\n"


def dump(settings: LanguageSettings, how: str) -> str:
    """The YAML text of a settings file: header, then every key in the model's order (a file shows
    each threshold, defaults included), lists of words and (n, fraction) pairs inline, UTF-8."""
    import yaml

    class _Dumper(yaml.SafeDumper):
        def represent_list(self, data: Any) -> Any:  # a list of scalars on one line
            flow = all(not isinstance(x, (list, tuple, dict)) for x in data)
            return self.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)

    _Dumper.add_representer(list, _Dumper.represent_list)
    body = yaml.dump(
        settings.to_dict(),
        Dumper=_Dumper,
        allow_unicode=True,
        sort_keys=False,
        default_flow_style=False,
        width=100,
    )
    text = header(settings, how) + body
    check = build_config(LanguageSettings, load_yaml(text, settings.language), settings.language)
    assert check == settings, "a settings file must read back as what was written"
    return text


def write_settings(settings: LanguageSettings, path: str | Path, how: str) -> Path:
    """Write `settings` to `path`: validated first (`dump` reads its text back), then through a
    temporary name, so a half-written file never exists. The per-file cache is cleared: a reader in
    this process must see the new file, not the one it read before."""
    path = Path(path)
    write_text_atomic(path, dump(settings, how))
    _cached.cache_clear()
    return path
