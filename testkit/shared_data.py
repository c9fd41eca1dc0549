"""Locate the shared real-data folder (../shared/data beside the checkout): tests and benchmarks only.

Tests and benchmarks read third-party data from there and never copy it into the repo.
`REFINERY_SHARED_DATA` overrides the location.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_VAR = "REFINERY_SHARED_DATA"
REPO_ROOT = Path(__file__).resolve().parents[1]


def shared_data_dir() -> Path:
    """Return the shared data folder, or raise FileNotFoundError naming where it looked."""
    override = os.environ.get(ENV_VAR)
    path = Path(override) if override else REPO_ROOT.parent / "shared" / "data"
    if not path.is_dir():
        raise FileNotFoundError(
            f"shared data folder not found at {path}; put ../shared beside the checkout or set {ENV_VAR}"
        )
    return path
