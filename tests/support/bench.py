"""A bench module by its path under bench/, for the tests that check its pieces or run its smoke path.

bench/ is a package (`python -m bench.curation.pii_recall`), so this is `importlib.import_module`; a test
may as well `from bench.curation import pii_recall`. Kept for the tests that name benches by path."""

from __future__ import annotations

import importlib
from types import ModuleType


def load_bench(script: str) -> ModuleType:
    """bench/<package>/<script>.py, given as "<package>/<script>", as the module bench.<package>.<script>."""
    return importlib.import_module("bench." + script.replace("/", "."))
