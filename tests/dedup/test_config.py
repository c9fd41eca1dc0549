"""The dedup config: defaults file, validation errors that name the key, overrides, fingerprints."""

from __future__ import annotations

import hashlib
import json

import pytest

from core.errors import ConfigError
from dedup.config import DedupJobConfig
from dedup.minhash import MinHashConfig, optimal_bands
from testkit.shared_data import REPO_ROOT


def test_shipped_config_lists_the_defaults():
    assert DedupJobConfig.load(REPO_ROOT / "configs" / "dedup.yaml") == DedupJobConfig()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"exact": {"keep": "random"}}, "exact.keep"),
        ({"cluster": {"keep": "all"}}, "cluster.keep"),
        ({"minhash": {"num_perm": "many"}}, "minhash.num_perm"),
        ({"lines": {"max_docs": 0}}, "lines.max_docs"),
        ({"lines": {"max_fraction": 1.5}}, "lines.max_fraction"),
        ({"linez": {}}, "unknown key linez"),
        ({"minhash": {"bands": 10, "rows": 20}}, "exceeds num_perm"),
        ({"url": {"enabled": "yes"}}, "url.enabled"),
    ],
)
def test_errors_name_the_key(data, message):
    with pytest.raises(ConfigError, match=message):
        DedupJobConfig.from_dict(data, source="x.yaml")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"threshold": 1.5}, "minhash.threshold"),
        ({"bands": 4}, "minhash.bands and minhash.rows"),
        ({"verify": "maybe"}, "minhash.verify"),
    ],
)
def test_direct_construction_raises_config_error(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        MinHashConfig(**kwargs)


def test_overrides_on_top_of_the_file():
    cfg = DedupJobConfig.load(
        REPO_ROOT / "configs" / "dedup.yaml",
        ["url.enabled=false", "minhash.threshold=0.7", "lines.max_docs=3"],
    )
    assert not cfg.url.enabled and cfg.minhash.threshold == 0.7 and cfg.lines.max_docs == 3
    assert cfg.exact == DedupJobConfig().exact
    with pytest.raises(ConfigError, match=r"minhash\.threshold"):
        DedupJobConfig.load(None, ["minhash.threshold=2"])


def test_fingerprint_ignores_layout_but_not_content():
    base = DedupJobConfig()
    assert DedupJobConfig.from_dict({"output": {"partitions": 7}}).fingerprint() == base.fingerprint()
    assert DedupJobConfig.from_dict({"lines": {"max_docs": 3}}).fingerprint() != base.fingerprint()
    assert DedupJobConfig.from_dict({"minhash": {"seed": 1}}).fingerprint() != base.fingerprint()


def test_fingerprint_and_folder_name_follow_the_recorded_formula():
    """Output folders record these values: the hash of the config with bands x rows resolved and
    `output` left out, over default-separator JSON, and the MinHash folder name. The expected dict is
    written out here, not taken from the code."""
    cfg = DedupJobConfig.from_dict({"minhash": {"threshold": 0.7, "seed": 3}, "url": {"keep": "first"}})
    bands, rows = optimal_bands(0.7, 128, 0.5, 0.5)
    expected = {
        "exact": {"enabled": True, "keep": "best"},
        "url": {"enabled": True, "keep": "first"},
        "minhash": {
            "ngram": 5,
            "num_perm": 128,
            "threshold": 0.7,
            "bands": bands,
            "rows": rows,
            "lsh_threshold": None,
            "false_positive_weight": 0.5,
            "false_negative_weight": 0.5,
            "seed": 3,
            "hash": "poly64",
            "verify": "none",
        },
        "cluster": {"enabled": True, "keep": "best", "max_iterations": 64},
        "lines": {"enabled": True, "max_docs": 10, "max_fraction": None, "min_words": 50},
    }
    assert cfg.to_dict() == {**expected, "output": {"removed_sample_per_reason": 1000, "partitions": 0}}
    assert cfg.fingerprint() == hashlib.sha256(json.dumps(expected, sort_keys=True).encode()).hexdigest()[:16]
    assert str(cfg.minhash) == f"5ng_128p_{bands}x{rows}_t0.7_s3_poly64_vnone"
    # an integer weight is a float, as a float field always was: the same fingerprint as 1.0
    one = DedupJobConfig.from_dict({"minhash": {"false_positive_weight": 1}})
    assert (
        one.fingerprint()
        == DedupJobConfig.from_dict({"minhash": {"false_positive_weight": 1.0}}).fingerprint()
    )
    assert json.dumps(one.to_dict()["minhash"]["false_positive_weight"]) == "1.0"


def test_the_multilingual_preset_is_fineweb2s_minhash_per_language():
    """configs/dedup-multilingual.yaml: FineWeb-2's 14 x 8 bands over each language's words, one
    index per language; everything else the defaults, and a folder of its own (no rerun of a
    default run's MinHash stage can take its place)."""
    cfg = DedupJobConfig.load(REPO_ROOT / "configs" / "dedup-multilingual.yaml")
    mh = cfg.minhash
    assert mh.band_rows == (14, 8) and mh.words == "language" and mh.per_language
    assert str(mh).endswith("_wlanguage_plang") and str(mh) != str(DedupJobConfig().minhash)
    assert cfg.model_copy(update={"minhash": DedupJobConfig().minhash}) == DedupJobConfig()
    assert cfg.fingerprint() != DedupJobConfig().fingerprint()
