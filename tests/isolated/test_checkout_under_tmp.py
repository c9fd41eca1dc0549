"""The isolated tier passes from a checkout under /tmp, ../shared a link beside it (issue 47).

Its workers and nodes each get a private /tmp; when that hid the checkout itself, a clone under /tmp
failed all 8 tests of the tier (`exec: <checkout>/.venv/bin/python: not found`) while the same clone
elsewhere passed. So `make test` runs the tier's isolation proof and one isolated job (two trainer
nodes reading shards and writing checkpoints on S3, then resuming) from a copy of this checkout placed
in /tmp, with this checkout's Python environment: whichever place the suite itself runs from, the case
of a checkout under /tmp is tested. The copy's code is what runs (PYTHONPATH: the environment's editable
install points here), and CI=true makes a refused private /tmp fail instead of skip.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from testkit.isolated import ROOT, TMP, require_private_tmp
from testkit.shared_data import ENV_VAR, shared_data_dir

pytestmark = [pytest.mark.isolated, pytest.mark.slow]

INNER = (
    "tests/isolated/test_isolation.py",
    "tests/trainer/test_multinode.py::test_two_isolated_nodes_train_and_resume_from_s3_as_one_node",
)


def copy_checkout(dest: Path) -> None:
    """This checkout's files as git sees them: tracked and new ones not ignored, uncommitted edits
    included (the code under test), without .venv, out/ or caches. Outside a git clone (a source
    archive), the tree without those."""
    git = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         cwd=ROOT, capture_output=True, timeout=60)  # fmt: skip
    if git.returncode != 0:
        ignore = shutil.ignore_patterns(".git", ".venv", "out", "__pycache__", ".pytest_cache", ".ruff_cache")
        shutil.copytree(ROOT, dest, symlinks=True, ignore=ignore)
        return
    for name in dict.fromkeys(git.stdout.decode().split("\0")):
        src = ROOT / name
        if name and (src.is_file() or src.is_symlink()):  # a tracked file deleted in the tree is skipped
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name, follow_symlinks=False)


def test_the_tier_passes_from_a_checkout_under_tmp(tmp_path):
    require_private_tmp()
    base = Path(tempfile.mkdtemp(prefix="refinery-clone-", dir=TMP))  # /tmp itself, whatever TMPDIR says
    try:
        copy = base / "refinery"
        copy_checkout(copy)
        data = shared_data_dir().resolve()
        # ../shared beside the copy, as a link: the workers must get what it points to
        if data.name == "data":
            (base / "shared").symlink_to(data.parent)
        else:
            (base / "shared").mkdir()
            (base / "shared" / "data").symlink_to(data)
        # the inner run finds its data as a clone does (../shared), and is no xdist worker of ours
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_") and k != ENV_VAR}
        env.update(PYTHONPATH=str(copy), CI="true")
        where = subprocess.run(
            [sys.executable, "-c", "import core, testkit.isolated as i; print(core.__file__, i.ROOT)"],
            cwd=copy, env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert where.stdout.split() == [str(copy / "core" / "__init__.py"), str(copy)], where
        cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--basetemp={tmp_path / 'inner'}",
               "-q", *INNER]  # fmt: skip
        run = subprocess.run(cmd, cwd=copy, env=env, capture_output=True, text=True, timeout=1500)
        out = run.stdout + run.stderr
        assert run.returncode == 0, out[-8000:]
        assert f"{len(INNER)} passed" in out and "skipped" not in out, out[-4000:]
    finally:
        shutil.rmtree(base, ignore_errors=True)
