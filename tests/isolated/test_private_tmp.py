"""testkit/isolated.py's private /tmp, without Spark: what a worker or node sees of the driver's /tmp.

Issue 47: with a checkout under /tmp, the tmpfs over /tmp hid the checkout and its .venv from the
workers and nodes (`exec: .../.venv/bin/python: not found`). A private /tmp now gets back the folders a
machine has installed (the checkout, the Python environment, ../shared, as a link or a copy) and
nothing else. These checks take a second, and are the tier's guard for a checkout under /tmp (a
rerun of the tier's tests from a copy in /tmp was removed as a repeat of them, issue 55).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from testkit.isolated import TMP, _kept_under_tmp, private_tmp, project_paths, require_private_tmp

# What the process inside sees: {path: its text, or None where there is nothing}, and /tmp's mount.
SEE = """
import json, os, sys
seen = {p: open(p).read() if os.path.isfile(p) else None for p in sys.argv[1:]}
mounts = [ln.split() for ln in open("/proc/self/mounts")]
print(json.dumps({"seen": seen, "tmp_fs": [m[2] for m in mounts if m[1] == "/tmp"][-1]}))
"""


def test_kept_folders_are_those_under_tmp_outermost_first():
    paths = [
        Path("/tmp/c/refinery/.venv"),
        Path("/tmp/c/refinery"),
        Path("/tmp/c/shared"),
        Path("/srv/shared"),
    ]
    assert _kept_under_tmp(paths) == ["c/refinery", "c/shared"]
    assert _kept_under_tmp([Path("/srv/refinery"), Path("/var/tmp/x")]) == []
    with pytest.raises(RuntimeError, match="/tmp itself"):
        _kept_under_tmp([Path("/tmp")])


def test_project_paths_name_the_checkout_its_environment_and_shared_data():
    from testkit.isolated import ROOT
    from testkit.shared_data import shared_data_dir

    paths = project_paths()
    assert ROOT in paths and Path(sys.prefix).resolve() in paths
    # the data folder is inside one of them, as named (../shared may be a link) and as resolved
    data = shared_data_dir()
    assert any(data.is_relative_to(p) for p in paths) and any(data.resolve().is_relative_to(p) for p in paths)


@pytest.mark.isolated
def test_a_private_tmp_keeps_the_checkout_under_tmp_and_hides_the_rest():
    """A layout as `git clone ... /tmp/x/refinery` with ../shared beside it, as a link (to a folder outside
    /tmp) and as a copy: inside, the checkout, its .venv and both shared folders are there, at the same
    paths; a file beside the checkout and one in /tmp itself are not; /tmp is the private tmpfs, and what
    is written in it stays there."""
    require_private_tmp()
    base = Path(tempfile.mkdtemp(prefix="refinery-layout-", dir=TMP))
    outside = Path(tempfile.mkdtemp(prefix="refinery-shared-", dir="/var/tmp"))
    in_tmp, private = TMP / f"{base.name}-driver.txt", TMP / f"{base.name}-private.txt"
    try:
        files = {
            base / "refinery" / ".venv" / "bin" / "python": "venv",
            base / "refinery" / "Makefile": "checkout",
            outside / "data" / "x": "linked shared",
            base / "copied" / "data" / "x": "copied shared",
            base / "beside.txt": "driver",
            in_tmp: "driver",
        }
        for path, text in files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        (base / "shared").symlink_to(outside)
        keep = [
            *project_paths(),
            base / "refinery",
            base / "refinery" / ".venv",
            base / "shared",
            base / "copied",
        ]
        wrote = base / "refinery" / "written-inside.txt"  # the checkout is shared: a write there is seen
        look = [*map(str, files), str(base / "shared" / "data" / "x")]
        code = SEE + f"open({str(private)!r}, 'w').write('x'); open({str(wrote)!r}, 'w').write('y')"
        run = subprocess.run(
            private_tmp([sys.executable, "-c", code, *look], keep), capture_output=True, text=True, timeout=60
        )
        assert run.returncode == 0, run.stderr
        got = json.loads(run.stdout)
        assert got["tmp_fs"] == "tmpfs"
        assert got["seen"] == {
            str(base / "refinery" / ".venv" / "bin" / "python"): "venv",
            str(base / "refinery" / "Makefile"): "checkout",
            str(outside / "data" / "x"): "linked shared",  # outside /tmp: never hidden
            str(base / "copied" / "data" / "x"): "copied shared",
            str(base / "shared" / "data" / "x"): "linked shared",  # through the link, bound back
            str(base / "beside.txt"): None,
            str(in_tmp): None,
        }
        assert not private.exists() and wrote.read_text() == "y"
    finally:
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(outside, ignore_errors=True)
        in_tmp.unlink(missing_ok=True)
