"""Quality scoring as a stage: adds the float32 `quality` column (P(high quality)) to documents.

Two entry points share `score_unit`, which knows nothing of Spark (CONVENTIONS 1):
- `python -m classifiers score --input DIR --output DIR --model MODEL_DIR` runs `run_score`, a job
  of core's per-file runner (core.runner.run_per_file): one Spark task per input Parquet file (a
  file is never split), each task streams its file in batches of `batch_size` rows through
  `QualityModel.predict` (one fastText C++ call per batch) and writes `docs/<unit>.parquet` with
  every input column kept, in order, plus `quality`. `score_file` runs one file without Spark.
- the `extract` job calls `load_model(...).predict_one` per kept document when its config sets
  `quality.model` (curation/pipeline.py), so both paths give the same number for the same text.

The model is loaded once per executor Python process (`classifiers.model.load_model` caches it;
Spark reuses Python workers across tasks). If the input already has a `quality` column (every
`extract` output has one, null unless a model ran there), it is replaced in place: it is this
stage's own column; every other column is kept. Null texts get a null score and are counted.

Output folder (core/output.py): `_config.json` (model sha256 + settings, fingerprinted; a rerun
with another model into the same folder is refused), `docs/`, `stats/`, `done/` markers written
last, `stats.json`, `_SUCCESS`. Scores are never thresholded here: recipes do that.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from classifiers.data import DataError, expand
from classifiers.model import ModelError, load_model, read_metadata
from core.config import ConfigModel
from core.errors import ConfigError
from core.files import parquet_schema, sha256_file
from core.output import OutputDir
from core.runner import PerFileJob, RunResult, run_per_file, run_unit
from core.stats import Stats

log = logging.getLogger(__name__)

STAGE = "score"
COLUMN = "quality"
SUBDIRS = ("docs", "stats", "done")
HIST_BINS = 10  # score histogram in the stats (tenths): how a threshold would cut, without applying one


class ScoreJobConfig(ConfigModel):
    """What decides a score output: the model (by hash) and how files are read and written."""

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

    def fingerprint(self) -> str:
        # The path is left out: the same model moved elsewhere gives the same scores. json.dumps'
        # default separators (not core.config.fingerprint_of's): the formula existing score folders
        # and the `refinery_score` metadata of scored files were named with.
        d = {k: v for k, v in self.to_dict().items() if k != "model"}
        return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:12]


def unit_for(path: Path, root: Path) -> str:
    """Output unit name: the input's path under the input folder, without `.parquet`."""
    rel = (
        path.resolve().relative_to(root.resolve()) if path.resolve().is_relative_to(root.resolve()) else path
    )
    return str(rel).removesuffix(".parquet").replace("/", "__")


def list_inputs(input_dir: str | Path) -> tuple[Path, list[Path]]:
    """(root, Parquet files): an extract output's docs/, or the .parquet files under a folder (or one file)."""
    p = Path(input_dir)
    if not p.exists():
        raise DataError(f"no such input folder: {p}")
    files = expand(p)  # core.files.doc_parquet_files; DataError if no .parquet
    root = p / "docs" if p.is_dir() and (p / "docs").is_dir() else (p if p.is_dir() else p.parent)
    for f in files:
        names = parquet_schema(f).names
        if "text" not in names:
            raise DataError(f"{f} has no 'text' column (columns: {', '.join(names) or 'none'})")
    return root, files


def _output_schema(schema: pa.Schema, meta: dict[bytes, bytes]) -> pa.Schema:
    field = pa.field(COLUMN, pa.float32())
    i = schema.get_field_index(COLUMN)
    out = schema.set(i, field) if i >= 0 else schema.append(field)
    return out.with_metadata({**(schema.metadata or {}), **meta})


def score_file(path: str | Path, unit: str, cfg: ScoreJobConfig, out_root: str | Path) -> dict[str, Any]:
    """Score one Parquet file without Spark and commit it; never raises.

    status "done" (with `docs`), or "failed" with the error (nothing committed, temporary files
    removed; a rerun retries the file).
    """
    return run_unit(score_unit, (str(path), unit), cfg, str(out_root))


def score_unit(path: str, unit: str, cfg: ScoreJobConfig, out_root: str) -> dict[str, Any]:
    """The runner's `process`: `docs/<unit>.parquet` + stats + marker for one file; raises on failure."""
    out = OutputDir(out_root, SUBDIRS)
    started = time.time()
    stats = Stats()
    st = stats.stage(STAGE)
    tmp = out.tmp_path("docs", unit, ".parquet")
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
    return {"docs": rows}


def _model_hash(sha256: str, done: list[dict[str, Any]]) -> dict[str, Any]:
    """stats.json records the model that made the scores (PerFileJob.stats_extra)."""
    return {"model_sha256": sha256}


def run_score(
    input_dir: str | Path,
    output: str | Path,
    model_dir: str | Path,
    master: str | None = None,
    spark_conf: dict[str, str] | None = None,
    batch_size: int = 1024,
    progress: bool = True,
) -> RunResult:
    """Score every Parquet file of `input_dir` on Spark; DataError/ModelError/OutputConflict up front."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        # 0 would start Spark and fail every input on its first read
        raise ConfigError(f"--batch-size must be a positive integer, got {batch_size!r}")
    cfg = ScoreJobConfig.for_model(model_dir, batch_size=batch_size)  # ModelError if not a model
    if sha256_file(Path(cfg.model) / "model.bin") != cfg.model_sha256:
        raise ModelError(f"{cfg.model}/model.bin does not match the model_sha256 of its metadata.json")
    root, files = list_inputs(input_dir)
    out_root = OutputDir(output, SUBDIRS).root
    if out_root == Path(input_dir).resolve() or out_root == root.resolve():
        raise DataError("--output must differ from --input: scoring never rewrites its input")
    job = PerFileJob(
        "score",
        cfg.to_dict(),
        cfg.fingerprint(),
        score_unit,
        payload=cfg,
        stage_order=(STAGE,),
        subdirs=SUBDIRS,
        stats_extra=partial(_model_hash, cfg.model_sha256),
    )
    units = [(str(f), unit_for(f, root)) for f in files]
    return run_per_file(job, units, str(out_root), master, spark_conf, progress)
