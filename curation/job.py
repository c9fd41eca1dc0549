"""The `extract` job: WARC files -> documents, one Spark task per unit (core/runner.py).

The driver resolves the inputs (globs, folders, s3://, https://, Common Crawl listings) and
validates the config before Spark starts, then cuts each large local gzip WARC into byte ranges at
record boundaries (curation/warc/ranges.py, `reader.split_bytes`): a unit is a whole file or one range
of it. The per-file runner guards the output folder with the config's fingerprint, skips units
already done, runs `pipeline.process_unit` once per remaining unit, merges the per-unit stats into
stats.json and writes _SUCCESS when every unit is done. The same code runs on the embedded
`local[*]` master and under `spark-submit --master spark://...` (or YARN/Kubernetes).

The range size is `reader.split_bytes` at most, smaller when the inputs would leave cores idle at
the end (`reader.units_per_core`). The folder records both (`split_bytes`, `unit_bytes`; not in the
fingerprint: the documents do not depend on them), refuses another `split_bytes`, and resumes with its
`unit_bytes` on any number of cores, since ranges of another size would be other units of the same
records. A folder made before ranges existed has no record: its files stay whole units, so it resumes
as it was.
"""

from __future__ import annotations

import logging

from core.output import OutputConflict, OutputDir, check_disjoint, unit_name
from core.runner import RunResult, run_per_file
from core.spark import DEFAULT_SPARK, SparkOptions, planned_cores
from curation.config import ExtractJobConfig
from curation.inputs import resolve_inputs
from curation.pipeline import extract_job, process_unit
from curation.warc.ranges import largest_first, plan_unit_bytes, split_units

log = logging.getLogger(__name__)


def run_extract(
    inputs: list[str],
    output: str,
    cfg: ExtractJobConfig,
    *,
    spark: SparkOptions = DEFAULT_SPARK,
) -> RunResult:
    """Resolve inputs, run the missing files on Spark, merge stats; raises on bad input/output."""
    uris = resolve_inputs(inputs, cfg.cc_base_url)  # InputError before Spark starts
    # --output == an --input folder would list the job's own files as inputs on a rerun. A folder
    # input is listed one level deep, files only: an output folder inside it is never listed.
    check_disjoint(output, inputs, uris, nested=False)
    split, guard = _unit_bytes(uris, output, cfg, spark)
    job = extract_job(cfg, process_unit, guard_extra=guard)
    units = largest_first([unit for uri in uris for unit in split_units(uri, unit_name(uri), split)])
    return run_per_file(job, units, output, spark)


def _unit_bytes(
    uris: list[str], output: str, cfg: ExtractJobConfig, spark: SparkOptions
) -> tuple[int | None, dict | None]:
    """The range size of this run and the folder record that guards it.

    A new folder: planned from the inputs and cores (reader.units_per_core), recorded as `unit_bytes`
    beside the configured `split_bytes`. An existing one resumes with the size it recorded, whatever
    this run's cores, so its done units stay the units; one made before `unit_bytes` existed used
    `split_bytes` as it is, and one made before ranges existed keeps whole files."""
    record = _record(output)
    split = cfg.reader.split_bytes
    if record is not None and "split_bytes" not in record:
        if split is not None:
            log.warning("%s was made before WARCs were split into ranges: its files stay whole units", output)
        return None, None
    if record is not None and "unit_bytes" not in record:
        return split, {"split_bytes": split}
    if record is not None and record.get("split_bytes") == split:
        unit = record["unit_bytes"]  # another split_bytes is refused by the guard, as before
    else:
        r = cfg.reader
        unit = plan_unit_bytes(uris, split, planned_cores(spark), r.units_per_core, r.min_split_bytes)
    return unit, {"split_bytes": split, "unit_bytes": unit}


def _record(output: str) -> dict | None:
    """The `_config.json` of an existing extract folder (local or remote), else None."""
    try:
        record = OutputDir(output).read_json("_config.json")
    except (OSError, ValueError, OutputConflict):  # unreadable or damaged: the runner's guard says so
        return None
    return record if isinstance(record, dict) and record.get("job") == "extract" else None
