"""Compare two `make demo` output folders: does a change that should not touch the data leave it untouched?

    make demo DEMO_OUT=/tmp/before        # on the old commit
    make demo DEMO_OUT=/tmp/after         # on the new one
    .venv/bin/python -m workflows compare-runs /tmp/before /tmp/after

Prints one line per output and exits 1 if any differs. Compared: the rows and values of every
Parquet dataset (extract docs and rejected sample, dedup docs and decisions, scored docs; sorted,
schema metadata aside), the bytes of each extract Parquet file, every token shard file (.bin,
.idx, .ids), the tokenizer, the funnel and counters of each job's stats.json (seconds aside), and
the per-step training loss. What names the run folder is not compared: Spark's part-file names
(a UUID per write) and the paths recorded in manifests and metadata.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from core.errors import UserError
from core.files import sha256_file

DATASETS = {  # folder -> sort key (rows are compared in this order)
    "extract/docs": ("id",),
    "extract/rejected": ("warc_file", "stage", "reason", "id"),
    "dedup/docs": ("id",),
    "dedup/removed_ids": ("id", "stage", "reason"),
    "scored/docs": ("id",),
}


def _table(folder: Path, sort: tuple[str, ...]) -> pa.Table | None:
    files = sorted(p for p in folder.glob("*.parquet") if not p.name.startswith((".", "_")))
    if not files:
        return None
    t = pa.concat_tables([pq.read_table(f) for f in files])
    return t.replace_schema_metadata(None).sort_by([(c, "ascending") for c in sort])


def _files(folder: Path, pattern: str) -> dict[str, str]:
    return {p.name: sha256_file(p) for p in sorted(folder.glob(pattern))}


def _funnel(path: Path) -> tuple[list, dict]:
    s = json.loads(path.read_text())
    return [{k: v for k, v in st.items() if k != "seconds"} for st in s["stages"]], s.get("counters", {})


def _losses(train: Path) -> list[tuple[int, float]]:
    from trainer.metrics import MetricsLog

    return [(r["step"], r["loss"]) for r in MetricsLog.read(train).steps()]


def compare(a: Path, b: Path) -> list[tuple[str, bool, str]]:
    """(what, identical?, detail) for every output both folders should share."""
    out = []
    for sub, key in DATASETS.items():
        ta, tb = _table(a / sub, key), _table(b / sub, key)
        same = ta is not None and tb is not None and ta.equals(tb)
        out.append((f"{sub} rows", same, f"{ta.num_rows if ta else 0} vs {tb.num_rows if tb else 0} rows"))
    fa, fb = _files(a / "extract/docs", "*.parquet"), _files(b / "extract/docs", "*.parquet")
    out.append(("extract/docs file bytes", fa == fb, f"{len(fa)} files"))
    for src in sorted(p.name for p in (a / "tokens/shards").iterdir() if p.is_dir()):
        sa, sb = _files(a / "tokens/shards" / src, "part-*"), _files(b / "tokens/shards" / src, "part-*")
        out.append((f"shards {src} (.bin/.idx/.ids bytes)", sa == sb, f"{len(sa)} files"))
    ta, tb = a / "tokenizer/tokenizer.json", b / "tokenizer/tokenizer.json"
    out.append(("tokenizer.json", sha256_file(ta) == sha256_file(tb), ""))
    for job in ("extract", "dedup", "scored"):
        same = _funnel(a / job / "stats.json") == _funnel(b / job / "stats.json")
        out.append((f"{job} funnel and counters", same, ""))
    la, lb = _losses(a / "train"), _losses(b / "train")
    out.append(("training loss per step", bool(la) and la == lb, f"{len(la)} vs {len(lb)} steps"))
    return out


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("before", type=Path, help="one `make demo` output folder")
    ap.add_argument("after", type=Path, help="the other")


def run(args: argparse.Namespace) -> int:
    for folder in (args.before, args.after):
        if not folder.is_dir():
            raise UserError(f"{folder}: not a folder (give two `make demo` output folders)")
    rows = compare(args.before, args.after)
    for what, same, detail in rows:
        print(f"{'same   ' if same else 'DIFFERS'}  {what}" + (f"  ({detail})" if detail else ""))
    return 0 if all(same for _, same, _ in rows) else 1
