"""Scoring as a stage: adds float32 score columns (quality, perplexity, toxicity) to documents.

`python -m classifiers score --input DIR --output DIR --scorer KIND=DIR ... [--set KIND.KEY=VALUE ...]`
(KIND a registry name, quality/perplexity/toxicity, or a Scorer's import path; `--model DIR`,
`--perplexity DIR`, `--toxicity MODEL` are aliases of `--scorer quality=DIR`, ...) runs `run_score`, a job of core's per-file
runner (core.runner.run_per_file): one Spark task per input Parquet file (a file is never split);
each task streams its file in batches of `batch_size` rows through every scorer of the job
(classifiers/scorer.py: the contract; quality.py, perplexity.py, toxicity.py: the kinds) and writes
`docs/<unit>.parquet` with every input column kept, in order, plus the score columns. `score_file`
runs one file without Spark. The `extract` job scores quality inline instead when its config sets
`quality.model` (curation/pipeline.py), through the same model code, so both give the same number.

Scorers are described (model hashes, options checked) on the driver before Spark starts, and
loaded once per executor Python process (Spark reuses Python workers across tasks). A score column
already in the input (every `extract` output has a `quality` column, null unless a model ran there)
is replaced in place; every other column is kept. Null texts, and documents in a language no model
of a kind covers, get null and are counted (`<column>_null`; `quality_null_text` for quality).
Several models of one kind (per-language perplexity models) fill one set of columns. A scorer that
reads score columns (the quality ensemble, classifiers/ensemble.py) gets them from the input or
from a scorer before it in the job; one found in neither is refused on the driver, by name
(`check_inputs`).

Output folder (core/output.py): `_config.json` (the models' identities + settings, fingerprinted; a
rerun with another model into the same folder is refused), `docs/`, `stats/`, `done/` markers
written last, `stats.json`, `_SUCCESS`. Scores are never thresholded here: recipes do that (dolma's
rule: scorers annotate, recipes select).
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
from pydantic import model_validator

from classifiers.data import DataError, expand
from classifiers.scorer import Scorer, ScorerSpec, load_scorer, make_spec, plan_spec, scorer_class
from core.config import ConfigModel
from core.errors import ConfigError, InputError
from core.files import doc_parquet_uris, open_parquet, parquet_schema
from core.output import OutputDir, check_disjoint
from core.runner import PerFileJob, RunResult, run_per_file, run_unit
from core.spark import DEFAULT_SPARK, SparkOptions, planned_cores
from core.stats import Stats
from core.storage import is_object_store, local_input

log = logging.getLogger(__name__)

STAGE = "score"
COLUMN = "quality"
SUBDIRS = ("docs", "stats", "done")
HIST_BINS = 10  # score histogram in the stats (tenths): how a threshold would cut, without applying one


class ScoreJobConfig(ConfigModel):
    """What decides a score output: the scorers (by their models' identity) and how files are read and written."""

    scorers: list[ScorerSpec]
    """In column order; several of one kind (per-language models) fill one set of columns."""
    batch_size: int = 1024
    """Rows per prediction call and per Parquet read; bounds task memory."""
    compression_level: int = 3
    """zstd level, as `extract` writes."""

    @model_validator(mode="after")
    def _check(self) -> ScoreJobConfig:
        if not self.scorers:
            raise ValueError("no scorer: give --scorer KIND=DIR (or --model, --perplexity, --toxicity)")
        covered: dict[str, set[str]] = {}  # kind -> languages its models score ("*": every language)
        for s in self.scorers:
            langs = set(s.identity.get("languages") or ["*"])
            seen = covered.setdefault(s.kind, set())
            if seen and ("*" in seen or "*" in langs or seen & langs):
                # one set of columns per kind: a second model may only add languages the first lacks
                raise ValueError(f"two {s.kind} models score the same languages ({s.model})")
            seen |= langs
        return self

    @classmethod
    def for_model(
        cls, model_dir: str | Path | None, extra: list[ScorerSpec] = (), **kw: Any
    ) -> ScoreJobConfig:
        """The quality model (if any) first, then the other scorers; models are checked here, before Spark."""
        specs = [make_spec("quality", str(Path(model_dir).resolve()))] if model_dir is not None else []
        return cls(scorers=[*specs, *extra], **kw)

    def fingerprint(self) -> str:
        # Model paths are left out: the same model moved elsewhere gives the same scores. A
        # quality-only job keeps the formula (json.dumps' default separators, these three keys)
        # that existing score folders and the `refinery_score` metadata of scored files were named with.
        d: dict[str, Any] = {"batch_size": self.batch_size, "compression_level": self.compression_level}
        for s in self.scorers:
            if s.kind == "quality":
                d["model_sha256"] = s.identity["model_sha256"]
        others = [{"kind": s.kind, **s.identity} for s in self.scorers if s.kind != "quality"]
        if others:
            d["scorers"] = others
        return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:12]


