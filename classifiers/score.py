"""Quality scoring as a stage: adds the float32 `quality` column (P(high quality)) to documents.

Two entry points share `score_file`, which knows nothing of Spark (CONVENTIONS 1):
- `python -m classifiers score --input DIR --output DIR --model MODEL_DIR` runs `run_score`: one
  Spark task per input Parquet file (a file is never split), each task streams its file in
  batches of `batch_size` rows through `QualityModel.predict` (one fastText C++ call per batch)
  and writes `docs/<unit>.parquet` with every input column kept, in order, plus `quality`.
- the `extract` job calls `load_model(...).predict_one` per kept document when its config sets
  `quality.model` (curation/pipeline.py), so both paths give the same number for the same text.

The model is loaded once per executor Python process (`classifiers.model.load_model` caches it;
Spark reuses Python workers across tasks). If the input already has a `quality` column (every
`extract` output has one, null unless a model ran there), it is replaced in place: it is this
stage's own column; every other column is kept. Null texts get a null score and are counted.

Output folder (curation/output.py): `_config.json` (model sha256 + settings, fingerprinted; a rerun
with another model into the same folder is refused), `docs/`, `stats/`, `done/` markers written
last, `stats.json`, `_SUCCESS`. Scores are never thresholded here: recipes do that.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import time
import traceback
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from classifiers.data import DataError, expand
from classifiers.model import load_model, read_metadata, sha256_file
from core.output import OutputDir, atomic_write_json
from core.stats import Stats

log = logging.getLogger(__name__)

STAGE = "score"
COLUMN = "quality"
SUBDIRS = ("docs", "stats", "done")
HIST_BINS = 10  # score histogram in the stats (tenths): how a threshold would cut, without applying one


@dataclass(kw_only=True, frozen=True, slots=True)
class ScoreJobConfig:
    model: str
    """The model folder (train-quality output)."""
    model_sha256: str
    """Hash of its model.bin: what the fingerprint names, so retraining in place is detected."""
    batch_size: int = 1024
    """Rows per prediction call and per Parquet read; bounds task memory."""
    compression_level: int = 3
    """zstd level, as `extract` writes."""

    @classmethod
    def for_model(cls, model_dir: str | Path, **kw: Any) -> ScoreJobConfig:
        d = Path(model_dir).resolve()
        return cls(model=str(d), model_sha256=read_metadata(d)["model_sha256"], **kw)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def fingerprint(self) -> str:
        # The path is left out: the same model moved elsewhere gives the same scores.
        d = {k: v for k, v in self.to_dict().items() if k != "model"}
        return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:12]


def unit_for(path: Path, root: Path) -> str:
    """Output unit name: the input's path under the input folder, without `.parquet`."""
    rel = (
        path.resolve().relative_to(root.resolve()) if path.resolve().is_relative_to(root.resolve()) else path
    )
    return str(rel).removesuffix(".parquet").replace("/", "__")


def list_inputs(input_dir: str | Path) -> tuple[Path, list[Path]]:
    """(root, Parquet files): an extract output's docs/, or the .parquet files under a folder."""
    p = Path(input_dir)
    if not p.exists():
        raise DataError(f"no such input folder: {p}")
    files = expand(p)  # DataError if no .parquet
    root = p / "docs" if p.is_dir() and (p / "docs").is_dir() else (p if p.is_dir() else p.parent)
    for f in files:
        try:
            names = pq.read_schema(f).names
        except (pa.ArrowInvalid, OSError) as e:
            raise DataError(f"{f}: not a readable Parquet file ({e})") from None
        if "text" not in names:
            raise DataError(f"{f} has no 'text' column (columns: {', '.join(names) or 'none'})")
    return root, files


def _output_schema(schema: pa.Schema, meta: dict[bytes, bytes]) -> pa.Schema:
    field = pa.field(COLUMN, pa.float32())
    i = schema.get_field_index(COLUMN)
    out = schema.set(i, field) if i >= 0 else schema.append(field)
    return out.with_metadata({**(schema.metadata or {}), **meta})


