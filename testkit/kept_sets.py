"""Run an extract config over WARC files without Spark and compare what two configs keep.

The one kept-set agreement of the project, shared by the cascade's agreement test
(tests/curation/test_cascade.py) and the benches (bench/harness.py `kept_agreement`, which
bench/curation/throughput.py reports for the cascade against the full path): the kept set of a run is
{document id: text} over every input file, and two runs agree on a document when both keep it with the
same text.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq

from core.output import OutputDir
from core.stats import Stats
from curation.config import ExtractJobConfig
from curation.inputs import resolve_inputs
from curation.pipeline import process_file, stage_order


@dataclass
class KeptRun:
    texts: dict[str, str]
    urls: dict[str, str | None]
    stats: Stats
    failed: list[str]
    extractors: dict[str, str | None] = field(default_factory=dict)
    """The `extractor` column, when the config runs more than one extractor."""


def all_warcs(warc_dir: Path) -> list[str]:
    """Every input file of the shared WARC folder, quirks and WET fragments included, as the demo lists them."""
    return resolve_inputs(
        [f"{warc_dir}/*.warc.gz", f"{warc_dir}/quirks/*", f"{warc_dir}/wet-cc-main-2016-50/*"]
    )


def kept_run(files: list[str], cfg: ExtractJobConfig, root: Path | None = None) -> KeptRun:
    """Each file through `process_file`; the kept documents' texts and the merged funnel."""
    root = Path(root or tempfile.mkdtemp(prefix="kept-"))
    out = OutputDir(root)
    out.prepare("extract", cfg.to_dict(), cfg.fingerprint())
    texts: dict[str, str] = {}
    urls: dict[str, str | None] = {}
    extractors: dict[str, str | None] = {}
    per_file, failed = [], []
    for uri in files:
        res = process_file(uri, cfg, str(root))
        if res["status"] != "done":
            failed.append(uri)
            continue
        per_file.append(json.loads((root / "stats" / f"{res['unit']}.json").read_text()))
        path = root / "docs" / f"{res['unit']}.parquet"
        cols = [c for c in ("id", "url", "text", "extractor") if c in pq.read_schema(path).names]
        for row in pq.read_table(path, columns=cols).to_pylist():
            texts[row["id"]] = row["text"]
            urls[row["id"]] = row["url"]
            if "extractor" in row:
                extractors[row["id"]] = row["extractor"]
    return KeptRun(texts, urls, Stats.merged(per_file, stage_order(cfg)), failed, extractors)


@dataclass
class Agreement:
    ratio: float
    """Documents kept by both with the same text, over documents kept by either."""
    only_a: list[str]
    only_b: list[str]
    text_differs: list[str]

    def lines(self, a: KeptRun, b: KeptRun) -> list[str]:
        """One line per disagreement: which side kept it, its id and URL."""
        return [
            *(f"only in A: {i} {a.urls.get(i)}" for i in self.only_a),
            *(f"only in B: {i} {b.urls.get(i)}" for i in self.only_b),
            *(f"text differs: {i} {a.urls.get(i)}" for i in self.text_differs),
        ]


def output_texts(root: Path) -> dict[str, str]:
    """{id: text} of an extract output folder's documents (docs/*.parquet)."""
    rows = (
        r
        for f in sorted((Path(root) / "docs").glob("*.parquet"))
        for r in pq.read_table(f, columns=["id", "text"]).to_pylist()
    )
    return {r["id"]: r["text"] for r in rows}


def agreement(a: KeptRun, b: KeptRun) -> Agreement:
    return texts_agreement(a.texts, b.texts)


def texts_agreement(a: dict[str, str], b: dict[str, str]) -> Agreement:
    """Two kept sets, {id: text} each: ids kept by both with the same text over ids kept by either."""
    ids_a, ids_b = set(a), set(b)
    both = ids_a & ids_b
    differs = sorted(i for i in both if a[i] != b[i])
    union = ids_a | ids_b
    same = len(both) - len(differs)
    return Agreement(
        ratio=same / len(union) if union else 1.0,
        only_a=sorted(ids_a - ids_b),
        only_b=sorted(ids_b - ids_a),
        text_differs=differs,
    )
