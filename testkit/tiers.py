"""What a tier does where the platform refuses what it needs: skip on a developer's machine, fail in CI.

The `isolated` tier (Spark workers and trainer nodes in their own mount namespaces), and the full-disk
fault test (a size-limited tmpfs), need root: `unshare -m` and `mount`. A laptop without them skips
those tests with the reason, as the `gpu` tier skips without CUDA. But pyproject.toml says they run in
CI, so a CI run (`CI=true`, as CI services set it) where they cannot run has not tested what it claims:
there the same reason fails the test (issue 44), instead of a skip line nobody reads.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def in_ci() -> bool:
    """`CI` set to true (GitHub Actions, GitLab and most services set `CI=true`), 1 or yes."""
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def refused(reason: str) -> NoReturn:
    """Skip the test with `reason`; under CI=true fail it with the reason instead."""
    if in_ci():
        pytest.fail(
            f"{reason}\n(CI=true: this tier must run in CI, so it fails rather than skips)", pytrace=False
        )
    pytest.skip(reason)
