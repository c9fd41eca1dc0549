"""Nothing in the repository is tied to one machine (issue 55): no tracked file names an absolute path
of a developer's machine, and the shared data is found only through testkit/shared_data.py.

A clone in any folder, with `../shared` beside it, a link to it, or `REFINERY_SHARED_DATA` pointing
elsewhere, must run the same suite. A path such as `/work/shared/data` in a test silently tests
nothing on another machine (tests/curation/test_segment.py skipped its whole module that way), and in
a doc it sends a reader to a folder that is not theirs.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from testkit.shared_data import ENV_VAR, shared_data_dir

ROOT = Path(__file__).resolve().parents[1]
# Roots of developers' machines (Linux, macOS, this workplace's checkouts) at the start of a path: after
# the start of a line, a space, a quote, a bracket, `=`, `:` or `,`. `/proc/1/root/tmp` is no such path
# (`root` is not at a path's start there), and neither are illustrative deployment paths (/opt, /srv).
MACHINE_ROOTS = re.compile(r"""(?:^|(?<=[\s"'`(\[=:,]))/(?:work|home|Users|root)/[^\s"'`)]*""", re.M)
SHARED_LITERALS = ("shared/data", "../shared", "../shared/data")
BINARY = (".png", ".jpg", ".gz", ".ftz", ".bin", ".parquet", ".npy", ".safetensors")


def tracked_text_files() -> list[Path]:
    res = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, timeout=60, check=True)
    names = [n for n in res.stdout.decode().split("\0") if n and not n.endswith(BINARY)]
    return [ROOT / n for n in names if (ROOT / n).is_file()]


def machine_paths(text: str, own: tuple[str, ...]) -> list[str]:
    """The absolute paths of a developer's machine in `text`: under a common machine root, or under this
    checkout's own folder or the folder that holds it (wherever the clone is)."""
    found = MACHINE_ROOTS.findall(text)
    found += [p for p in own if p in text]
    return found


def test_no_tracked_file_names_a_path_of_a_developers_machine():
    own = tuple(str(p) + "/" for p in (ROOT, ROOT.parent) if len(p.parts) > 2)  # not "/" or "/tmp/"
    bad = {}
    for path in tracked_text_files():
        if path == Path(__file__).resolve():  # its own examples below are such paths, on purpose
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        if hits := machine_paths(text, own):
            bad[str(path.relative_to(ROOT))] = sorted(set(hits))[:3]
    assert not bad, (
        f"absolute paths of one machine (use ../shared, the data helper or a relative path): {bad}"
    )


def test_the_check_finds_the_paths_it_is_for():
    """The pattern above catches what issue 55 found, and leaves alone what is no machine's path."""
    found = machine_paths(
        'DATA = Path(os.environ.get("X", "/work/shared")) / "data"\n(docs: /home/ana/shared/research/x.md)\n'
        "see `/Users/bo/refinery/out`\ncd /root/refinery",
        own=("/srv/clones/refinery/",),
    )
    assert found == [
        "/work/shared",
        "/home/ana/shared/research/x.md",
        "/Users/bo/refinery/out",
        "/root/refinery",
    ]
    assert machine_paths("/proc/12/root/tmp /opt/refinery/.venv /tmp/x /var/tmp/y", own=()) == []
    assert machine_paths("a clone at /srv/clones/refinery/tests", own=("/srv/clones/refinery/",)) != []


def test_shared_data_is_found_only_through_the_helper():
    """No test, bench or testkit module reads the variable or builds the default folder itself: the helper
    alone knows `../shared/data` and REFINERY_SHARED_DATA, so it alone decides where data is, and a
    missing folder raises there (under CI=true a test then fails instead of skipping)."""
    helper = ROOT / "testkit" / "shared_data.py"
    bad = []
    for folder in ("tests", "bench", "testkit"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path == helper or path == Path(__file__).resolve():
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                # os.environ.get("REFINERY_SHARED...") / os.environ["REFINERY_SHARED..."] / getenv
                value = node.value if isinstance(node, ast.Constant) else None
                if isinstance(value, str) and (
                    value.startswith("REFINERY_SHARED") or value in SHARED_LITERALS
                ):
                    bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    assert not bad, bad


@pytest.mark.parametrize("layout", ["beside", "link", "variable"])
def test_the_helper_finds_the_data_in_each_layout(tmp_path, layout):
    """The three layouts a clone may have, run in a fresh interpreter from a copy of the helper placed in
    a clone-like folder (the helper resolves `../shared` from its own file)."""
    data = shared_data_dir().resolve()
    clone = tmp_path / "clone"
    (clone / "testkit").mkdir(parents=True)
    for name in ("__init__.py", "shared_data.py"):
        (clone / "testkit" / name).write_bytes((ROOT / "testkit" / name).read_bytes())
    env = {k: v for k, v in os.environ.items() if k != ENV_VAR}
    if layout == "beside":
        (tmp_path / "shared").mkdir()
        (tmp_path / "shared" / "data").symlink_to(data)
    elif layout == "link":
        (tmp_path / "shared").symlink_to(data.parent)
    else:
        env[ENV_VAR] = str(data)
    code = "from testkit.shared_data import shared_data_dir as d; print(d().resolve())"
    res = subprocess.run([sys.executable, "-c", code], cwd=clone, env=env, capture_output=True, text=True,
                         timeout=60)  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert Path(res.stdout.strip()) == data


def test_without_the_data_the_helper_says_where_it_looked(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match=r"shared data folder not found at .*nowhere"):
        shared_data_dir()
