"""The architecture's promises: a user's filter is a file of theirs, and imports follow the flow.

- The README's "write your own filter" example, copied out of the README as it is, runs on Spark
  from a folder outside the project, and its drops reach the funnel and rejected/ with its reason.
- `lint-imports` passes on the tree, and fails once a backwards import is added (on a copy).
- No package imports another package's private (`_name`) symbol.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from tests.support.shared_data import REPO_ROOT

PACKAGES = ("core", "curation", "dedup", "classifiers", "tokens", "mixtures", "trainer", "report")


def _readme_example() -> tuple[str, str, dict]:
    """(module name, its source, the YAML `filters:` entry) from the README's example blocks."""
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    m = re.search(r"<!-- example: (\w+)\.py[^>]*-->\s*```python\n(.*?)```.*?```yaml\n(.*?)```", readme, re.S)
    assert m, "README lost its 'write your own filter' example"
    return m.group(1), m.group(2), yaml.safe_load(m.group(3))


@pytest.mark.spark
def test_readme_filter_runs_on_spark_with_its_reason_in_funnel_and_rejected(tmp_path, warc_dir):
    module, source, cfg = _readme_example()
    user_dir = tmp_path / "user_code"  # outside the project: importable only through PYTHONPATH
    user_dir.mkdir()
    (user_dir / f"{module}.py").write_text(source, encoding="utf-8")
    ((key, entry),) = cfg["filters"].items()
    min_words = entry["min_words"]
    # PII off: placeholders replace several words with one, so kept texts are exactly what it judged
    cfg = {**cfg, "pii": {"enabled": False}}
    (tmp_path / "extract.yaml").write_text(yaml.safe_dump(cfg), encoding="utf-8")
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(user_dir), str(REPO_ROOT)])}
    cmd = [sys.executable, "-m", "curation", "extract", "--input", str(warc_dir / "pages-aeb-181.warc.gz"),
           "--output", str(out), "--config", str(tmp_path / "extract.yaml"), "--master", "local[2]",
           "--no-progress"]  # fmt: skip
    run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]

    stats = json.loads((out / "stats.json").read_text())
    rows = {s["stage"]: s for s in stats["stages"]}
    names = [s["stage"] for s in stats["stages"]]
    # the user's stage runs after datatrove's four blocks (and is the last one here)
    assert names.index(f"filter:{key}") == names.index("filter:fineweb_quality") + 1
    assert names.index(f"filter:{key}") == names.index("write") - 1
    row = rows[f"filter:{key}"]
    reason = f"{key}:too_few_words"
    dropped = row["drops"].get(reason, 0)
    # the news/blog pages are long and short alike: some fall under the limit, some pass
    assert dropped > 0 and row["docs_out"] > 0
    assert row["docs_in"] == row["docs_out"] + dropped

    rejected = pq.read_table(out / "rejected").to_pylist()
    ours = [r for r in rejected if r["reason"] == reason]
    assert ours and all(r["stage"] == f"filter:{key}" for r in ours)
    assert all(int(r["detail"].split()[0]) < min_words for r in ours)
    docs = pq.read_table(out / "docs").to_pylist()
    assert len(docs) == rows["write"]["docs_out"] and docs
    assert all(len(d["text"].split()) >= min_words for d in docs)


def test_readme_filter_is_checked_when_the_config_loads(tmp_path, monkeypatch):
    """A wrong argument or class fails on load, naming the key, before any Spark work."""
    from core.errors import ConfigError
    from curation.config import ExtractJobConfig

    module, source, cfg = _readme_example()
    (tmp_path / f"{module}.py").write_text(source, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    ((key, entry),) = cfg["filters"].items()
    assert ExtractJobConfig.from_dict(cfg).filters.enabled()[key]["class"] == entry["class"]
    with pytest.raises(
        ConfigError, match=rf"filters\.{key}\.min_wordz is not an argument of {module}\.MinWords"
    ):
        ExtractJobConfig.from_dict({"filters": {key: {**entry, "min_wordz": 3}}})
    with pytest.raises(ConfigError, match=rf"filters\.{key}\.class: cannot import '{module}\.Nope'"):
        ExtractJobConfig.from_dict({"filters": {key: {"class": f"{module}.Nope"}}})
    with pytest.raises(
        ConfigError, match=rf"filters\.{key}\.class: unknown filter 'nope'; registered: .*gopher_quality"
    ):
        ExtractJobConfig.from_dict({"filters": {key: {"class": "nope"}}})


def _private_imports(root: Path) -> list[str]:
    found = []
    for pkg in PACKAGES:
        for path in sorted((root / pkg).rglob("*.py")) if (root / pkg).is_dir() else []:
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    other = node.module.split(".")[0]
                    if other in PACKAGES and other != pkg:
                        found += [f"{path.relative_to(root)}: {node.module}.{a.name}" for a in node.names
                                  if a.name.startswith("_")]  # fmt: skip
    return found


def test_no_package_imports_another_packages_private_names():
    assert _private_imports(REPO_ROOT) == []


def _lint_imports(root: Path) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("lint-imports")
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([str(exe), "--config", str(root / "pyproject.toml")], cwd=root, env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip


def test_lint_imports_passes_and_fails_on_a_backwards_import(tmp_path):
    ok = _lint_imports(REPO_ROOT)
    assert ok.returncode == 0, ok.stdout[-3000:] + ok.stderr[-2000:]

    copy = tmp_path / "repo"
    copy.mkdir()
    shutil.copy(REPO_ROOT / "pyproject.toml", copy)
    for pkg in PACKAGES:
        shutil.copytree(REPO_ROOT / pkg, copy / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    # core is the bottom layer: an import of the trainer from it goes against the flow
    with open(copy / "core" / "files.py", "a", encoding="utf-8") as f:
        f.write("\nimport trainer.config  # noqa: E402\n")
    bad = _lint_imports(copy)
    assert bad.returncode != 0
    assert "core.files -> trainer.config" in bad.stdout, bad.stdout[-3000:]