def unit_for(path: Path | str, root: Path | str) -> str:
    """Output unit name: the input's path under the input folder, without `.parquet`."""
    if is_object_store(path):
        path, root = str(path), str(root)
        rel = path[len(root) + 1 :] if path.startswith(root + "/") else path.rsplit("/", 1)[-1]
        return rel.removesuffix(".parquet").replace("/", "__")
    rel = (
        path.resolve().relative_to(root.resolve()) if path.resolve().is_relative_to(root.resolve()) else path
    )
    return str(rel).removesuffix(".parquet").replace("/", "__")


def list_inputs(input_dir: str | Path) -> tuple[Path | str, list[Path] | list[str]]:
    """(root, Parquet files): an extract output's docs/, or the .parquet files under a folder (or one file).

    On an object store (`s3://...`): URIs, listed by core.files.doc_parquet_uris."""
    if is_object_store(input_dir):
        return _list_remote_inputs(str(input_dir).rstrip("/"))
    p = Path(input_dir)
    if not p.exists():
        raise DataError(f"no such input folder: {p}")
    files = expand(p)  # core.files.doc_parquet_files; DataError if no .parquet
    root = p / "docs" if p.is_dir() and (p / "docs").is_dir() else (p if p.is_dir() else p.parent)
    _check_text_column(files)
    return root, files


def _list_remote_inputs(uri: str) -> tuple[str, list[str]]:
    try:
        files = doc_parquet_uris(uri)
    except InputError as e:
        raise DataError(str(e)) from None
    root = uri if len(files) != 1 or files[0] != uri else uri.rsplit("/", 1)[0]
    if files and files[0].startswith(uri + "/docs/"):
        root = uri + "/docs"
    _check_text_column(files)
    return root, files


def _check_text_column(files: list[Path] | list[str]) -> None:
    """Every input has a string `text` column (and `lang`, if there, is a string too): checked from the
    footers before the output folder is made, instead of failing every unit on its first batch."""
    for f in files:
        schema = parquet_schema(f)
        if "text" not in schema.names:
            raise DataError(f"{f} has no 'text' column (columns: {', '.join(schema.names) or 'none'})")
        for col in ("text", "lang"):
            i = schema.get_field_index(col)
            if col in schema.names and i < 0:
                raise DataError(f"{f} has more than one {col!r} column")
            if i >= 0 and not _stringish(schema.field(i).type):
                raise DataError(f"{f}: column {col!r} is {schema.field(i).type}, not a string column")


def _stringish(t: pa.DataType) -> bool:
    # an all-null column written without a type is `null`: every row scores null, as a null text does
    return (
        pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_null(t)
        or (hasattr(pa.types, "is_string_view") and pa.types.is_string_view(t))
        or (pa.types.is_dictionary(t) and _stringish(t.value_type))  # reads back as plain strings
    )


def _output_schema(schema: pa.Schema, columns: list[str], meta: dict[bytes, bytes]) -> pa.Schema:
    """Input columns kept in order; a score column already there (extract writes a null `quality`)
    is replaced in place, the others are appended."""
    out = schema
    for col in columns:
        field = pa.field(col, pa.float32())
        i = out.get_field_index(col)
        out = out.set(i, field) if i >= 0 else out.append(field)
    return out.with_metadata({**(schema.metadata or {}), **meta})


def _score_batch(
    scorers: list[tuple[str, Scorer]], texts: list, langs: list, batch: pa.RecordBatch | None = None
) -> dict[str, np.ndarray]:
    """Every scorer's columns for one batch; several models of a kind fill each other's NaNs. A
    scorer with `inputs` reads them from the columns written before it, else from `batch`."""
    cols: dict[str, np.ndarray] = {}
    for _, scorer in scorers:
        if scorer.inputs:
            got = {c: cols[c] if c in cols else _float_column(batch, c) for c in scorer.inputs}
            scored = scorer.score(texts, langs, columns=got)
        else:
            scored = scorer.score(texts, langs)
        for col, values in scored.items():
            if len(values) != len(texts):
                raise RuntimeError(
                    f"{scorer.kind} scorer returned {len(values)} values for {len(texts)} texts"
                )
            values = np.asarray(values, dtype=np.float32)
            cols[col] = values if col not in cols else np.where(np.isnan(cols[col]), values, cols[col])
    return cols


