"""The one YAML reader (core/safe_yaml.py) through the loaders that use it: configs, `--set`, recipes.

Each hostile file is made here. What is asserted is the refusal a user sees (a ConfigError or exit 2
naming the file, the line and the limit), and that it comes before the work (and the memory) a
hostile file would cause: the alias bomb below is 43 million values once expanded.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from core.config import load_config
from core.errors import ConfigError
from core.safe_yaml import MAX_BYTES, MAX_DEPTH, MAX_NODES, load_yaml
from curation.config import ExtractJobConfig
from dedup.config import DedupJobConfig
from mixtures.recipe import Recipe, RecipeError

REPO = Path(__file__).resolve().parents[2]


def _bomb(levels: int = 8, width: int = 9) -> str:
    """A 'billion laughs' document: width**levels leaves through `levels` anchors (a few hundred bytes)."""
    lines = [f"l0: &l0 [{', '.join(['lol'] * width)}]"]
    for i in range(1, levels):
        lines.append(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]")
    return "\n".join(lines) + "\n"


# -- duplicate keys ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "line", "key"),
    [
        ("langid:\n  threshold: 0.9\nfilters: {}\nlangid:\n  threshold: 0.5\n", 4, "langid"),  # a section
        ("langid:\n  threshold: 0.9\n  threshold: 0.5\n", 3, "threshold"),  # a key in a section
        ("weights: {web: 1, web: 5}\n", 1, "web"),  # flow style, one line
        ("sources:\n  - {name: a, path: x}\n  - name: b\n    path: y\n    name: c\n", 5, "name"),  # in a list
        ("1: a\n1.0: b\n", 2, "1.0"),  # equal after construction (YAML 1 and 1.0 are one key)
    ],
)
def test_a_key_written_twice_is_refused_naming_line_and_key(tmp_path, text, line, key):
    p = tmp_path / "c.yaml"
    p.write_text(text)
    with pytest.raises(
        ConfigError,
        match=rf"c\.yaml: line {line}: duplicate key '?{key}'?",
    ):
        load_yaml(p.read_bytes(), str(p))


def test_a_merge_key_is_not_a_duplicate_and_the_written_key_wins():
    doc = load_yaml("base: &b {threshold: 0.9, model: x}\nlangid:\n  <<: *b\n  threshold: 0.5\n")
    assert doc["langid"] == {"threshold": 0.5, "model": "x"}


@pytest.mark.security
def test_a_duplicate_section_in_an_extract_config_exits_2_before_spark(tmp_path):
    cfg = tmp_path / "extract.yaml"
    cfg.write_text("langid:\n  threshold: 0.9\nlangid:\n  threshold: 0.2\n")
    r = subprocess.run(
        [sys.executable, "-m", "curation", "extract", "--config", str(cfg), "--input", str(tmp_path / "none.warc.gz"),
         "--output", str(tmp_path / "out")],
        capture_output=True, text=True, cwd=REPO, timeout=120,
    )  # fmt: skip
    assert r.returncode == 2, r.stderr
    assert f"error: {cfg}: line 3: duplicate key 'langid' (first on line 1)" in r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "out").exists()


def test_recipe_weights_written_twice_are_refused(tmp_path):
    p = tmp_path / "recipe.yaml"
    p.write_text(
        "total_tokens: 1000\nsources:\n  web: {shards: s}\nphases:\n  - name: main\n    share: 1\n"
        "    weights: {web: 1, web: 5}\n"
    )
    with pytest.raises(RecipeError, match=r"line 7: duplicate key 'web'"):
        Recipe.load(p)


# -- size, depth, aliases ------------------------------------------------------------------------


@pytest.mark.security
@pytest.mark.parametrize("overrides", [[], ["minhash.bands=4"]])  # --set used to expand the bomb: 3.8 GB
def test_an_alias_bomb_is_refused_with_or_without_overrides(tmp_path, overrides):
    p = tmp_path / "dedup.yaml"
    p.write_text("minhash:\n  bands: 4\n  rows: 8\n" + _bomb())
    with pytest.raises(
        ConfigError, match=rf"line \d+: expands to more than {MAX_NODES:,} values through aliases"
    ):
        load_config(DedupJobConfig, p, overrides)


@pytest.mark.security
def test_an_alias_bomb_in_an_override_value_or_a_filter_list_is_refused(tmp_path):
    inline = (
        "["
        + ", ".join(f"&a{i} [" + ", ".join([f"*a{i - 1}" if i else "1"] * 9) + "]" for i in range(8))
        + "]"
    )
    with pytest.raises(ConfigError, match=r"override 'minhash\.bands=.*expands to more than"):
        load_config(DedupJobConfig, None, [f"minhash.bands={inline}"])
    # the case that said "unhashable type: 'list'": a bomb where a filter wants a list of words
    p = tmp_path / "extract.yaml"
    p.write_text(_bomb() + "filters:\n  gopher_quality:\n    stop_words: *l7\n")
    with pytest.raises(ConfigError, match="expands to more than"):
        ExtractJobConfig.load(p)


def test_a_list_of_lists_where_words_are_expected_names_the_item():
    with pytest.raises(
        ConfigError, match=r"filters\.gopher_quality\.stop_words\[1\]: input should be a valid string"
    ):
        ExtractJobConfig.load(None, ["filters.gopher_quality.stop_words=[the, [of, and]]"])


@pytest.mark.security
def test_a_recursive_alias_is_refused():
    with pytest.raises(ConfigError, match="recursive alias"):
        load_yaml("a: &a [1, *a]\n", "r.yaml")
    with pytest.raises(ConfigError, match="recursive alias"):
        load_yaml("a: &a {b: {c: *a}}\n", "r.yaml")


@pytest.mark.security
@pytest.mark.parametrize(
    "body",
    [
        "minhash: " + "[" * 20_000 + "]" * 20_000 + "\n",  # flow sequences
        "".join("  " * i + f"k{i}:\n" for i in range(MAX_DEPTH + 1))
        + "  " * (MAX_DEPTH + 1)
        + "v: 1\n",  # block
        "x: " + "{a: " * 5_000 + "1" + "}" * 5_000 + "\n",  # flow mappings
    ],
)
def test_deep_nesting_is_refused_naming_the_limit(tmp_path, body):
    p = tmp_path / "deep.yaml"
    p.write_text(body)
    with pytest.raises(ConfigError, match=rf"deep\.yaml: line \d+: nested more than {MAX_DEPTH} levels deep"):
        load_config(DedupJobConfig, p)


@pytest.mark.security
def test_a_deep_recipe_is_refused_by_the_trainer_config_loader_too(tmp_path):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("total_tokens: 1000\nsources: " + "[" * 1000 + "]" * 1000 + "\n")
    with pytest.raises(RecipeError, match=f"nested more than {MAX_DEPTH} levels"):
        Recipe.load(recipe)


@pytest.mark.security
def test_a_file_over_the_size_limit_is_refused_before_it_is_read(tmp_path):
    p = tmp_path / "big.yaml"
    with p.open("w") as f:  # a list of small items, as the 17M-item file that ended in bad_alloc
        f.write("minhash:\n  bands:\n")
        f.write("  - 1\n" * (MAX_BYTES // 6 + 1))
    assert p.stat().st_size > MAX_BYTES
    with pytest.raises(ConfigError, match=rf"big\.yaml: [\d,]+ bytes is over the {MAX_BYTES:,}-byte limit"):
        load_config(DedupJobConfig, p)


@pytest.mark.security
def test_many_small_values_under_the_byte_limit_are_refused_by_the_value_limit():
    text = "x:\n" + "- 1\n" * (MAX_NODES + 10)  # ~200 KB: under the byte limit
    assert len(text) < MAX_BYTES
    with pytest.raises(ConfigError, match=rf"many\.yaml: line \d+: more than {MAX_NODES:,} values"):
        load_yaml(text, "many.yaml")


# -- encoding ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "line"),
    [
        ("# réglages\nminhash:\n  bands: 4\n".encode("latin-1"), 1),  # Latin-1
        (b"minhash:\n  bands: 4\n  rows: 8 # \xff\xfe\n", 3),  # stray bytes
        ("minhash:\n  rows: 8\n".encode("utf-16"), 1),  # UTF-16 with a BOM
    ],
)
def test_a_config_that_is_not_utf8_names_file_and_line(tmp_path, raw, line):
    p = tmp_path / "enc.yaml"
    p.write_bytes(raw)
    with pytest.raises(ConfigError, match=rf"enc\.yaml: line {line}: byte 0x[0-9a-f]{{2}} is not UTF-8"):
        load_config(DedupJobConfig, p)


def test_a_recipe_that_is_not_utf8_names_the_file(tmp_path):
    p = tmp_path / "recipe.yaml"
    p.write_bytes("# mélange\ntotal_tokens: 1000\n".encode("cp1252"))
    with pytest.raises(RecipeError, match=r"recipe\.yaml: line 1: byte 0xe9 is not UTF-8"):
        Recipe.load(p)


@pytest.mark.security
def test_an_alias_bomb_or_a_duplicate_key_in_a_select_value_is_refused():
    from tokens.cli import parse_select

    inline = (
        "["
        + ", ".join(f"&a{i} [" + ", ".join([f"*a{i - 1}" if i else "en"] * 9) + "]" for i in range(8))
        + "]"
    )
    with pytest.raises(ConfigError, match=r"--select lang: line 1: expands to more than"):
        parse_select([f"lang={inline}"])
    with pytest.raises(ConfigError, match=r"--select meta: line 1: duplicate key 'a'"):
        parse_select(["meta={a: 1, a: 2}"])
