"""`python -m report --demo-dir out/demo [--ablation DIR]`: write report.json, the PNG charts, report.html
and, for a run folder, browse.html (report/browse.py: the documents behind the numbers).

`--ablation` adds an ablation folder's table and chart (`python -m workflows ablate`, ablation.json);
given alone, the report is that section only (written to --output, default the ablation folder).

Exit status: 0 written; 2 the folder holds no run (the message names it).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

if __name__ == "__main__":  # before the imports below (seconds): a Ctrl-C then is `interrupted` too
    from core.cli import handle_interrupts

    handle_interrupts()

from core.cli import guarded
from report.browse import write_browse
from report.collect import ReportError, collect, collect_ablation
from report.render import render


def _write(args: argparse.Namespace) -> int:
    if args.demo_dir is None and args.ablation is None:
        raise ReportError("give --demo-dir, --ablation, or both")
    # ReportError (exit 2) before anything is written
    report = collect(args.demo_dir) if args.demo_dir else {"run": str(args.ablation)}
    if args.ablation:
        report["ablation"] = collect_ablation(args.ablation)
    out = Path(args.output or args.demo_dir or args.ablation)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(report, indent=1, sort_keys=False) + "\n")
    page = render(report, out)
    print(f"report: {page}  (numbers: {out / 'report.json'})")
    if args.demo_dir:
        print(
            f"browse: {write_browse(args.demo_dir, out)}  (the documents: drops, duplicates, scores, selectors)"
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m report", description=__doc__.splitlines()[0])
    ap.add_argument("--demo-dir", default=None, metavar="DIR", help="a run folder (extract/, dedup/, ...)")
    ap.add_argument("--ablation", default=None, metavar="DIR", help="an ablation folder (ablation.json)")
    ap.add_argument("--output", default=None, metavar="DIR", help="where to write (default: --demo-dir)")
    args = ap.parse_args(argv)
    return guarded(lambda: _write(args))


if __name__ == "__main__":
    sys.exit(main())
