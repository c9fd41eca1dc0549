"""The dedup config: defaults file, validation errors that name the key, overrides, fingerprints."""

from __future__ import annotations

import hashlib
import json

import pytest

from core.errors import ConfigError
from dedup.config import DedupJobConfig
from dedup.minhash import MinHashConfig, optimal_bands
from dedup.stages.base import Stage
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


def test_the_config_and_its_stages_import_in_one_direction_only():
    """dedup/stages/ reads the config; the config never imports the stage package: not at run time,
    not inside a function, not for annotations (grimp with TYPE_CHECKING imports counted, which the
    pyproject contract cannot see), and loading a config, even one naming its own stages, runs no
    stage module until the stage class itself is imported."""
    import subprocess
    import sys

    import grimp

    graph = grimp.build_graph("dedup", "core", exclude_type_checking_imports=False)
    stage_modules = sorted(m for m in graph.modules if m == "dedup.stages" or m.startswith("dedup.stages."))
    assert "dedup.stages.base" in stage_modules
    assert [m for m in stage_modules if graph.find_shortest_chain("dedup.config", m)] == []
    assert graph.find_shortest_chain("dedup.stages.base", "dedup.config") is not None  # the one way
    probe = (
        "import sys\n"
        "from core.errors import ConfigError\n"
        "from dedup.config import DedupJobConfig\n"
        "DedupJobConfig.from_dict({'exact': {'enabled': False}})\n"
        "try:\n"
        "    DedupJobConfig.from_dict({'stages': ['collections:OrderedDict']})\n"
        "except ConfigError as e:\n"
        "    print(e)\n"
        "print(sorted(m for m in sys.modules if m.startswith('dedup.stages')))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    refused, loaded = out.strip().splitlines()
    assert "stages[0]: 'collections:OrderedDict' is not a subclass of dedup.stages.base.Stage" in refused
    assert loaded == "[]"


class Tagging(Stage):
    """A dedup stage of a user's own (an import path in `stages:`)."""

    name = "tagging"

    def __init__(self, tag: str) -> None:
        self.tag = tag

    def run(self, ctx):
        return {}


class NotAStage:
    """Has a name and a run method, but not the `Stage` base: refused on load."""

    name = "not_a_stage"

    def run(self, ctx):
        return {}


def test_a_configs_own_stages_are_checked_against_the_stage_contract_on_load():
    cfg = DedupJobConfig.from_dict({"stages": [{"class": f"{__name__}:Tagging", "tag": "x"}]})
    (stage,) = cfg.user_stages()
    assert isinstance(stage, Tagging) and stage.tag == "x"
    with pytest.raises(ConfigError, match=r"stages\[0\]: .*:NotAStage' is not a subclass of dedup"):
        DedupJobConfig.from_dict({"stages": [f"{__name__}:NotAStage"]})
    with pytest.raises(ConfigError, match=r"stages\[0\]"):  # an argument its constructor lacks
        DedupJobConfig.from_dict({"stages": [{"class": f"{__name__}:Tagging", "colour": "x"}]})
    with pytest.raises(ConfigError, match="a second stage named 'tagging'"):
        DedupJobConfig.from_dict({"stages": [{"class": f"{__name__}:Tagging", "tag": t} for t in "ab"]})
