"""Speed of the robots.txt matcher (curation/optout/robots.py) on the 4,231 real files, beside the stdlib's.

Sides: ours (`parse` then `RobotsTxt.check`), Python's `urllib.robotparser` (`RobotFileParser.parse`
then `can_fetch`), and Protego (`Protego.parse`, `can_fetch`) when it is installed (it is not a
dependency; the research's §4.2 lists its two agent-matching deviations). The stdlib and Protego get
cases of RFC 9309 wrong (tests/curation/test_robots.py), so their speed is a reference, not a
competitor with the same answers; the `agree` column says how often each gives our verdict.

Workload: every file of ../shared/data/robots/robots-top-websites.jsonl.gz (the bytes as served, for
ours; the decoded text for the others, which take str). Queries: for each file, 4 agents (GPTBot,
CCBot, Googlebot, ClaudeBot) x up to 10 paths: 4 common ones and up to 6 made from the file's own
Disallow/Allow patterns (wildcards dropped), so most queries meet a rule that could match.

Columns: parse µs/file (mean over the files, best of `--repeats` passes); first query µs (the first
query of each (file, agent): ours compiles that agent's merged, sorted rules then); query µs/URL
(the other queries, warm). Timing: perf_counter, best pass.

Second table: the page-level opt-out scan (curation/optout/page.py) per HTML page of two shared WARCs,
beside an lxml parse of the same page (what extraction spends on a page before any selection).

    .venv/bin/python -m bench.curation.robots [--repeats 3] [--files N]
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from bench.harness import table
from curation.optout.robots import parse
from testkit.shared_data import shared_data_dir

AGENTS = ("GPTBot", "CCBot", "Googlebot", "ClaudeBot")
COMMON = ("/", "/index.html", "/search?q=robots", "/a/b/c/page.php?id=1")
_RULE = re.compile(r"(?im)^\s*(?:dis)?allow\s*:\s*(/[^\s#]*)")


def load(limit: int | None) -> list[tuple[str, bytes, str]]:
    """(host, body bytes, body text) of the real files."""
    path = shared_data_dir() / "robots" / "robots-top-websites.jsonl.gz"
    with gzip.open(path, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    return [(r["host"], r["robots_txt"].encode(r["encoding"]), r["robots_txt"]) for r in rows[:limit]]


def paths_for(text: str) -> list[str]:
    """The common paths plus up to 6 made from the file's own rules (`*`/`$` dropped, a suffix added)."""
    own = []
    for m in _RULE.finditer(text):
        own.append(m[1].replace("*", "x").rstrip("$") + "z")
        if len(own) == 6:
            break
    return [*COMMON, *own]


class Side:
    """One implementation: `build(body, text)` -> parsed object; `ask(obj, url, agent)` -> allowed."""

    def __init__(self, name: str, build: Callable[[bytes, str], Any], ask: Callable[[Any, str, str], bool]):
        self.name, self.build, self.ask = name, build, ask


def sides() -> list[Side]:
    from urllib.robotparser import RobotFileParser

    def stdlib(_: bytes, text: str) -> RobotFileParser:
        rp = RobotFileParser()
        rp.parse(text.splitlines())
        return rp

    out = [
        Side("refinery", lambda body, _: parse(body), lambda r, url, agent: r.check(url, agent).allowed),
        Side("urllib.robotparser", stdlib, lambda rp, url, agent: rp.can_fetch(agent, url)),
    ]
    try:
        from protego import Protego
    except ImportError:
        return out
    out.append(
        Side("protego", lambda _, text: Protego.parse(text), lambda p, url, agent: p.can_fetch(url, agent))
    )
    return out


def measure(side: Side, files: Sequence[tuple[str, bytes, str]], repeats: int) -> dict[str, Any]:
    best_parse = best_first = best_warm = float("inf")
    answers: list[bool] = []
    queries = [[f"https://{host}{p}" for p in paths_for(text)] for host, _, text in files]
    n_first = len(files) * len(AGENTS)
    n_warm = sum(len(q) - 1 for q in queries) * len(AGENTS)
    for _ in range(repeats):
        t0 = time.perf_counter()
        parsed = [side.build(body, text) for _, body, text in files]
        best_parse = min(best_parse, time.perf_counter() - t0)
        first = warm = 0.0
        answers = []
        for obj, urls in zip(parsed, queries):
            for agent in AGENTS:
                t0 = time.perf_counter()
                answers.append(side.ask(obj, urls[0], agent))
                t1 = time.perf_counter()
                answers.extend(side.ask(obj, url, agent) for url in urls[1:])
                t2 = time.perf_counter()
                first, warm = first + t1 - t0, warm + t2 - t1
        best_first, best_warm = min(best_first, first), min(best_warm, warm)
    return {
        "parse_us_per_file": best_parse / len(files) * 1e6,
        "first_query_us": best_first / n_first * 1e6,
        "query_us_per_url": best_warm / n_warm * 1e6,
        "queries": n_first + n_warm,
        "answers": answers,
    }


def page_scan(
    repeats: int, warcs: Sequence[str] = ("crawl-2024-sample-0000.warc.gz", "pages-aeb-181.warc.gz")
):
    """The opt-out page-signal scan (curation/optout/page.py read_signals) over the HTML pages of shared
    WARCs, beside extraction's own parse of the same pages (trafilatura's lxml tree): µs a page, best pass."""
    from lxml import html as lxml_html

    from curation.config import ReaderConfig
    from curation.optout.page import read_signals
    from curation.warc.records import Page, iter_records

    pages = [
        p
        for w in warcs
        for p in iter_records(str(shared_data_dir() / "warc" / w), ReaderConfig())
        if isinstance(p, Page) and p.payload
    ]

    def best(fn: Callable[[Page], Any]) -> float:
        passes = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            for p in pages:
                fn(p)
            passes.append(time.perf_counter() - t0)
        return min(passes) / len(pages) * 1e6

    scan = best(lambda p: read_signals(p.optout_headers, p.payload))
    parse_tree = best(lambda p: lxml_html.fromstring(p.payload))
    return len(pages), [["page-signal scan", f"{scan:.1f}"], ["lxml parse of the page", f"{parse_tree:.1f}"]]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--repeats", type=int, default=3, help="passes per side; the best is reported")
    ap.add_argument("--files", type=int, default=None, help="only the first N files (default: all 4,231)")
    args = ap.parse_args(argv)
    files = load(args.files)
    results = {s.name: measure(s, files, args.repeats) for s in sides()}
    ours = results["refinery"]["answers"]
    rows = []
    for name, r in results.items():
        agree = sum(a == b for a, b in zip(r["answers"], ours)) / len(ours)
        rows.append(
            [name, f"{r['parse_us_per_file']:.1f}", f"{r['first_query_us']:.2f}", f"{r['query_us_per_url']:.2f}",
             r["queries"], f"{agree:.2%}"]
        )  # fmt: skip
    total_mb = sum(len(b) for _, b, _ in files) / 1e6
    print(f"{len(files)} real robots.txt files, {total_mb:.1f} MB; best of {args.repeats} passes\n")
    print(table(["side", "parse µs/file", "first query µs", "query µs/URL", "queries", "agree"], rows))
    n_pages, scan_rows = page_scan(args.repeats)
    print(f"\n{n_pages} HTML pages of shared WARCs; best of {args.repeats} passes\n")
    print(table(["per page", "µs"], scan_rows))
    summary = {
        name: {k: round(v, 3) for k, v in r.items() if k != "answers" and k != "queries"}
        for name, r in results.items()
    }
    print(json.dumps({"bench": "robots", "files": len(files), "repeats": args.repeats, **summary}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
