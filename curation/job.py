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
from core.removal import check_removal
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
    result = run_per_file(job, units, output, spark)
    check_extract_removal(result, cfg)
    return result


def check_extract_removal(result: RunResult, cfg: ExtractJobConfig) -> None:
    """Refuse (core/removal.py: RemovedTooMuch, exit 2) a complete run that wrote under 1% of the
    >= 100 documents it read, unless `allow_remove_all`, as tokenize and decontamination do: a
    keep-list or threshold that matches nothing (`langid.languages: [eng_Latm]` before codes were
    checked, a threshold of 1) drops every page with exit 0. The message names the stages and reasons
    that removed most. The folder's _SUCCESS is taken back, so no later job reads it as finished;
    its done units stay, and a rerun with allow_remove_all (not in the fingerprint) publishes them."""
    if result.failed or not result.stats.stages:
        return  # a run with failures says "rerun"; its share is not known yet
    stages = result.stats.stages
    # documents: what `read` passes on (its other records, WARC requests and metadata, are not pages)
    total = stages["read"].docs_out if "read" in stages else next(iter(stages.values())).docs_in
    written = sum(int(u.get("docs_written", 0)) for u in result.units)
    reasons = sorted(
        (
            (n, f"{stage}: {reason}")
            for stage, st in stages.items()
            if stage != "read"
            for reason, n in st.drops.items()
        ),
        reverse=True,
    )
    why = "; ".join(f"{what} {n:,}" for n, what in reasons[:4]) or "the stages' drops"
    try:
        check_removal(
            "extract",
            total - written,
            total,
            f"what dropped them ({why}): langid.languages, langid.threshold(s), the filters",
            "allow_remove_all",
            cfg.allow_remove_all,
            left=f"The documents written are in {result.output}, without _SUCCESS; a rerun with "
            "--set allow_remove_all=true publishes them without redoing any unit.",
        )
    except BaseException:
        OutputDir(result.output).set_success(False)
        raise


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
