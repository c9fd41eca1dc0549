"""Outside JSON is read by core/safe_json.py only: no new bare `json.loads` / `json.load`.

A bare `json.loads` of a file, a reply, a manifest or an environment variable turns hostile text into
a RecursionError, a NaN that compares false with everything, or the last of two duplicate keys
(core/safe_json.py lists what it checks). This scan (the tests/test_architecture.py style: the AST,
not a grep, so a comment or a string never counts and an alias `from json import loads` does) finds
every call of the standard parser in the packages below; each must be in ALLOWED, with why it parses
our own in-memory text. A new call fails here until it uses `loads_checked` / `read_json_file` or is
added to ALLOWED with its reason; an entry no call matches any more fails too, so the list stays true.
"""

from __future__ import annotations

import ast

from testkit.shared_data import REPO_ROOT

PACKAGES = ("core", "dedup", "classifiers", "tokens", "trainer", "report")

# (file, enclosing function) -> why it is not outside data
ALLOWED = {
    ("core/safe_json.py", "loads_checked"): "the checked reader itself",
    ("core/config.py", "apply_overrides"): "a deep copy of our own json.dumps of already-loaded YAML",
    ("classifiers/scorer.py", "_load"): "our own json.dumps of validated options (the cache key)",
    ("classifiers/perplexity.py", "__init__"): "tokenizers' own serialization of a tokenizer it loaded",
    ("classifiers/lm_archive.py", "read_json"): "lm.pt2 members: the archive's own structural checker",
}


def _parser_calls(tree: ast.AST) -> list[tuple[str, int]]:
    """(enclosing function, line) of every call of json.loads / json.load in `tree`, aliases included."""
    names = {"json"}  # `import json as j` adds j
    funcs = set()  # `from json import loads` adds loads
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.asname or a.name for a in node.names if a.name == "json"}
        elif isinstance(node, ast.ImportFrom) and node.module == "json":
            funcs |= {a.asname or a.name for a in node.names if a.name in ("loads", "load")}
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else where
            if isinstance(child, ast.Call):
                f = child.func
                bare = isinstance(f, ast.Name) and f.id in funcs
                attr = (
                    isinstance(f, ast.Attribute)
                    and f.attr in ("loads", "load")
                    and isinstance(f.value, ast.Name)
                    and f.value.id in names
                )
                if bare or attr:
                    found.append((where, child.lineno))
            visit(child, inner)

    visit(tree, "<module>")
    return found


def _scan() -> dict[tuple[str, str], list[int]]:
    calls: dict[tuple[str, str], list[int]] = {}
    for pkg in PACKAGES:
        for path in sorted((REPO_ROOT / pkg).rglob("*.py")):
            rel = path.relative_to(REPO_ROOT).as_posix()
            for where, line in _parser_calls(ast.parse(path.read_text(encoding="utf-8"), rel)):
                calls.setdefault((rel, where), []).append(line)
    return calls


def test_outside_json_is_read_only_by_the_checked_reader():
    calls = _scan()
    bare = {f"{f}:{lines[0]} in {fn}()" for (f, fn), lines in calls.items() if (f, fn) not in ALLOWED}
    assert not bare, (
        "bare json.loads/json.load of what may be outside data: use core.safe_json.loads_checked or "
        f"read_json_file, or add the call to ALLOWED with why it is our own text: {sorted(bare)}"
    )
    stale = set(ALLOWED) - set(calls)
    assert not stale, f"ALLOWED names calls that are gone (remove them): {sorted(stale)}"


def test_the_scan_finds_every_spelling_of_the_parser(tmp_path):
    """The scan itself: plain, aliased module, imported function, nested function; not a string."""
    src = (
        "import json\nimport json as j\nfrom json import loads as L\n"
        "S = 'json.loads(x)'\n"
        "def a(x):\n    return json.loads(x)\n"
        "def b(f):\n    def inner():\n        return j.load(f)\n    return inner\n"
        "class C:\n    def c(self, x):\n        return L(x)\n"
        "def d(x):\n    return x.loads(1)\n"  # another object's loads: not the parser
    )
    assert _parser_calls(ast.parse(src)) == [("a", 6), ("inner", 9), ("c", 13)]


def test_reader_refuses_what_bare_json_loads_accepted(tmp_path):
    """Two of the sites now read by the checked reader, on input bare json.loads took without a word:
    a trainer metrics log keeps its NaN loss (finite=False) but refuses a duplicate key; an evaluation
    set line nested 100,000 deep is refused with its file and line named, not a RecursionError."""
    import pytest

    from core.errors import InputError
    from dedup.config import EvalSetConfig
    from dedup.decontam import SetReport, passages
    from trainer.metrics import MetricsLog

    log = tmp_path / "metrics.jsonl"
    log.write_text('{"step": 1, "loss": NaN}\n')
    (rec,) = MetricsLog.read(log).records
    assert rec["step"] == 1 and rec["loss"] != rec["loss"]  # NaN read back as NaN
    log.write_text('{"step": 1, "step": 2, "loss": 1.0}\n')
    with pytest.raises(InputError, match=r"metrics.jsonl:1: step: the key 'step' is given twice"):
        MetricsLog.read(log)
    deep = tmp_path / "eval.jsonl"
    deep.write_text('{"text": "a real passage of text"}\n' + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(InputError, match=r"eval.jsonl:2: nests deeper than"):
        list(passages(EvalSetConfig(name="e", paths=str(deep)), SetReport("e", [str(deep)])))
