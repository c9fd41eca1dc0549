"""What each selector of a recipe removes from its sources, in documents and in tokens.

    python -m mixtures selector-effect mixtures/demo.yaml --tokenizer out/demo/tokenizer/tokenizer.json

For every source with a `select`, over the documents its `docs` folder holds, one row per selected
column (a band's two bounds are one row): the documents and tokens that column's condition removes
*alone* (applied to every document), and *last* (removed by it among the documents every other
condition keeps: what dropping that one condition from the recipe would give back). A percentile
(`"top 30%"`) is resolved over the source's documents first, as `tokenize` resolves it
(core.selectors.resolve_percentiles), and the row shows the threshold it resolved to. A null in the
column counts as removed, as `tokenize` counts it. Then the whole selection. Tokens are counted with
the run's own tokenizer (no EOD). Prints a table; the last line is JSON.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from core.files import doc_parquet_files
from core.selectors import resolve_percentiles, selection_mask, selectors_spec
from mixtures.recipe import Recipe, Source
from tokens.tokenizer import build_encoder


def source_effect(name: str, src: Source, encoder) -> dict:
    files = doc_parquet_files(src.docs)
    # percentiles become the plain comparisons tokenize would apply to these documents
    selectors, _ = resolve_percentiles(src.select, [str(f) for f in files], name)
    given, spec = src.select_spec(), selectors_spec(selectors)
    columns = list(dict.fromkeys(s.column for s in selectors))
    table = pa.concat_tables(pq.read_table(f, columns=["text", *columns]) for f in files)
    texts = [t or "" for t in table.column("text").to_pylist()]
    tokens = np.array([len(ids) for ids in encoder.encode_batch(texts)], dtype=np.int64)
    alone = {c: selection_mask(table, tuple(s for s in selectors if s.column == c), name)[0] for c in columns}
    keep = {c: np.asarray(m.to_numpy(zero_copy_only=False), dtype=bool) for c, m in alone.items()}
    everything = np.logical_and.reduce(list(keep.values())) if keep else np.ones(len(texts), bool)
    rows = {}
    for c in columns:
        others = np.logical_and.reduce([keep[o] for o in columns if o != c] + [np.ones(len(texts), bool)])
        last = others & ~keep[c]
        rows[c] = {
            "condition": given[c],
            "resolved": spec[c],
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


def selector_effect(recipe_path: str, tokenizer: str) -> dict:
    """{source: its effect} for every source of the recipe that selects."""
    recipe = Recipe.load(recipe_path)
    encoder = build_encoder(Path(tokenizer).read_text(encoding="utf-8"))
    return {name: source_effect(name, src, encoder) for name, src in recipe.sources.items() if src.select}


def format_effect(result: dict) -> str:
    lines = [f"{'source':<10} {'column':<14} {'condition':<40} {'docs alone':>10} {'tokens alone':>13} "
             f"{'docs last':>10} {'tokens last':>12}"]  # fmt: skip
    for name, r in result.items():
        for c, row in r["columns"].items():
            cond = json.dumps(row["condition"])
            if row["resolved"] != row["condition"]:
                cond += f" -> {json.dumps(row['resolved'])}"
            lines.append(f"{name:<10} {c:<14} {cond:<40} {row['docs_alone']:>10} {row['tokens_alone']:>13} "
                         f"{row['docs_last']:>10} {row['tokens_last']:>12}")  # fmt: skip
        lines.append(f"{name:<10} {'(all)':<14} {'':<40} {r['docs'] - r['kept_docs']:>10} "
                     f"{r['tokens'] - r['kept_tokens']:>13}   of {r['docs']} docs, {r['tokens']} tokens")  # fmt: skip
    return "\n".join(lines)
