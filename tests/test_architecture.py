"""The architecture's promises: a user's filter is a file of theirs, and imports follow the flow.

- The README's "write your own filter" example, copied out of the README as it is, runs on Spark
  from a folder outside the project, and its drops reach the funnel and rejected/ with its reason.
- `lint-imports` passes on the tree, and fails once a backwards import is added (on a copy).
- No package imports another package's private (`_name`) symbol.
- No package but workflows/ starts another package's command as a subprocess (`-m <package>`, a package's
  `__main__.py` or `cli.py` as a script), and nothing but trainer/launch.py builds a DeepSpeed launcher
  command (packages and bench alike): the layers cannot be bypassed by a process.
- bench/ and testkit/ import no test module: what both use (the real-data locator, the S3 and Range
  servers, corpora) lives in testkit/, which no runtime package imports (lint-imports).
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

from testkit.import_cycles import PACKAGES  # the runtime packages, in the order of the flow
from testkit.shared_data import REPO_ROOT

ORCHESTRATOR = "workflows"  # the one package that runs other packages' commands
LAUNCH_BUILDER = "trainer/launch.py"  # the one builder of a DeepSpeed launcher command


def _readme_example() -> tuple[str, str, dict]:
    """(module name, its source, the YAML `filters:` entry) from the README's example blocks."""
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    m = re.search(r"<!-- example: (\w+)\.py[^>]*-->\s*```python\n(.*?)```.*?```yaml\n(.*?)```", readme, re.S)
    assert m, "README lost its 'write your own filter' example"
    return m.group(1), m.group(2), yaml.safe_load(m.group(3))


@pytest.mark.spark
@pytest.mark.inner  # `make quick`'s real Spark job: the extract job on a real WARC, a user's filter in it
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
    # the evidence a user's Drop gives reaches rejected/ as columns (issue 46)
    assert all((r["metric"], r["op"], r["threshold"]) == ("words", "<", min_words) for r in ours)
    assert all(r["value"] == int(r["detail"].split()[0]) < min_words for r in ours)
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


