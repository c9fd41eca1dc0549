"""The dedup config: defaults file, validation errors that name the key, fingerprints."""

from __future__ import annotations

import pytest

from curation.config import ConfigError
from dedup.config import DedupJobConfig
from tests.support.shared_data import REPO_ROOT


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
    ],
)
def test_errors_name_the_key(data, message):
    with pytest.raises(ConfigError, match=message):
        DedupJobConfig.from_dict(data, source="x.yaml")


def test_fingerprint_ignores_layout_but_not_content():
    base = DedupJobConfig()
    assert DedupJobConfig.from_dict({"output": {"partitions": 7}}).fingerprint() == base.fingerprint()
    assert DedupJobConfig.from_dict({"lines": {"max_docs": 3}}).fingerprint() != base.fingerprint()
    assert DedupJobConfig.from_dict({"minhash": {"seed": 1}}).fingerprint() != base.fingerprint()
