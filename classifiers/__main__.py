"""`python -m classifiers ...`, or `spark-submit classifiers/__main__.py ...` (run as a script)."""

import sys
from pathlib import Path

if __package__ in (None, ""):
    # Started as a file by spark-submit: make the project importable from the checkout.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

if __name__ == "__main__":  # before the imports below (seconds): a Ctrl-C then is `interrupted` too
    from core.cli import handle_interrupts

    handle_interrupts()

from classifiers.cli import main

if __name__ == "__main__":
    sys.exit(main())
