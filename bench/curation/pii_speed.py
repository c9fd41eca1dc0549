"""Worst-case speed of `curation.pii.scrub`: seconds per MB for each PII type and the whole scrubber.

Why: a backtracking regex or costly per-candidate check turns hostile text into a denial of
service of the extract job (issue 17 defect 3: `"::1 " * 250000` took 4.6 s per MB, because every
IP candidate went through `ipaddress.ip_address(...).is_global`). The budget is 1 s per MB for
every type and for the whole scrubber; this script measures it and exits 1 if any cell is over
`--budget`. Tests assert correctness only (they must pass on a loaded machine); speed lives here.

Inputs, each about 1 MB (seconds are divided by the UTF-8 size in MB):
- the adversarial strings of the issue: IPv6-like `::1 `, `::ffff:10.0.0.1 `, `fe80::1 `,
  private IPv4 `10.0.0.1 `, short e-mails `a@b.cc `;
- random bytes decoded as latin-1 and as UTF-8 with replacement (seeded);
- real text: the Wikipedia articles of the shared data (`quality/enwiki_sample_articles.jsonl`),
  scrubbed one article per call as the extract stage does;
- with `--suite`, also every 1 MB input of the linear-time test list of tests/curation/test_pii.py.

Columns: one per PII type (`find_pii` with only that type enabled) and `scrub` (every type,
overlap resolution and replacement). Each cell is the best of `--repeats` runs, in wall-clock
seconds, or with `--clock cpu` in this process's CPU seconds: on a machine shared with other
jobs wall time is inflated by whatever else runs (2x on a loaded 2-core box), CPU time much less.

    python -m bench.curation.pii_speed [--repeats 2] [--budget 1.0] [--suite] [--clock cpu]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable, Sequence

from curation.pii.scrub import PII_TYPES, PiiConfig, find_pii, scrub
from testkit.pii_inputs import ADVERSARIAL, MB, fill
from testkit.shared_data import shared_data_dir

WIKI = "quality/enwiki_sample_articles.jsonl"


def _random_text(encoding: str, seed: int = 17) -> str:
    data = random.Random(seed).randbytes(MB)
    return data.decode(encoding, errors="replace")


def inputs(suite: bool) -> dict[str, list[str]]:
    """Input name -> documents (one string each, except the real articles)."""
    docs: dict[str, list[str]] = {
        "'::1 '": [fill("::1 ")],
        "'::ffff:10.0.0.1 '": [fill("::ffff:10.0.0.1 ")],
        "'fe80::1 '": [fill("fe80::1 ")],
        "'10.0.0.1 '": [fill("10.0.0.1 ")],
        "'a@b.cc '": [fill("a@b.cc ")],
        "random latin-1": [_random_text("latin-1")],
        "random utf-8": [_random_text("utf-8")],
    }
    path = shared_data_dir() / WIKI
    if path.is_file():
        with open(path, encoding="utf-8") as f:
            docs["wikipedia"] = [json.loads(line)["text"] for line in f]
    if suite:
        docs.update({f"test:{name}": [make()] for name, make in ADVERSARIAL.items()})
    return docs


def seconds_per_mb(
    docs: Sequence[str],
    fn: Callable[[str], object],
    repeats: int,
    clock: Callable[[], float] = time.perf_counter,
) -> float:
    n_mb = sum(len(d.encode("utf-8", "surrogatepass")) for d in docs) / MB
    best = float("inf")
    for _ in range(repeats):
        t0 = clock()
        for d in docs:
            fn(d)
        best = min(best, clock() - t0)
    return best / n_mb


def _per_type(pii_type: str) -> Callable[[str], object]:
    config = PiiConfig(enabled=(pii_type,))
    return lambda text: find_pii(text, config)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=2, help="runs per cell; the best one counts")
    parser.add_argument("--budget", type=float, default=1.0, help="seconds per MB; exit 1 above it")
    parser.add_argument("--suite", action="store_true", help="add the test file's adversarial inputs")
    parser.add_argument(
        "--clock", choices=("wall", "cpu"), default="wall", help="wall-clock or this process's CPU time"
    )
    args = parser.parse_args(argv)
    clock = time.perf_counter if args.clock == "wall" else time.process_time

    columns: dict[str, Callable[[str], object]] = {t: _per_type(t) for t in PII_TYPES}
    columns["scrub"] = scrub
    name_width = max(len(n) for n in inputs(args.suite)) if args.suite else 20
    print(f"{args.clock} seconds per MB (best of {args.repeats}); budget {args.budget} s/MB")
    print("input".ljust(name_width) + "".join(c.rjust(8) for c in columns))
    worst: tuple[float, str, str] = (0.0, "", "")
    for name, docs in inputs(args.suite).items():
        cells = []
        for col, fn in columns.items():
            s = seconds_per_mb(docs, fn, args.repeats, clock)
            worst = max(worst, (s, name, col))
            cells.append(f"{s:8.3f}")
        print(name.ljust(name_width) + "".join(cells), flush=True)
    print(f"worst: {worst[0]:.3f} s/MB ({worst[2]} on {worst[1]})")
    summary = {"clock": args.clock, "budget_s_per_mb": args.budget, "worst_s_per_mb": round(worst[0], 3)}
    print(json.dumps({**summary, "worst_input": worst[1], "worst_column": worst[2]}))
    return 0 if worst[0] <= args.budget else 1


if __name__ == "__main__":
    sys.exit(main())
