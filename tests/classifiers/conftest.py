"""Fixtures of the classifier tests: real negatives made by `extract`, one small trained model.

Negatives are the kept documents of three real WARCs run through `curation.pipeline.process_file`
(no Spark, ~5 s): the 2024 crawl samples and the British Library capture, 40 English documents
that passed FineWeb's filters. Positives are the shared Wikipedia articles and ABC news (lee).
The model is trained once per session with a small fastText (dim 16, 20k buckets: about 1 MB,
under a second) so the whole tier stays fast on 2 cores; the full-size measurement is
bench/classifiers/quality_classifier.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from classifiers.config import QualityTrainConfig
from core.output import OutputDir
from curation.config import ExtractJobConfig
from curation.pipeline import process_file

NEGATIVE_WARCS = (
    "crawl-2024-sample-0000.warc.gz",
    "crawl-2024-sample-0001.warc.gz",
    "BL-20140325121225068-00000-32090~opera~8443.warc.gz",
)

SMALL = {"fasttext": {"dim": 16, "bucket": 20_000}}


def small_config(**kw) -> QualityTrainConfig:
    return QualityTrainConfig.from_dict({**SMALL, **kw})


@pytest.fixture(scope="session")
def extract_out(tmp_path_factory, warc_dir: Path) -> Path:
    """An `extract` output folder (default config: PII on, no quality model) from real WARCs."""
    root = tmp_path_factory.mktemp("extract")
    cfg = ExtractJobConfig()
    OutputDir(root).prepare("extract", cfg.to_dict(), cfg.fingerprint())
    for name in NEGATIVE_WARCS:
        res = process_file(str(warc_dir / name), cfg, str(root))
        assert res["status"] == "done", res
    return root


@pytest.fixture(scope="session")
def positives(data_dir: Path) -> list[Path]:
    q = data_dir / "quality"
    return [q / "enwiki_sample_articles.jsonl", q / "lee_background.cor"]


@pytest.fixture(scope="session")
def labelled(data_dir: Path) -> Path:
    return data_dir / "quality" / "dclm_human_labels_dev.jsonl"


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory, positives, extract_out) -> Path:
    from classifiers.train import train_quality

    out = tmp_path_factory.mktemp("models") / "small"
    train_quality(positives, [extract_out], out, small_config())
    return out
