"""`score`'s scorer options are config like any other: `--set KIND.KEY=VALUE` (the option section is the
scorer's KIND), a `--config` file mapping KIND to options, and `--option`, the older spelling, the same
list. `evaluate --threshold` is an alias of `--set threshold=...`. The jobs are replaced by recorders:
what is checked is what the command line hands on."""

from __future__ import annotations

import re

import pytest

import classifiers.cli
from classifiers.cli import main
from classifiers.scorer import ScorerSpec
from core.runner import RunResult


@pytest.fixture
def scored(monkeypatch):
    seen: list[tuple] = []

    def spec(kind, model, options=None):
        return ScorerSpec(kind=kind, model=model, options=dict(options or {}), identity={})

    def run(input_dir, output, quality, **kw):
        seen.append((quality, kw["scorers"]))
        return RunResult(str(output), 0, 0, 0)

    monkeypatch.setattr(classifiers.cli, "make_spec", spec)
    monkeypatch.setattr(classifiers.cli, "run_score", run)
    return seen


BASE = ["score", "--input", "in", "--output", "out", "--no-progress"]
KINDS = ["--scorer", "perplexity=lm", "--scorer", "mypkg.scorers.Words=wdir"]


def test_set_option_and_config_name_the_same_options(scored, tmp_path):
    assert (
        main([*BASE, *KINDS, "--set", "perplexity.max_tokens=512", "--set", "mypkg.scorers.Words.scale=4"])
        == 0
    )
    assert (
        main(
            [
                *BASE,
                *KINDS,
                "--option",
                "perplexity.max_tokens=512",
                "--option",
                "mypkg.scorers.Words.scale=4",
            ]
        )
        == 0
    )
    cfg = tmp_path / "opts.yaml"
    cfg.write_text("perplexity: {max_tokens: 512}\nmypkg.scorers.Words: {scale: 4}\n")
    assert main([*BASE, *KINDS, "--config", str(cfg)]) == 0
    want = [("perplexity", {"max_tokens": 512}), ("mypkg.scorers.Words", {"scale": 4})]
    assert len(scored) == 3
    for quality, specs in scored:
        assert quality is None and [(s.kind, s.options) for s in specs] == want


def test_set_overrides_the_file_and_mixes_with_option(scored, tmp_path):
    cfg = tmp_path / "opts.yaml"
    cfg.write_text("perplexity: {max_tokens: 512, max_chunks: 2}\n")
    argv = [
        *BASE,
        *KINDS,
        "--config",
        str(cfg),
        "--set",
        "perplexity.max_tokens=64",
        "--option",
        "perplexity.batch_tokens=9",
    ]
    assert main(argv) == 0
    assert scored[0][1][0].options == {"max_tokens": 64, "max_chunks": 2, "batch_tokens": 9}


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["--set", "toxicity.window_words=3"],
            r"--set 'toxicity.window_words=3': expected KIND.KEY=VALUE with KIND a scorer given",
        ),
        (["--option", "perplexity=3"], r"expected KIND.KEY=VALUE"),
        (["--model", "q", "--set", "quality.x=1"], r"the quality scorer takes no options"),
    ],
)
def test_options_for_a_scorer_not_given_are_refused(scored, capsys, extra, message):
    assert main([*BASE, *KINDS, *extra]) == 2
    assert re.search(message, capsys.readouterr().err)
    assert scored == []


def test_a_config_section_that_is_not_a_scorer_given_is_refused(scored, capsys, tmp_path):
    cfg = tmp_path / "opts.yaml"
    cfg.write_text("toxicity: {window_words: 3}\n")
    assert main([*BASE, *KINDS, "--config", str(cfg)]) == 2
    assert "'toxicity' must be a scorer given" in capsys.readouterr().err


def test_evaluate_threshold_flag_is_an_alias_of_set(monkeypatch, capsys, tmp_path):
    seen = []

    def evaluate(model, labelled, threshold):
        seen.append(threshold)
        return {"roc_auc": 1.0}, []

    monkeypatch.setattr(classifiers.cli, "evaluate", evaluate)
    monkeypatch.setattr(classifiers.cli, "metrics_table", lambda m: "")
    base = ["evaluate", "--model", "m", "--labelled", "l.jsonl"]
    assert main(base) == 0
    assert main([*base, "--set", "threshold=0.7"]) == 0
    assert main([*base, "--set", "threshold=0.7", "--threshold", "0.3"]) == 0
    assert seen == [0.5, 0.7, 0.3]
    assert main([*base, "--set", "threshold=high"]) == 2
    assert "threshold must be a number" in capsys.readouterr().err
