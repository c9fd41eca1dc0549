"""The `extract` job with `quality.model` set: the pipeline adds pii_counts and quality (no Spark)."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq

from classifiers.model import QualityModel
from core.output import OutputDir
from curation.config import ExtractJobConfig
from curation.pipeline import process_file, stage_order


def test_extract_adds_quality_equal_to_the_scorer(tmp_path, warc_dir, model_dir):
    cfg = ExtractJobConfig.from_dict({"quality": {"model": str(model_dir)}})
    assert stage_order(cfg)[-3:] == ["pii", "quality", "write"]
    assert cfg.fingerprint() != ExtractJobConfig().fingerprint()
    OutputDir(tmp_path).prepare("extract", cfg.to_dict(), cfg.fingerprint())
    res = process_file(str(warc_dir / "crawl-2024-sample-0000.warc.gz"), cfg, str(tmp_path))
    assert res["status"] == "done"
    docs = pq.read_table(tmp_path / "docs" / f"{res['unit']}.parquet")
    texts = docs.column("text").to_pylist()
    assert len(texts) > 0 and docs.column("quality").null_count == 0
    # Scored after scrubbing: the stored text gives the stored score.
    assert np.array_equal(docs.column("quality").to_numpy(), QualityModel(model_dir).predict(texts))
    assert docs.column("pii_counts").null_count == 0
    stats = json.loads((tmp_path / "stats" / f"{res['unit']}.json").read_text())
    q = next(s for s in stats["stages"] if s["stage"] == "quality")
    assert q["docs_in"] == q["docs_out"] == len(texts)  # scores never drop


def test_bad_quality_model_is_a_config_error(tmp_path):
    import pytest

    from curation.config import ConfigError

    with pytest.raises(ConfigError, match=r"quality\.model: .*model\.bin is missing"):
        ExtractJobConfig.from_dict({"quality": {"model": str(tmp_path)}})