def score_file(path: str | Path, unit: str, cfg: ScoreJobConfig, out_root: str | Path) -> dict[str, Any]:
    """Score one Parquet file and commit `docs/<unit>.parquet` + stats + marker; never raises.

    status "done", or "failed" with the error (nothing committed; a rerun retries the file).
    """
    out = OutputDir(out_root, SUBDIRS)
    started = time.time()
    stats = Stats()
    st = stats.stage(STAGE)
    tmp = out.tmp_path("docs", unit, ".parquet")
    try:
        model = load_model(cfg.model)
        if model.sha256 != cfg.model_sha256:
            raise RuntimeError(f"model {cfg.model} changed since the job started (sha256 {model.sha256})")
        pf = pq.ParquetFile(path)
        meta = {
            b"refinery_score": json.dumps(
                {
                    "job": "score",
                    "config_fingerprint": cfg.fingerprint(),
                    "model_sha256": cfg.model_sha256,
                    "input": str(path),
                    "unit": unit,
                }
            ).encode()
        }
        schema = _output_schema(pf.schema_arrow, meta)
        qi = schema.get_field_index(COLUMN)
        hist = np.zeros(HIST_BINS, dtype=np.int64)
        rows = 0
        with pq.ParquetWriter(tmp, schema, compression="zstd", compression_level=cfg.compression_level) as w:
            for batch in pf.iter_batches(batch_size=cfg.batch_size):
                with stats.timed(STAGE):
                    texts = batch.column("text").to_pylist()
                    idx = [i for i, t in enumerate(texts) if t is not None]
                    scores = np.zeros(len(texts), dtype=np.float32)
                    scores[idx] = model.predict([texts[i] for i in idx])
                    mask = np.ones(len(texts), dtype=bool)
                    mask[idx] = False
                    q = pa.array(scores, type=pa.float32(), mask=mask)
                    table = pa.Table.from_batches([batch])
                    if COLUMN in table.column_names:
                        table = table.set_column(qi, schema.field(COLUMN), q)
                    else:
                        table = table.append_column(schema.field(COLUMN), q)
                    nbytes = sum(len(t.encode("utf-8", "surrogatepass")) for t in texts if t is not None)
                    st.docs_in += len(texts)
                    st.docs_out += len(texts)
                    st.bytes_in += nbytes
                    st.bytes_out += nbytes
                    stats.counters["quality_null_text"] += len(texts) - len(idx)
                    hist += np.bincount(
                        np.minimum((scores[idx] * HIST_BINS).astype(np.int64), HIST_BINS - 1),
                        minlength=HIST_BINS,
                    )
                w.write_table(table.cast(schema))
                rows += len(texts)
        # A 0-row input gives a 0-row output with the full schema: the unit is still done.
        for b, n in enumerate(hist):
            stats.counters[f"quality_bin_{b / HIST_BINS:.1f}-{(b + 1) / HIST_BINS:.1f}"] += int(n)
        if stats.counters["quality_null_text"]:
            log.warning("%s: %d rows with null text scored null", path, stats.counters["quality_null_text"])
        summary = {
            "input": str(path),
            "unit": unit,
            "config_fingerprint": cfg.fingerprint(),
            "docs_written": rows,
            "started": started,
            "seconds": round(time.time() - started, 3),
            **stats.to_dict(),
        }
        out.commit_unit(unit, {"docs": tmp}, summary)
        return {"unit": unit, "input": str(path), "status": "done", "docs": rows}
    except Exception as e:
        tmp.unlink(missing_ok=True)
        log.error("input %s failed: %s", path, e)
        return {
            "unit": unit,
            "input": str(path),
            "status": "failed",
            "error": f"{type(e).__name__}: {e}",
            "traceback": traceback.format_exc(limit=20),
        }


@dataclass
class ScoreResult:
    output: str
    inputs: int
    skipped: int
    processed: int
    failed: list[dict[str, Any]]
    stats: Stats

    @property
    def ok(self) -> bool:
        return not self.failed


def _task(item: tuple[str, str], cfg: ScoreJobConfig, out_root: str) -> dict[str, Any]:
    path, unit = item
    return score_file(path, unit, cfg, out_root)


def run_score(
    input_dir: str | Path,
    output: str | Path,
    model_dir: str | Path,
    master: str | None = None,
    spark_conf: dict[str, str] | None = None,
    batch_size: int = 1024,
) -> ScoreResult:
    """Score every Parquet file of `input_dir` on Spark; DataError/ModelError/OutputConflict up front."""
    cfg = ScoreJobConfig.for_model(model_dir, batch_size=batch_size)  # ModelError if not a model
    actual = sha256_file(Path(cfg.model) / "model.bin")
    if actual != cfg.model_sha256:
        from classifiers.model import ModelError

        raise ModelError(f"{cfg.model}/model.bin does not match the model_sha256 of its metadata.json")
    root, files = list_inputs(input_dir)
    out = OutputDir(output, SUBDIRS)
    if out.root == Path(input_dir).resolve() or out.root == root.resolve():
        raise DataError("--output must differ from --input: scoring never rewrites its input")
    out.prepare("score", cfg.to_dict(), cfg.fingerprint())
    units = [(str(f), unit_for(f, root)) for f in files]
    todo = [(f, u) for f, u in units if not out.is_done(u)]
    failed: list[dict[str, Any]] = []
    if todo:
        out.set_success(False)
        from core.spark import get_spark

        spark = get_spark(master, "refinery-score", spark_conf)
        rdd = spark.sparkContext.parallelize(todo, numSlices=len(todo))  # one task per file
        results = rdd.map(partial(_task, cfg=cfg, out_root=str(out.root))).collect()
        failed = [r for r in results if r["status"] != "done"]
        for r in failed:
            log.error("FAILED %s: %s\n%s", r["input"], r["error"], r.get("traceback", ""))
    per_file = [s for _, u in units if (s := out.read_stats(u)) is not None and out.is_done(u)]
    merged = Stats.merged(per_file, order=[STAGE])
    atomic_write_json(
        out.root / "stats.json",
        {
            "job": "score",
            "config_fingerprint": cfg.fingerprint(),
            "model_sha256": cfg.model_sha256,
            "inputs": len(units),
            "done": len(per_file),
            "failed": [{"input": r["input"], "error": r["error"]} for r in failed],
            "docs_written": sum(s["docs_written"] for s in per_file),
            **merged.to_dict(),
        },
    )
    out.set_success(len(per_file) == len(units))
    return ScoreResult(str(out.root), len(units), len(units) - len(todo), len(todo), failed, merged)
