"""`python -m classifiers ...`, or `spark-submit classifiers/__main__.py ...` (run as a script)."""

import sys
from pathlib import Path

if __package__ in (None, ""):
    # Started as a file by spark-submit: make the project importable from the checkout.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.cli import run_package

# handle_interrupts() first, then classifiers.cli (seconds to import): a Ctrl-C meanwhile is `interrupted` too
run_package(__name__, "classifiers.cli")
