"""Token yield of `extract.extractors` modes: trafilatura alone vs [trafilatura, resiliparse] fallback/union.

Each mode runs the same WARC files through `curation.pipeline.process_file` (no Spark), one after
the other in this process, with every other key at its default (and any `--set` overrides, for all
modes alike). Per mode: documents kept, whitespace-separated words and characters of their text
(the yield; the demo's BPE tokenizer is trained later in the flow, so words stand in for tokens),
how many documents each extractor produced, and the ratio to trafilatura alone. The extraction
quality of each mode is bench/curation/extraction_quality.py's `fallback` and `union` rows.

    PYTHONPATH=$PWD python bench/curation/extractor_yield.py [--input FILES...] [--set section.key=value ...]

Default input: every file of the shared WARC folder (quirks and WET fragments included).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from curation.config import ExtractJobConfig  # noqa: E402
from curation.inputs import resolve_inputs  # noqa: E402
from testkit.kept_sets import all_warcs, kept_run  # noqa: E402
from testkit.shared_data import shared_data_dir  # noqa: E402

MODES = {
    "trafilatura": [],
    "fallback": ["extract.extractors=[trafilatura,resiliparse]", "extract.mode=fallback"],
    "union": ["extract.extractors=[trafilatura,resiliparse]", "extract.mode=union"],
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--input", nargs="+", help="WARC files, folders or globs (default: the shared WARCs)")
    ap.add_argument("--set", dest="sets", action="append", default=[], help="section.key=value, every mode")
    args = ap.parse_args(argv)
    files = resolve_inputs(args.input) if args.input else all_warcs(shared_data_dir() / "warc")
    rows = {}
    for mode, sets in MODES.items():
        t0 = time.perf_counter()
        run = kept_run(files, ExtractJobConfig.load(None, [*args.sets, *sets]))
        by = Counter(str(e) for e in run.extractors.values())  # None: a WET record, no extractor ran
        rows[mode] = {
            "docs": len(run.texts),
            "words": sum(len(t.split()) for t in run.texts.values()),
            "chars": sum(len(t) for t in run.texts.values()),
            "by_extractor": dict(by),
            "extract_s": round(run.stats.stages["extract"].seconds, 1),
            # A wall-clock limit: on a starved machine it fires on pages it would not otherwise.
            "timeouts": run.stats.stages["extract"].drops.get("extract_timeout", 0),
            "wall_s": round(time.perf_counter() - t0, 1),
            "failed": run.failed,
        }
    base = rows["trafilatura"]
    print(f"{len(files)} files; overrides for every mode: {args.sets or 'none'}")
    print(
        f"{'mode':<12} {'docs':>6} {'words':>9} {'chars':>10} {'words vs traf':>13} {'extract s':>9} {'timeouts':>8} {'wall s':>7}  by extractor"
    )
    for mode, r in rows.items():
        ratio = r["words"] / base["words"] if base["words"] else float("nan")
        r["words_ratio"] = round(ratio, 4)
        print(
            f"{mode:<12} {r['docs']:>6} {r['words']:>9,} {r['chars']:>10,} {ratio:>13.3f} {r['extract_s']:>9.1f} "
            f"{r['timeouts']:>8} {r['wall_s']:>7.1f}  {r['by_extractor'] or '-'}"
        )
    print(json.dumps({"files": len(files), "sets": args.sets, "modes": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
