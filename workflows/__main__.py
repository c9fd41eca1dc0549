"""`python -m workflows ...` (see workflows/cli.py)."""

from core.cli import run_package

# handle_interrupts() first, then workflows.cli (seconds to import): a Ctrl-C meanwhile is `interrupted` too
run_package(__name__, "workflows.cli")
