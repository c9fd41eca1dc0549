"""`python -m report --demo-dir out/demo`: write report.json, the PNG charts and report.html.

Exit status: 0 written; 2 the folder holds no run (the message names it).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from core.cli import guarded
from report.collect import collect
from report.render import render


def _write(args: argparse.Namespace) -> int:
    report = collect(args.demo_dir)  # ReportError (exit 2) before anything is written
    out = Path(args.output or args.demo_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(report, indent=1, sort_keys=False) + "\n")
    page = render(report, out)
    print(f"report: {page}  (numbers: {out / 'report.json'})")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m report", description=__doc__.splitlines()[0])
    ap.add_argument("--demo-dir", required=True, metavar="DIR", help="a run folder (extract/, dedup/, ...)")
    ap.add_argument("--output", default=None, metavar="DIR", help="where to write (default: --demo-dir)")
    args = ap.parse_args(argv)
    return guarded(lambda: _write(args))


if __name__ == "__main__":
    sys.exit(main())