def _float_column(batch: pa.RecordBatch | None, name: str) -> np.ndarray:
    """A numeric input column as float64, null as NaN; DataError if the batch lacks it."""
    if batch is None or name not in batch.schema.names:
        raise DataError(f"no column {name!r} in the input, and no scorer before it writes one")
    return batch.column(name).cast(pa.float64()).to_numpy(zero_copy_only=False)


def _numeric_columns(path: Path | str) -> set[str]:
    t = pa.types
    return {
        f.name
        for f in parquet_schema(path)
        if t.is_integer(f.type) or t.is_floating(f.type) or t.is_null(f.type)  # null: all NaN
    }


def check_inputs(specs: list[ScorerSpec], files: list[Path] | list[str]) -> None:
    """The columns each scorer reads (`inputs` of its identity) are in every input file or written
    by a scorer before it: ConfigError naming the missing ones, on the driver, before Spark.

    The columns of the scorers before it are known only once they are loaded: they are loaded here
    (once per process) only when some input file lacks a needed column."""
    needed = {c for s in specs for c in s.identity.get("inputs", ())}
    if not needed:
        return
    in_every = set.intersection(*(_numeric_columns(f) for f in files)) if files else set()
    for i, spec in enumerate(specs):
        lacking = [c for c in spec.identity.get("inputs", ()) if c not in in_every]
        written = {c for s in specs[:i] for c in load_scorer(s).columns} if lacking else set()
        missing = [c for c in lacking if c not in written]
        if missing:
            raise ConfigError(
                f"{spec.kind} model {spec.model} reads the column(s) {', '.join(missing)}: not numeric "
                "columns of every input file, and no scorer before it writes them (e.g. --scorer perplexity=LM_DIR "
                "for perplexity_bpb, --scorer quality=DIR for quality, given before it)"
            )


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
    stats.stage(STAGE)
    tmp = out.tmp_path("docs", unit, ".parquet")
    scorers = [(spec.kind, load_scorer(spec)) for spec in cfg.scorers]
    _check_unchanged(cfg)
    columns = list(dict.fromkeys(c for _, sc in scorers for c in sc.columns))
    with local_input(path) as local:  # an object-store input is downloaded for the task
        rows = _score_to(local, path, unit, cfg, scorers, columns, tmp, stats)
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


def _score_to(local, path, unit, cfg, scorers, columns, tmp, stats: Stats) -> int:
    """Score the Parquet file `local` (named `path` in outputs) into `tmp`; returns its rows."""
    st = stats.stage(STAGE)
    pf = pq.ParquetFile(local)
    meta = {
        b"refinery_score": json.dumps(
            {
                "job": "score",
                "config_fingerprint": cfg.fingerprint(),
                **({"model_sha256": m} if (m := _quality_sha(cfg)) else {}),
                "scorers": [{"kind": s.kind, **s.identity} for s in cfg.scorers],
                "input": str(path),
                "unit": unit,
            }
        ).encode()
    }
    schema = _output_schema(pf.schema_arrow, columns, meta)
    has_lang = "lang" in pf.schema_arrow.names
    hist = np.zeros(HIST_BINS, dtype=np.int64)
    rows = 0
    with pq.ParquetWriter(tmp, schema, compression="zstd", compression_level=cfg.compression_level) as w:
        for batch in pf.iter_batches(batch_size=cfg.batch_size):
            with stats.timed(STAGE):
                texts = batch.column("text").to_pylist()
                langs = batch.column("lang").to_pylist() if has_lang else [None] * len(texts)
                scores = _score_batch(scorers, texts, langs, batch)
                table = pa.Table.from_batches([batch])
                for col in columns:
                    values = scores[col]
                    arr = pa.array(values, type=pa.float32(), mask=np.isnan(values))
                    i = table.schema.get_field_index(col)
                    field = schema.field(col)
                    table = table.set_column(i, field, arr) if i >= 0 else table.append_column(field, arr)
                    nulls = int(np.isnan(values).sum())
                    # `quality_null_text`: the counter's name from when quality was the only column
                    stats.counters[f"{col}_null_text" if col == COLUMN else f"{col}_null"] += nulls
                nbytes = sum(len(t.encode("utf-8", "surrogatepass")) for t in texts if t is not None)
                st.docs_in += len(texts)
                st.docs_out += len(texts)
                st.bytes_in += nbytes
                st.bytes_out += nbytes
                if COLUMN in scores:
                    q = scores[COLUMN][~np.isnan(scores[COLUMN])]
                    hist += np.bincount(
                        np.minimum((q * HIST_BINS).astype(np.int64), HIST_BINS - 1), minlength=HIST_BINS
                    )
            w.write_table(table.cast(schema))
            rows += len(texts)
    # A 0-row input gives a 0-row output with the full schema: the unit is still done.
    if COLUMN in columns:
        for b, n in enumerate(hist):
            stats.counters[f"quality_bin_{b / HIST_BINS:.1f}-{(b + 1) / HIST_BINS:.1f}"] += int(n)
    for key, n in stats.counters.items():
        if n and (key.endswith("_null") or key.endswith("_null_text")):
            log.info("%s: %d rows scored null (%s)", path, n, key)
    return rows


