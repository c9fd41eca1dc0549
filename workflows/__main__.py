"""`python -m workflows ...` (see workflows/cli.py)."""

import sys

if __name__ == "__main__":  # before the imports below (seconds): a Ctrl-C then is `interrupted` too
    from core.cli import handle_interrupts

    handle_interrupts()

from workflows.cli import main

if __name__ == "__main__":
    sys.exit(main())
