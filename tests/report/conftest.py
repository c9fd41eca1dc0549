"""The report tests' run folder, made once per session and shared by test_report.py and the browser
tier (test_browse_browser.py): `extract` over two real WARCs, `dedup`, a small quality model and `score`,
all on the shared local Spark session. tests/conftest.py's SHARED_SETUP_GROUPS sends the files that name
`report_run` to one worker, so the Spark jobs run once in a `make test`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from report.__main__ import main as report_main

WARCS = ("crawl-2024-sample-0000.warc.gz", "BL-20140325121225068-00000-32090~opera~8443.warc.gz")


@pytest.fixture(scope="session")
def report_run(spark, tmp_path_factory, warc_dir, data_dir) -> Path:
    from classifiers.config import QualityTrainConfig
    from classifiers.score import run_score
    from classifiers.train import train_quality
    from core.spark import SparkOptions
    from curation.config import ExtractJobConfig
    from curation.job import run_extract
    from dedup.config import DedupJobConfig
    from dedup.job import run_dedup

    run = tmp_path_factory.mktemp("report-run")
    quiet = SparkOptions(spark.sparkContext.master, progress=False)
    res = run_extract(
        [str(warc_dir / w) for w in WARCS], str(run / "extract"), ExtractJobConfig(), spark=quiet
    )
    assert not res.failed
    run_dedup(str(run / "extract"), str(run / "dedup"), DedupJobConfig(), spark=quiet)
    small = QualityTrainConfig.from_dict({"fasttext": {"dim": 16, "bucket": 20_000}})
    train_quality(
        [data_dir / "quality" / "enwiki_sample_articles.jsonl"], [run / "extract"], run / "model", small
    )
    run_score(run / "dedup", run / "scored", run / "model", spark=SparkOptions(spark.sparkContext.master))
    assert report_main(["--demo-dir", str(run)]) == 0
    return run
