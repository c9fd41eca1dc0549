"""The `extract` job: WARC files -> documents, one Spark task per input file (core/runner.py).

The driver resolves the inputs (globs, folders, s3://, https://, Common Crawl listings) and
validates the config before Spark starts; the per-file runner guards the output folder with the
config's fingerprint, skips files already done, runs `pipeline.process_unit` once per remaining
file (a WARC is never split across tasks), merges the per-file stats into stats.json and writes
_SUCCESS when every input is done. The same code runs on the embedded `local[*]` master and under
`spark-submit --master spark://...` (or YARN/Kubernetes).
"""

from __future__ import annotations

import logging
from typing import Any

from core.output import unit_name
from core.runner import PerFileJob, RunResult, run_per_file
from curation.config import ExtractJobConfig
from curation.inputs import resolve_inputs
from curation.pipeline import process_unit, stage_order

log = logging.getLogger(__name__)


def _files_table(done: list[dict[str, Any]]) -> dict[str, Any]:
    return {"files": {s["unit"]: {"input": s["input"], "docs": s["docs_written"]} for s in done}}


def run_extract(
    inputs: list[str],
    output: str,
    cfg: ExtractJobConfig,
    master: str | None = None,
    spark_conf: dict[str, str] | None = None,
    progress: bool = True,
) -> RunResult:
    """Resolve inputs, run the missing files on Spark, merge stats; raises on bad input/output."""
    uris = resolve_inputs(inputs, cfg.cc_base_url)  # InputError before Spark starts
    job = PerFileJob(
        name="extract",
        config=cfg.to_dict(),
        fingerprint=cfg.fingerprint(),
        process=process_unit,
        payload=cfg,
        stage_order=tuple(stage_order(cfg)),
        stats_extra=_files_table,
    )
    units = [(uri, unit_name(uri)) for uri in uris]
    return run_per_file(job, units, output, master=master, spark_conf=spark_conf, progress=progress)
