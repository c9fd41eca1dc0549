"""Kept-set agreement of the cheap-first cascade against the full path, per margin, on real WARCs.

The full path (`extract.cascade: off`) and the cascade at each `--margins` value run the same files
through `curation.pipeline.process_file` (no Spark), one after the other in this process. Per margin:
agreement (documents kept by both with the same text / documents kept by either), the pages the
cascade dropped before extraction (`prelid` drops), the pages the extractor still ran on, the
extract+prelid seconds against the full path's extract seconds, and every disagreement (id, URL).
The default margin (curation/config.py CASCADE_MARGIN) is chosen from this table.

    PYTHONPATH=$PWD:/path/to/deps python bench/curation/cascade_agreement.py [--input FILES...] [--margins 0.1 0.2 ...]

Default input: every file of the shared WARC folder (as the demo's extract lists them).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from curation.config import ExtractJobConfig  # noqa: E402
from curation.inputs import resolve_inputs  # noqa: E402
from testkit.kept_sets import agreement, all_warcs, kept_run  # noqa: E402
from testkit.shared_data import shared_data_dir  # noqa: E402


def _seconds(run, *names: str) -> float:
    return sum(run.stats.stages[n].seconds for n in names if n in run.stats.stages)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--input", nargs="+", help="WARC files, folders or globs (default: the shared WARCs)")
    ap.add_argument("--margins", nargs="+", type=float, default=[0.0, 0.1, 0.2, 0.3, 0.4, 0.5])
    ap.add_argument("--show", type=int, default=20, help="disagreements listed per margin")
    args = ap.parse_args(argv)
    files = resolve_inputs(args.input) if args.input else all_warcs(shared_data_dir() / "warc")
    t0 = time.perf_counter()
    full = kept_run(files, ExtractJobConfig.load(None, ["extract.cascade=false"]))
    full_wall = time.perf_counter() - t0
    full_extract = full.stats.stages["extract"]
    print(
        f"{len(files)} files; full path: {len(full.texts)} kept, extractor ran on {full_extract.docs_in} pages, "
        f"extract {full_extract.seconds:.1f} s, wall {full_wall:.1f} s"
    )
    header = (
        f"{'margin':>6} {'agreement':>9} {'only full':>9} {'only casc':>9} {'text diff':>9} "
        f"{'prelid drops':>12} {'extracted':>9} {'prelid+extract s':>16} {'full extract s':>14} {'wall s':>7}"
    )
    print(header)
    rows = []
    for m in args.margins:
        t0 = time.perf_counter()
        casc = kept_run(
            files, ExtractJobConfig.load(None, ["extract.cascade=true", f"extract.cascade_margin={m}"])
        )
        wall = time.perf_counter() - t0
        ag = agreement(full, casc)
        pre = casc.stats.stages["prelid"]
        row = {
            "margin": m,
            "agreement": round(ag.ratio, 5),
            "only_full": len(ag.only_a),
            "only_cascade": len(ag.only_b),
            "text_differs": len(ag.text_differs),
            "prelid_drops": sum(pre.drops.values()),
            "extracted": casc.stats.stages["extract"].docs_in,
            "prelid_extract_s": round(_seconds(casc, "prelid", "extract"), 2),
            "full_extract_s": round(full_extract.seconds, 2),
            "wall_s": round(wall, 1),
        }
        rows.append(row)
        print(
            f"{m:>6.2f} {ag.ratio:>9.4f} {len(ag.only_a):>9} {len(ag.only_b):>9} {len(ag.text_differs):>9} "
            f"{row['prelid_drops']:>12} {row['extracted']:>9} {row['prelid_extract_s']:>16.1f} "
            f"{row['full_extract_s']:>14.1f} {row['wall_s']:>7.1f}"
        )
        for line in ag.lines(full, casc)[: args.show]:
            print("       ", line)
    print(json.dumps({"files": len(files), "full_kept": len(full.texts), "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
