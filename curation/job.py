"""The `extract` job: WARC files -> documents, one Spark task per unit (core/runner.py).

The driver resolves the inputs (globs, folders, s3://, https://, Common Crawl listings) and
validates the config before Spark starts, then cuts each large local gzip WARC into byte ranges at
record boundaries (curation/warc/ranges.py, `reader.split_bytes`): a unit is a whole file or one range
of it. The per-file runner guards the output folder with the config's fingerprint, skips units
already done, runs `pipeline.process_unit` once per remaining unit, merges the per-unit stats into
stats.json and writes _SUCCESS when every unit is done. The same code runs on the embedded
`local[*]` master and under `spark-submit --master spark://...` (or YARN/Kubernetes).

The folder records `split_bytes` (not in the fingerprint: the documents do not depend on it) and
refuses another value, since ranges of another size would be other units of the same records. A
folder made before ranges existed has no record: its files stay whole units, so it resumes as it was.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from core.output import check_disjoint, unit_name
from core.runner import RunResult, run_per_file
from core.spark import DEFAULT_SPARK, SparkOptions
from curation.config import ExtractJobConfig
from curation.inputs import resolve_inputs
from curation.pipeline import extract_job, process_unit
from curation.warc.ranges import split_units

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
    split = cfg.reader.split_bytes
    legacy = _made_before_ranges(output)
    if legacy and split is not None:
        log.warning("%s was made before WARCs were split into ranges: its files stay whole units", output)
        split = None
    job = extract_job(cfg, process_unit, guard_extra=None if legacy else {"split_bytes": split})
    units = [unit for uri in uris for unit in split_units(uri, unit_name(uri), split)]
    return run_per_file(job, units, output, spark)


def _made_before_ranges(output: str) -> bool:
    """An existing extract folder whose `_config.json` has no `split_bytes` record."""
    if "://" in output:  # remote folders postdate ranges
        return False
    path = Path(output).expanduser() / "_config.json"
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):  # none yet (or not ours: the runner's guard says so)
        return False
    return isinstance(record, dict) and record.get("job") == "extract" and "split_bytes" not in record