def _quality_sha(cfg: ScoreJobConfig) -> str | None:
    return next((s.identity["model_sha256"] for s in cfg.scorers if s.kind == "quality"), None)


def _check_unchanged(cfg: ScoreJobConfig) -> None:
    """A model replaced in its folder while the job runs would mix two models in one output."""
    for spec in cfg.scorers:
        now = scorer_class(spec.kind).describe(spec.model, spec.options)
        if now != spec.identity:
            raise RuntimeError(f"{spec.kind} model {spec.model} changed since the job started")


def _model_hashes(cfg: ScoreJobConfig, done: list[dict[str, Any]]) -> dict[str, Any]:
    """stats.json records the models that made the scores (PerFileJob.stats_extra)."""
    extra: dict[str, Any] = {"scorers": [{"kind": s.kind, **s.identity} for s in cfg.scorers]}
    if sha := _quality_sha(cfg):
        extra["model_sha256"] = sha
    return extra


ROWS_SAMPLE_FILES = 16  # footers read to estimate a job's documents: an estimate is all Scorer.plan needs


def _docs_per_process(files: list[Path] | list[str], spark: SparkOptions) -> int:
    """About how many documents each executor process scores: the inputs' rows over the job's cores.
    Rows from the footers of at most ROWS_SAMPLE_FILES files spread over the list, scaled to all of
    them (thousands of inputs on an object store: as many requests again, for an estimate); where
    the cores are unknown (a cluster master), over the files, a lower bound when cores outnumber files."""
    if not files:
        return 0
    step = max(1, len(files) // ROWS_SAMPLE_FILES)
    sample = files[::step][:ROWS_SAMPLE_FILES]
    rows = 0
    for f in sample:
        with open_parquet(f) as pf:
            rows += pf.metadata.num_rows
    total = rows * len(files) // len(sample)
    return total // max(1, planned_cores(spark) or len(files))


def run_score(
    input_dir: str | Path,
    output: str | Path,
    model_dir: str | Path | None,
    batch_size: int = 1024,
    scorers: list[ScorerSpec] = (),
    *,
    spark: SparkOptions = DEFAULT_SPARK,
) -> RunResult:
    """Score every Parquet file of `input_dir` on Spark with the quality model (`model_dir`) and/or
    `scorers` (classifiers.scorer.make_spec); DataError/ModelError/OutputConflict up front."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        # 0 would start Spark and fail every input on its first read
        raise ConfigError(f"--batch-size must be a positive integer, got {batch_size!r}")
    # models are described (ModelError) and the list checked (ConfigError) here, before Spark
    cfg = ScoreJobConfig.for_model(model_dir, list(scorers), batch_size=batch_size)
    check_disjoint(output, [str(input_dir)])  # before listing: an output inside the input is refused
    root, files = list_inputs(input_dir)
    docs = _docs_per_process(files, spark)  # footers read once for every scorer's plan
    cfg = cfg.replace(scorers=[plan_spec(s, docs) for s in cfg.scorers])
    check_inputs(cfg.scorers, files)
    out_root = OutputDir(output, SUBDIRS).root
    same = (
        {str(input_dir).rstrip("/"), str(root)}
        if is_object_store(input_dir)
        else {Path(input_dir).resolve(), Path(root).resolve()}
    )
    if out_root in same:
        raise DataError("--output must differ from --input: scoring never rewrites its input")
    job = PerFileJob(
        "score",
        cfg.to_dict(),
        cfg.fingerprint(),
        score_unit,
        payload=cfg,
        stage_order=(STAGE,),
        subdirs=SUBDIRS,
        stats_extra=partial(_model_hashes, cfg),
    )
    units = [(str(f), unit_for(f, root)) for f in files]
    return run_per_file(job, units, str(out_root), spark)
