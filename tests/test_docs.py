"""The README and docs/ say only what exists: every command they show runs, every link and code path resolves.

- Every `python -m MODULE [SUBCOMMAND]` in a code span or block of README.md or docs/*.md: for a module of
  this project, `python -m MODULE [SUBCOMMAND] --help` exits 0 and prints a usage line (one subprocess per
  module runs all its subcommands, so the suite pays each package's imports once); for another package's
  module (`deepspeed.launcher.runner`, `pytest`), the package is installed. `--module trainer.train` (the
  launcher's argument) names an importable module of ours.
- Every `make TARGET` in a code span or block is a target of the Makefile.
- Every relative Markdown link resolves to a file, and its `#anchor`, when it has one, to a heading of the
  linked page (GitHub's heading ids).
- Every code path the pages name under a project folder (`curation/index/where.py`, `bench/curation/filters.py`,
  `configs/extract.yaml`, `tests/test_extensions.py`) exists, so a moved or renamed file shows up here.

A renamed subcommand, a moved file or a retitled section fails one of these tests, naming the page.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from testkit.shared_data import REPO_ROOT

PAGES = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
PROJECT = ("core", "curation", "dedup", "classifiers", "tokens", "mixtures", "trainer", "report", "workflows")
PATH_ROOTS = (*PROJECT, "bench", "tests", "configs", "scripts", "docs")

_FENCE = re.compile(r"^```.*?^```", re.S | re.M)
_SPAN = re.compile(r"`([^`\n]+)`")
_COMMAND = re.compile(r"\bpython[\d.]* -m ([A-Za-z_][\w.]*)(?:[ \t]+([a-z][\w-]*))?")
_LAUNCHED = re.compile(r"--module ([A-Za-z_][\w.]*)")
_MAKE = re.compile(r"(?:^|[\s;(])make((?:\s+-\w+)*)\s+([a-z][\w-]*)(?![\w=-])")
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_CODE_PATH = re.compile(rf"(?<![\w./<>~-])((?:{'|'.join(PATH_ROOTS)})/[\w./-]*\.(?:py|yaml|md|sh|toml))\b")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$", re.M)

# Run in one subprocess per module: `python -m MODULE [SUB] --help` for each SUB, through runpy, as the
# command line runs it. Prints {SUB or "": [exit status, output tail]} as JSON.
_HELP_RUNNER = r"""
import contextlib, io, json, runpy, sys
module, subs = sys.argv[1], sys.argv[2:]
results = {}
for sub in ["", *subs]:
    sys.argv = [module, *([sub] if sub else []), "--help"]
    out = io.StringIO()
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException as e:  # an import error: the command does not exist as written
        code, out = 1, io.StringIO(f"{type(e).__name__}: {e}")
    text = out.getvalue()
    if code == 0 and "usage:" not in text:
        code = 1  # it ran without parsing --help: not a command line
    results[sub] = [code, text[-2000:]]
sys.__stdout__.write(json.dumps(results))
"""


def _code(text: str) -> list[str]:
    """The code blocks and inline code spans of a Markdown page (where commands are written)."""
    blocks = _FENCE.findall(text)
    prose = _FENCE.sub("", text)
    return blocks + _SPAN.findall(prose)


def _pages() -> dict[Path, str]:
    assert (REPO_ROOT / "docs").is_dir(), "docs/ is missing"
    return {p: p.read_text(encoding="utf-8") for p in PAGES}


def _commands() -> dict[str, dict[str, set[str]]]:
    """{module: {subcommand word or "": {pages that show it}}} over every page's code."""
    found: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for page, text in _pages().items():
        for code in _code(text):
            code = code.replace("\\\n", " ")  # a command continued on the next line
            for m in _COMMAND.finditer(code):
                found[m.group(1)][m.group(2) or ""].add(page.name)
            for m in _LAUNCHED.finditer(code):
                found[m.group(1)][""].add(page.name)
    return found


def _is_project(module: str) -> bool:
    return module.split(".")[0] in PROJECT


