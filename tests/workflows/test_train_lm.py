"""train-lm's identity: the settings of the config files it names count, not their bytes."""

from __future__ import annotations

from testkit.shared_data import REPO_ROOT
from workflows.train_lm import LMTrainConfig, lm_fingerprint


def test_a_comment_in_the_trainer_config_keeps_the_fingerprint_and_a_value_changes_it(tmp_path):
    reference = tmp_path / "ref.txt"
    reference.write_text("Some reference text.\n")
    original = (REPO_ROOT / "configs" / "train-lm.yaml").read_text()
    assert "seed: 1234\n" in original  # the edits below really edit the file
    config = tmp_path / "train-lm.yaml"  # one path: the path is a setting of LMTrainConfig

    def fp(text: str) -> str:
        config.write_text(text)
        return lm_fingerprint(LMTrainConfig(trainer_config=str(config)), [reference], None)[0]

    base = fp(original)
    assert (
        fp("# a new comment line\n" + original.replace("seed: 1234\n", "seed: 1234   # and one here\n"))
        == base
    )
    assert fp(original.replace("seed: 1234\n", "seed: 1235\n")) != base
