"""Import a script of bench/ as a module, for the tests that check its pieces or run its smoke path."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from testkit.shared_data import REPO_ROOT


def load_bench(script: str) -> ModuleType:
    """bench/<package>/<script>.py, given as "<package>/<script>", as a module, loaded once per process."""
    name = "bench_" + script.replace("/", "_")
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, REPO_ROOT / "bench" / f"{script}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module
