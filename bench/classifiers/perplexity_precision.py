"""How far the perplexity scorer's faster settings move the scores, on real pages of the shared WARCs.

    python -m bench.classifiers.perplexity_precision --model out/lm/model [--extract DIR] [--compile]

Pages: every response record of the shared WARCs `pages-aeb-181.warc.gz` and
`pages-trafilatura-eval-part{0..3}.warc.gz` (1,171 real news, blog and other pages) through the
`extract` stage without Spark (`curation.pipeline.process_file`, default config but `filters.mode:
annotate`, so the pages FineWeb's filters would drop are scored too: the tails are where thresholds
cut). English pages (langid) are the measured set; all pages, every language scored with the English
model, are a second row, wider in perplexity (a German page scores in the thousands). `--extract DIR`
keeps the extracted pages there and reuses them (default: a temporary folder, ~2 min to extract).

Settings compared with the scorer's fp32 reference (`head_precision=fp32`, eager program, one thread):
`head_precision=bf16` (the default), `max_tokens=256` (half the window: not the same measure, a
page's first 256 tokens instead of 512, shown for how differently it ranks and selects pages) and,
with `--compile`, the compiled program. Per setting: Spearman
rank correlation of the documents' perplexity with the reference, largest/median/mean relative
difference of perplexity and of bits per byte, and what it changes in a recipe: the demo recipe's
perplexity band (mixtures/demo.yaml, source web_hq, `select.perplexity`, applied by core.selectors as
the mixer applies it) — documents that change side of it, and the relative distance of the document
nearest to either threshold (a document flips only if its score moves further than that).
The last line is one JSON object with the rows.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import yaml
from scipy.stats import spearmanr

from bench.harness import table
from classifiers.perplexity import PerplexityScorer
from core.selectors import parse_selectors, selection_mask
from testkit.shared_data import REPO_ROOT, shared_data_dir

WARCS = ("pages-aeb-181.warc.gz", *(f"pages-trafilatura-eval-part{i}.warc.gz" for i in range(4)))


def extracted_pages(root: Path) -> pa.Table:
    """(text, lang) of every page the extract stage keeps or annotates, extracting into root once."""
    from core.output import OutputDir
    from curation.config import ExtractJobConfig
    from curation.pipeline import process_file

    docs = root / "docs"
    if not (docs.is_dir() and len(list(docs.glob("*.parquet"))) == len(WARCS)):
        cfg = ExtractJobConfig.from_dict({"filters": {"mode": "annotate"}})
        OutputDir(root).prepare("extract", cfg.to_dict(), cfg.fingerprint())
        for name in WARCS:
            res = process_file(str(shared_data_dir() / "warc" / name), cfg, str(root))
            if res["status"] != "done":
                raise SystemExit(f"extract failed on {name}: {res}")
    return pq.read_table(sorted(docs.glob("*.parquet")), columns=["text", "lang"])


def demo_band() -> str:
    recipe = yaml.safe_load((REPO_ROOT / "mixtures" / "demo.yaml").read_text())
    return recipe["sources"]["web_hq"]["select"]["perplexity"]


def thresholds(band: str) -> list[float]:
    return [float(part.strip().lstrip("<>=! ")) for part in band.split(" and ")]


def compare(ref: dict[str, np.ndarray], out: dict[str, np.ndarray], band: str) -> dict:
    ok = np.isfinite(ref["perplexity"]) & np.isfinite(out["perplexity"])
    if not np.array_equal(np.isfinite(ref["perplexity"]), np.isfinite(out["perplexity"])):
        raise SystemExit("a setting changed which documents get a score")
    r, o = ref["perplexity"][ok], out["perplexity"][ok]
    rel = np.abs(o / r - 1)
    rel_bpb = np.abs(out["perplexity_bpb"][ok] / ref["perplexity_bpb"][ok] - 1)
    sel = parse_selectors({"perplexity": band})
    side_ref = np.asarray(selection_mask(pa.table({"perplexity": r}), sel)[0])
    side_out = np.asarray(selection_mask(pa.table({"perplexity": o}), sel)[0])
    margin = min(float(np.min(np.abs(r / t - 1))) for t in thresholds(band))
    return {
        "documents": int(ok.sum()),
        "spearman": float(spearmanr(r, o)[0]),
        "max_rel_diff": float(rel.max()),
        "median_rel_diff": float(np.median(rel)),
        "mean_signed_rel_diff": float(np.mean(o / r - 1)),
        "max_rel_diff_bpb": float(rel_bpb.max()),
        "in_band_ref": int(side_ref.sum()),
        "changed_side": int((side_ref != side_out).sum()),
        "nearest_to_threshold_rel": margin,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=REPO_ROOT / "out" / "lm" / "model")
    ap.add_argument("--extract", type=Path, default=None, help="folder to keep/reuse the extracted pages")
    ap.add_argument("--compile", action="store_true", help="also compare the compiled program")
    args = ap.parse_args()
    if not (args.model / "lm.pt2").is_file():
        raise SystemExit(
            f"no LM at {args.model}: make one with `python -m classifiers train-lm --output out/lm`"
        )
    with tempfile.TemporaryDirectory() as tmp:
        pages = extracted_pages(args.extract or Path(tmp))
    texts, langs = pages.column("text").to_pylist(), pages.column("lang").to_pylist()
    sets = {
        "English pages": [(t, "en") for t, lang in zip(texts, langs) if lang == "en"],
        "all pages, scored as English": [(t, "en") for t in texts],
    }
    settings = {
        "head_precision=bf16": {"head_precision": "bf16"},
        # not a precision setting but the cheaper window: how the first 256 tokens rank pages
        "max_tokens=256 (bf16 head)": {"head_precision": "bf16", "max_tokens": 256},
    }
    if args.compile:
        settings["compiled program, fp32 head"] = {"head_precision": "fp32", "compile": True}
        settings["compiled program, bf16 head"] = {"head_precision": "bf16", "compile": True}
    band = demo_band()
    ref_scorer = PerplexityScorer.load(str(args.model), {"head_precision": "fp32"})
    scorers = {k: PerplexityScorer.load(str(args.model), o) for k, o in settings.items()}
    rows = []
    for set_name, pairs in sets.items():
        docs = [t for t, _ in pairs]
        ref = ref_scorer.score(docs, ["en"] * len(docs))
        for name, sc in scorers.items():
            rows.append(
                {"pages": set_name, "setting": name, **compare(ref, sc.score(docs, ["en"] * len(docs)), band)}
            )
    print(f"{len(texts)} pages extracted from {len(WARCS)} shared WARCs ({sum(x == 'en' for x in langs)} "
          f"English); model {args.model}; demo band (web_hq) perplexity {band!r}; load average "
          f"{os.getloadavg()[0]:.1f}")  # fmt: skip
    cols = [("pages", "pages", "{}"), ("setting", "setting vs fp32", "{}"), ("documents", "docs", "{}"),
            ("spearman", "Spearman", "{:.7f}"), ("max_rel_diff", "max rel", "{:.1e}"),
            ("median_rel_diff", "median rel", "{:.1e}"), ("mean_signed_rel_diff", "mean signed", "{:+.1e}"),
            ("max_rel_diff_bpb", "max rel bpb", "{:.1e}"), ("in_band_ref", "in band (fp32)", "{}"),
            ("changed_side", "changed side", "{}"), ("nearest_to_threshold_rel", "nearest to a threshold", "{:.1e}")]  # fmt: skip
    cells = [[fmt.format(r[k]) for k, _, fmt in cols] for r in rows]
    print(table([h for _, h, _ in cols], cells, left=2))
    print(json.dumps({"bench": "perplexity_precision", "band": band, "rows": rows}))


if __name__ == "__main__":
    main()
