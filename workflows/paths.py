"""Where a workflow finds the project's configs and recipes and the shared data, in one place.

The configs (configs/*.yaml) and the demo's recipes (mixtures/*.yaml) are files of the project beside its
packages, so they are found from the installed packages' own location (an editable install or a checkout
on PYTHONPATH), not from the caller's working folder. The shared test data is `$REFINERY_SHARED_DATA`, else
`../shared/data` beside the project; `make demo` and `make ablate` take their WARCs from it when none are
given (`shared_warcs`).
"""

from __future__ import annotations

import os
from pathlib import Path

import mixtures

PROJECT_ROOT = Path(mixtures.__file__).resolve().parent.parent
SHARED_DATA_ENV = "REFINERY_SHARED_DATA"


def project_path(p: str | Path) -> Path:
    """A path as given when absolute, else relative to the project (e.g. configs/train-debug.yaml)."""
    p = Path(p)
    return p if p.is_absolute() else PROJECT_ROOT / p


def default_shared_data() -> Path:
    """$REFINERY_SHARED_DATA, else the shared data folder beside the project (../shared/data)."""
    return Path(os.environ.get(SHARED_DATA_ENV) or PROJECT_ROOT.parent / "shared" / "data")


def shared_warcs(shared: Path) -> list[str]:
    """Every WARC of the shared data: the crawl samples, the quirks and the WET fragments."""
    return [f"{shared}/warc/*.warc.gz", f"{shared}/warc/quirks/*", f"{shared}/warc/wet-cc-main-2016-50/*"]
