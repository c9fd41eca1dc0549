"""`python -m curation.report --demo-dir out/demo`: write report.json, the PNG charts and report.html.

Exit status: 0 written; 2 the folder holds no run (the message names it).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from curation.report.collect import ReportError, collect


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m curation.report", description=__doc__.splitlines()[0])
    ap.add_argument("--demo-dir", required=True, metavar="DIR", help="a run folder (extract/, dedup/, ...)")
    ap.add_argument("--output", default=None, metavar="DIR", help="where to write (default: --demo-dir)")
    args = ap.parse_args(argv)
    try:
        report = collect(args.demo_dir)
    except ReportError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    from curation.report.render import render

    out = Path(args.output or args.demo_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(report, indent=1, sort_keys=False) + "\n")
    page = render(report, out)
    print(f"report: {page}  (numbers: {out / 'report.json'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
