"""testkit/tiers.py: a tier the platform refuses skips on a developer's machine and fails under CI=true."""

from __future__ import annotations

import pytest

from testkit.tiers import in_ci, refused


@pytest.mark.parametrize(("value", "ci"), [("true", True), ("TRUE", True), ("1", True), ("yes", True),
                                           ("", False), ("false", False), ("0", False)])  # fmt: skip
def test_ci_is_read_from_the_environment(monkeypatch, value, ci):
    monkeypatch.setenv("CI", value)
    assert in_ci() is ci


def test_refused_skips_outside_ci_and_fails_in_ci(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no unshare here"):
        refused("no unshare here")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=r"no unshare here\n\(CI=true: this tier must run in CI"):
        refused("no unshare here")
