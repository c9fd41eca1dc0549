"""The report tests' run folder, shared by test_report.py and the browser tier (test_browse_browser.py):
the suite's reduced demo (tests/support/demo.py, the `demo_run` fixture), whose `extract` over real
WARCs, `dedup`, quality model, `score` and `report` are what these tests read. It was a run of its own
(extract over two of the same WARCs, dedup, a small quality model, score: ~170 s of a loaded two-worker
run) until issue 55: the demo makes every one of those outputs anyway. tests/conftest.py's
SHARED_SETUP_GROUPS sends the files that name `report_run` to the demo's worker.
"""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def report_run(demo_run) -> Path:
    """The demo's folder: extract/, dedup/, scored/ (with the quality column), recipe.yaml, report.json."""
    for part in ("extract", "dedup", "scored", "recipe.yaml", "report.json"):
        assert (demo_run / part).exists(), part
    return demo_run
