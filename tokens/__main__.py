"""`python -m tokens ...`, or `spark-submit tokens/__main__.py ...` (run as a script)."""

import sys
from pathlib import Path

if __package__ in (None, ""):
    # Started as a file by spark-submit: make the project importable from the checkout. (No module
    # here shadows the standard library, so this folder may stay on sys.path.)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.cli import run_package

# handle_interrupts() first, then tokens.cli (seconds to import): a Ctrl-C meanwhile is `interrupted` too
run_package(__name__, "tokens.cli")
