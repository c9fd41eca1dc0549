"""What each selector of a recipe removes from its sources, in documents and in tokens.

    .venv/bin/python scripts/selector_effect.py mixtures/demo.yaml --tokenizer out/demo/tokenizer/tokenizer.json

For every source with a `select`, over the documents its `docs` folder holds, one row per selected
column (a band's two bounds are one row): the documents and tokens that column's condition removes
*alone* (applied to every document), and *last* (removed by it among the documents every other
condition keeps: what dropping that one condition from the recipe would give back). A null in the
column counts as removed, as `tokenize` counts it. Then the whole selection. Tokens are counted with
the run's own tokenizer (no EOD). Prints a table; the last line is JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: make the project importable
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from core.files import doc_parquet_files  # noqa: E402
from core.selectors import selection_mask  # noqa: E402
from mixtures.recipe import Recipe, Source  # noqa: E402
from tokens.tokenizer import build_encoder  # noqa: E402


def source_effect(src: Source, encoder) -> dict:
    columns = list(dict.fromkeys(s.column for s in src.select))
    files = doc_parquet_files(src.docs)
    table = pa.concat_tables(pq.read_table(f, columns=["text", *columns]) for f in files)
    texts = [t or "" for t in table.column("text").to_pylist()]
    tokens = np.array([len(ids) for ids in encoder.encode_batch(texts)], dtype=np.int64)
    alone = {c: selection_mask(table, tuple(s for s in src.select if s.column == c))[0] for c in columns}
    keep = {c: np.asarray(m.to_numpy(zero_copy_only=False), dtype=bool) for c, m in alone.items()}
    everything = np.logical_and.reduce(list(keep.values())) if keep else np.ones(len(texts), bool)
    rows = {}
    for c in columns:
        others = np.logical_and.reduce([keep[o] for o in columns if o != c] + [np.ones(len(texts), bool)])
        last = others & ~keep[c]
        rows[c] = {
            "condition": src.select_spec()[c],
            "docs_alone": int((~keep[c]).sum()),
            "tokens_alone": int(tokens[~keep[c]].sum()),
            "docs_last": int(last.sum()),
            "tokens_last": int(tokens[last].sum()),
        }
    return {
        "docs": len(texts),
        "tokens": int(tokens.sum()),
        "kept_docs": int(everything.sum()),
        "kept_tokens": int(tokens[everything].sum()),
        "columns": rows,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("recipe")
    ap.add_argument("--tokenizer", required=True, help="tokenizer.json the shards were made with")
    args = ap.parse_args(argv)
    recipe = Recipe.load(args.recipe)
    encoder = build_encoder(Path(args.tokenizer).read_text(encoding="utf-8"))
    result = {name: source_effect(src, encoder) for name, src in recipe.sources.items() if src.select}
    print(f"{'source':<10} {'column':<12} {'condition':<22} {'docs alone':>10} {'tokens alone':>13} "
          f"{'docs last':>10} {'tokens last':>12}")  # fmt: skip
    for name, r in result.items():
        for c, row in r["columns"].items():
            print(f"{name:<10} {c:<12} {json.dumps(row['condition']):<22} {row['docs_alone']:>10} "
                  f"{row['tokens_alone']:>13} {row['docs_last']:>10} {row['tokens_last']:>12}")  # fmt: skip
        print(f"{name:<10} {'(all)':<12} {'':<22} {r['docs'] - r['kept_docs']:>10} "
              f"{r['tokens'] - r['kept_tokens']:>13}   of {r['docs']} docs, {r['tokens']} tokens")  # fmt: skip
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    from core.cli import guarded, handle_interrupts

    handle_interrupts()  # Ctrl-C: `interrupted`, exit 130, not a traceback (core/cli.py)
    sys.exit(guarded(main))