def test_no_import_circle_inside_any_package():
    """No module imports itself round a circle, inside a package as between packages (issue 55: four
    circles, in curation/, its filters and dedup/). The graph is import-linter's (grimp), imports under
    TYPE_CHECKING left out; testkit/import_cycles.py prints any circle found with a way round it."""
    from testkit.import_cycles import circles, import_graph

    assert circles(import_graph()) == []
    # and the search finds what it is for: a circle of three through a fourth module's import
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}) == [["a", "b", "c"]]


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
    for pkg in (*PACKAGES, "testkit"):
        shutil.copytree(REPO_ROOT / pkg, copy / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    # core is the bottom layer: an import of the trainer from it goes against the flow
    with open(copy / "core" / "files.py", "a", encoding="utf-8") as f:
        f.write("\nimport trainer.config  # noqa: E402\n")
    bad = _lint_imports(copy)
    assert bad.returncode != 0
    assert "core.files -> trainer.config" in bad.stdout, bad.stdout[-3000:]


def _strings(node: ast.AST) -> list[str]:
    """The string constants of a list, tuple or call's arguments, in order (others as '')."""
    items = node.elts if isinstance(node, ast.List | ast.Tuple) else [*node.args]
    return [x.value if isinstance(x, ast.Constant) and isinstance(x.value, str) else "" for x in items]


def _is_launcher(node: ast.AST) -> bool:
    """The `deepspeed` script as a command's word (a list item, `bin / "deepspeed"`), or its modules."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.startswith("deepspeed.launcher")
    if isinstance(node, ast.List | ast.Tuple):
        return any(w == "deepspeed" or w.endswith("/deepspeed") for w in _strings(node))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        return isinstance(node.right, ast.Constant) and node.right.value == "deepspeed"
    return False


def _launches(path: Path, pkg: str | None) -> list[str]:
    """`-m <other package>` in a literal command, a package entry point run as a file, the trainer's file,
    and any DeepSpeed launcher built here."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.List | ast.Tuple | ast.Call):
            words = _strings(node)
            for i, w in enumerate(words[:-1]):
                target = words[i + 1].split(".")[0]
                if w == "-m" and target in PACKAGES and target != pkg:
                    found.append(f"{node.lineno}: -m {words[i + 1]}")
        if _is_launcher(node):
            found.append(f"{node.lineno}: builds a DeepSpeed launch")
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            v = node.value
            if re.fullmatch(rf"({'|'.join(PACKAGES)})/(__main__|cli)\.py", v) and v.split("/")[0] != pkg:
                found.append(f"{node.lineno}: runs {v}")
            if v == "trainer/train.py":
                found.append(f"{node.lineno}: starts trainer/train.py as a file")
    return found


def _process_launches(root: Path) -> list[str]:
    """Every launch of _launches outside what may do it: workflows/ runs other packages' commands (the
    DeepSpeed launch aside), trainer/launch.py builds the launch."""
    found = []
    for top in (*PACKAGES, "bench"):
        for path in sorted((root / top).rglob("*.py")) if (root / top).is_dir() else []:
            rel = path.relative_to(root).as_posix()
            if rel == LAUNCH_BUILDER:
                continue
            hits = _launches(path, top if top in PACKAGES else None)
            if top in (ORCHESTRATOR, "bench"):  # may run packages' commands, not build a launcher
                hits = [h for h in hits if "DeepSpeed" in h or "trainer/train.py" in h]
            found += [f"{rel}:{h}" for h in hits]
    return found


def test_only_workflows_start_other_packages_and_one_builder_launches_the_trainer(tmp_path):
    assert _process_launches(REPO_ROOT) == []
    # the check can fail: a package below workflows starting another one, and a second launcher
    copy = tmp_path / "repo"
    for top in (*PACKAGES, "bench"):
        shutil.copytree(REPO_ROOT / top, copy / top, ignore=shutil.ignore_patterns("__pycache__", "gpu"))
    (copy / "mixtures" / "bad.py").write_text(
        "import subprocess, sys\n"
        "subprocess.run([sys.executable, '-m', 'tokens', 'tokenize'])\n"
        "subprocess.run([sys.executable, 'trainer/train.py'])\n"
    )
    (copy / "bench" / "bad.py").write_text("cmd = ['deepspeed', '--num_gpus', '1']\n")
    assert sorted(_process_launches(copy)) == [
        "bench/bad.py:1: builds a DeepSpeed launch",
        "mixtures/bad.py:2: -m tokens",
        "mixtures/bad.py:3: starts trainer/train.py as a file",
    ]


def _test_imports(root: Path) -> list[str]:
    """`import tests...` / `from tests... import` anywhere in bench/ or testkit/, as 'path:line: module'."""
    found = []
    for top in ("bench", "testkit"):
        for path in sorted((root / top).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
                if isinstance(node, ast.ImportFrom) and node.level == 0:
                    names = [node.module or ""]
                for name in names:
                    if name == "tests" or name.startswith("tests."):
                        found.append(f"{path.relative_to(root).as_posix()}:{node.lineno}: {name}")
    return found


def test_bench_and_testkit_import_no_test_module(tmp_path):
    assert _test_imports(REPO_ROOT) == []
    copy = tmp_path / "repo"
    for top in ("bench", "testkit"):
        shutil.copytree(REPO_ROOT / top, copy / top, ignore=shutil.ignore_patterns("__pycache__", "gpu"))
    (copy / "bench" / "dedup" / "bad.py").write_text(
        "def f():\n    from tests.support.demo import run_demo\n"
    )
    assert _test_imports(copy) == ["bench/dedup/bad.py:2: tests.support.demo"]


MAX_FUNCTION_LINES = 80


def _long_functions(root: Path, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """'path:line name (N lines)' of every function or method longer than `limit` lines (its `def` line
    to its last, docstring and nested functions included) in the runtime packages and testkit/."""
    found = []
    for top in (*PACKAGES, "testkit"):
        for path in sorted((root / top).rglob("*.py")) if (root / top).is_dir() else []:
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    n = node.end_lineno - node.lineno + 1
                    if n > limit:
                        found.append(
                            f"{path.relative_to(root).as_posix()}:{node.lineno} {node.name} ({n} lines)"
                        )
    return found


def test_no_function_is_longer_than_80_lines(tmp_path):
    """Issue 55 (one home per concept): a function a newcomer can read whole, outside bench/. A longer
    one is split into helpers, each with one job (curation/cli.py's build_parser: one per command)."""
    long = _long_functions(REPO_ROOT)
    print("\n".join(long))
    assert long == [], f"{len(long)} functions over {MAX_FUNCTION_LINES} lines:\n" + "\n".join(long)
    # the check can fail: a function of 81 lines in a copy
    (tmp_path / "core").mkdir()
    body = "".join(f"    x{i} = {i}\n" for i in range(80))
    (tmp_path / "core" / "long.py").write_text(f"def f():\n{body}\n\ndef g():\n    pass\n")
    assert _long_functions(tmp_path) == ["core/long.py:1 f (81 lines)"]