def _has_subcommands(help_text: str) -> bool:
    """Whether the usage paragraph (up to the first blank line) lists subcommands: `{extract,index}`."""
    usage = help_text[help_text.find("usage:") :].split("\n\n", 1)[0]
    return re.search(r"\{[\w,-]+\}", usage) is not None


def test_pages_show_commands():
    """The extraction below finds what the pages show (a broken regex would pass everything)."""
    cmds = _commands()
    assert {"curation", "dedup", "classifiers", "tokens", "mixtures", "workflows", "trainer.train"} <= set(
        cmds
    )
    assert {"extract", "index"} <= set(cmds["curation"])
    assert {"demo", "train-lm", "ablate", "ablate-demo", "compose", "pick-records"} <= set(cmds["workflows"])


@pytest.mark.parametrize("module", sorted(m for m in _commands() if _is_project(m)))
def test_every_documented_command_has_help(module):
    cmds = _commands()[module]
    words = sorted(w for w in cmds if w)
    run = subprocess.run(
        [sys.executable, "-c", _HELP_RUNNER, module, *words],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    results = json.loads(run.stdout)
    code, usage = results[""]
    assert code == 0, (
        f"`python -m {module} --help` exits {code} (shown in {sorted(cmds[''] or cmds)}):\n{usage}"
    )
    if not _has_subcommands(usage):
        return  # a word after it is an argument (`python -m mixtures plan RECIPE` is not this case)
    for word in words:
        code, out = results[word]
        assert code == 0, (
            f"`python -m {module} {word}` in {sorted(cmds[word])} does not exist (--help exits {code}):\n{out}"
        )


def test_other_packages_commands_are_installed():
    """`python -m deepspeed.launcher.runner`, `python -m pytest`: the package is there (not imported here)."""
    for module, words in _commands().items():
        if not _is_project(module):
            top = module.split(".")[0]
            pages = sorted(set().union(*words.values()))
            assert importlib.util.find_spec(top) is not None, (
                f"`python -m {module}` in {pages}: {top} is not installed"
            )


def test_every_make_target_exists():
    makefile = (REPO_ROOT / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([A-Za-z][\w-]*)\s*:(?!=)", makefile, re.M))
    assert {"demo", "test"} <= targets
    shown = 0
    for page, text in _pages().items():
        for code in _code(text):
            for m in _MAKE.finditer(code):
                shown += 1
                assert m.group(2) in targets, (
                    f"{page.name}: `make {m.group(2)}` is not a target of the Makefile"
                )
    assert shown, "no `make TARGET` found in the pages"


def _slug(heading: str) -> str:
    """GitHub's id of a heading: lower case, markup and punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading: its text
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def _anchors(text: str) -> set[str]:
    ids: set[str] = set()
    for m in _HEADING.finditer(_FENCE.sub("", text)):
        base = _slug(m.group(2))
        slug, n = base, 0
        while slug in ids:  # GitHub numbers repeated headings: x, x-1, x-2
            n += 1
            slug = f"{base}-{n}"
        ids.add(slug)
    return ids


def test_every_relative_link_resolves():
    pages = _pages()
    checked = 0
    for page, text in pages.items():
        for m in _LINK.finditer(_FENCE.sub("", text)):
            target = m.group(1)
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            assert dest.exists(), f"{page.name}: link {target!r} points to a missing file"
            if anchor and dest.suffix == ".md":
                ids = _anchors(dest.read_text(encoding="utf-8"))
                assert anchor in ids, (
                    f"{page.name}: link {target!r}: no heading with id {anchor!r} in {dest.name}"
                )
            checked += 1
    assert checked >= 20, f"only {checked} links found: the README should link every docs page"


def test_every_named_code_path_exists():
    missing = []
    for page, text in _pages().items():
        for m in _CODE_PATH.finditer(text):
            if not (REPO_ROOT / m.group(1)).exists():
                missing.append(f"{page.name}: {m.group(1)}")
    assert not missing, "paths named in the docs that do not exist:\n" + "\n".join(sorted(set(missing)))


def test_readme_links_every_docs_page():
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    for page in PAGES[1:]:
        assert f"(docs/{page.name})" in readme, f"README.md does not link docs/{page.name}"
