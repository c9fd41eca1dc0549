"""What a block of code did to files, seen by CPython itself: for the tests that a hostile name read
from data (a manifest, a marker) opens, creates or deletes nothing outside its folder.

A refusal alone does not show that: code can open the victim first and fail later. `recording()`
lists the path of every file event inside the block, from an audit hook (sys.addaudithook, PEP 578),
which sees every `open` (Python's and the C extensions' that go through it), mkdir, rename/replace,
remove/unlink, rmdir and shutil.rmtree, whoever makes the call. `tree()` is the other half: what a
folder held before and after, so a file made outside Python's open (a lock's O_CREAT) is seen too.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

__all__ = ["recording", "tree"]

# the events whose first argument is the path acted on (os.rename's second, the target, is taken too)
_EVENTS = ("open", "os.mkdir", "os.rename", "os.remove", "os.rmdir", "os.truncate", "shutil.rmtree")

_opened: list[str] | None = None
_installed = False


def _audit(event: str, args: tuple) -> None:
    if _opened is None or event not in _EVENTS:
        return
    for path in args[:2] if event == "os.rename" else args[:1]:
        if isinstance(path, (str, bytes, os.PathLike)):
            # a name relative to a dir_fd (rmtree's inner calls) shows relative to the cwd: such calls
            # are inside a tree whose top rmtree itself recorded
            _opened.append(os.path.abspath(os.fsdecode(path)))


@contextlib.contextmanager
def recording() -> Iterator[list[str]]:
    """The absolute paths of the file events inside the block, in order (the list fills as it runs)."""
    global _opened, _installed
    if not _installed:  # a hook cannot be removed: one per process, recording only inside a block
        sys.addaudithook(_audit)
        _installed = True
    _opened = []
    try:
        yield _opened
    finally:
        _opened = None


def tree(root: Path) -> dict[str, int]:
    """Every path under `root` with its size: compared before and after, what was made or changed."""
    return {str(p): p.lstat().st_size for p in root.rglob("*")}
