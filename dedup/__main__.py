"""`python -m dedup run ...`, or `spark-submit dedup/__main__.py run ...` (run as a script)."""

import sys
from pathlib import Path

if __package__ in (None, ""):
    # Started as a file by spark-submit: make the project importable from the checkout, and take
    # this package's own folder off sys.path, where its modules (tokenize.py, ...) would shadow the
    # standard library's.
    here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
    sys.path.insert(0, str(here.parent))

from core.cli import run_package

# handle_interrupts() first, then dedup.cli (seconds to import): a Ctrl-C meanwhile is `interrupted` too
run_package(__name__, "dedup.cli")
