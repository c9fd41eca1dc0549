"""The plan's estimate for sources that are not tokenized yet: UTF-8 bytes of the selected documents /
bytes_per_token, counted by hand here; documents are listed by core.files' one rule."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from core.errors import ConfigError
from mixtures.__main__ import main
from mixtures.plan import compute_budget, make_plan
from mixtures.recipe import Recipe, RecipeError


def _docs(folder, rows):
    folder.mkdir(parents=True, exist_ok=True)
    return pa.table({k: [r[k] for r in rows] for k in ("text", "lang", "quality")})


def test_estimate_from_selected_documents(tmp_path):
    rows_a = [
        {"text": "héllo wörld", "lang": "en", "quality": 0.9},  # 13 bytes (two 2-byte letters)
        {"text": "bonjour", "lang": "fr", "quality": 0.9},  # wrong language
        {"text": "low", "lang": "en", "quality": 0.1},  # below the threshold
    ]
    rows_b = [{"text": "ok " * 5, "lang": "en", "quality": 0.5}, {"text": "x", "lang": "en", "quality": None}]
    docs = tmp_path / "scored" / "docs"
    pq.write_table(_docs(docs, rows_a), docs / "part-0.parquet")
    pq.write_table(_docs(docs / "lang=en", rows_b), docs / "lang=en" / "part-1.parquet")
    # a running job's temporary file is not part of the dataset
    pq.write_table(_docs(docs, rows_a), docs / "_tmp-part-2.parquet")
    recipe = Recipe.from_dict(
        {
            "total_tokens": 100,
            "bytes_per_token": 2.0,
            "sources": {
                "web": {"docs": "scored", "select": {"lang": "en", "quality": ">= 0.5"}},
                "later": {"docs": "not-extracted-yet"},
            },
            "phases": [{"name": "main", "share": 1, "weights": {"web": 1, "later": 1}}],
        },
        source="t",
        base=tmp_path,
    )
    plan = make_plan(recipe)
    selected_bytes = len("héllo wörld".encode()) + len(("ok " * 5).encode())
    assert selected_bytes == 28
    assert (plan.sources["web"].available, plan.sources["web"].exact) == (round(selected_bytes / 2.0), False)
    assert plan.sources["later"].available is None
    assert any(w.startswith("later: tokens available unknown") for w in plan.warnings)


def _one_source_recipe(tmp_path, weight="1"):
    shards = tmp_path / "shards"
    shards.mkdir()
    # the fields a tokenize manifest has that plan reads (no shard files: a source of 1,000 tokens)
    (shards / "manifest.json").write_text(
        '{"tokens": 1000, "select": {}, "files": [], "tokenizer": {"sha256": "t"}}'
    )
    path = tmp_path / "r.yaml"
    path.write_text(
        "total_tokens: 100\nsources: {web: {shards: shards}}\n"
        f"phases: [{{name: main, share: 1, weights: {{web: {weight}}}}}]\n"
    )
    return path


@pytest.mark.parametrize(
    "args",
    [
        ["--seq-len", "0"],
        ["--seq-len=-5"],
        ["--model-params", "1M", "--mfu", "0"],
        ["--model-params", "1M", "--mfu", "1.5"],
        ["--model-params", "1M", "--peak-flops", "0"],
        ["--model-params=-1M"],
        ["--model-params", "0"],
        ["--model-params", "nan"],
    ],
)
def test_plan_refuses_arguments_it_would_divide_by(tmp_path, args, capsys):
    """Each of these was a ZeroDivisionError traceback (exit 1) or a silent negative cost."""
    path = _one_source_recipe(tmp_path)
    with pytest.raises(SystemExit) as e:
        main(["plan", str(path), *args])
    assert e.value.code == 2
    assert f"argument {args[-1].split('=')[0] if '=' in args[-1] else args[-2]}" in capsys.readouterr().err


def test_plan_runs_with_valid_arguments(tmp_path, capsys):
    path = _one_source_recipe(tmp_path)
    # no shard files behind this manifest, so nothing to hold out from (a split reads their indexes)
    args = ["--seq-len", "10", "--heldout-sequences", "0", "--model-params", "1M", "--mfu", "1"]
    assert main(["plan", str(path), *args]) == 0
    assert "GPU-hours at 100% MFU" in capsys.readouterr().out


def test_library_refuses_zero_divisors(tmp_path):
    """The same rules for callers that do not go through argparse."""
    recipe = Recipe.load(_one_source_recipe(tmp_path))
    with pytest.raises(ConfigError, match="sequence length"):
        make_plan(recipe, 0)
    with pytest.raises(ConfigError, match="MFU"):
        compute_budget(1e6, 100, mfu=0)


@pytest.mark.parametrize("weight", [".inf", "-.inf", ".nan"])
def test_non_finite_weight_refused_on_load(tmp_path, weight, capsys):
    path = _one_source_recipe(tmp_path, weight)
    with pytest.raises(RecipeError, match=r"phases\[0\]\.weights\.web"):
        Recipe.load(path)
    assert main(["plan", str(path)]) == 2
    assert "phases[0].weights.web" in capsys.readouterr().err


def test_plan_set_overrides_the_recipe_before_validation(tmp_path, capsys):
    """`plan RECIPE --set key=value`: the plan is that of the recipe file edited the same way."""
    path = _one_source_recipe(tmp_path)
    assert main(["plan", str(path), "--set", "total_tokens=2e6"]) == 1  # 2,000 epochs of 1,000 tokens: warned
    assert "total 2,000,000 tokens" in capsys.readouterr().out
    sets = ["--set", "total_tokens=2e6", "--set", "max_epochs=2000"]
    assert main(["plan", str(path), *sets]) == 0
    by_set = capsys.readouterr().out.replace(str(path), "RECIPE")
    edited = tmp_path / "edited" / "r.yaml"  # same name (the plan prints it), same relative shards
    edited.parent.mkdir()
    edited.write_text(
        path.read_text().replace("total_tokens: 100", "total_tokens: 2000000\nmax_epochs: 2000")
    )
    (edited.parent / "shards").symlink_to(tmp_path / "shards")
    assert main(["plan", str(edited)]) == 0
    assert by_set == capsys.readouterr().out.replace(str(edited), "RECIPE")


def test_plan_set_completes_a_recipe_and_is_validated_with_it(tmp_path, capsys):
    """Applied before validation: a key the file lacks may come from --set, and a bad value is refused
    naming the key and that overrides were given."""
    path = _one_source_recipe(tmp_path)
    path.write_text(path.read_text().replace("total_tokens: 100\n", ""))
    assert main(["plan", str(path)]) == 2
    assert "total_tokens" in capsys.readouterr().err
    assert main(["plan", str(path), "--set", "total_tokens=100"]) == 0
    capsys.readouterr()
    assert main(["plan", str(path), "--set", "total_tokens=abc"]) == 2
    assert f"{path} (with overrides): total_tokens: must be an integer" in capsys.readouterr().err
    assert main(["plan", str(path), "--set", "total_tokens"]) == 2
    assert "override 'total_tokens': expected section.key=value" in capsys.readouterr().err


def test_plan_says_how_it_counted(tmp_path, capsys):
    """It used to print "sequence length 1" (its default); now it says it counted tokens and how to count
    as the trainer does, or the trainer's rows (data.seq_len + 1) and split it was given."""
    path = _one_source_recipe(tmp_path)
    assert main(["plan", str(path)]) == 0
    out = capsys.readouterr().out
    assert "sequence length 1" not in out
    assert "counted in tokens against whole shards" in out and "--seq-len and --heldout-sequences" in out
    assert main(["plan", str(path), "--seq-len", "9", "--heldout-sequences", "0"]) == 0
    assert "rows of 10 tokens, 0 rows held out per source" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:
        main(["plan", str(path), "--heldout-sequences=-1"])
    assert e.value.code == 2 and "must be 0 or more" in capsys.readouterr().err
