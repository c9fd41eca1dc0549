"""core/config.py on its own: the coercion rules its docstring states, the error messages (file, dotted
key, allowed keys), `apply_overrides`, `load_config`, and core.cli.load_settings (flags as aliases)."""

from __future__ import annotations

import argparse
from typing import Literal

import pytest

from core.cli import add_config_args, load_settings
from core.config import ConfigError, ConfigModel, apply_overrides, build_config, fingerprint_of, load_config


class Inner(ConfigModel):
    threshold: float = 0.5
    """In [0, 1]."""
    enabled: bool = True


class Job(ConfigModel):
    count: int = 1
    ratio: float = 1.0
    name: str = "x"
    sizes: tuple[int, ...] = (1, 2)
    maybe: int | None = None
    inner: Inner = Inner()


# -- coercion rules (the module docstring) -----------------------------------------------------------


def test_a_number_written_as_a_string_is_a_number():
    cfg = build_config(Job, {"count": "3", "ratio": "2e-3"})
    assert cfg.count == 3 and cfg.ratio == 0.002


def test_an_integral_float_is_an_integer_and_no_other_float_is():
    assert build_config(Job, {"count": 1e6}).count == 1_000_000
    with pytest.raises(ConfigError, match=r"count must be an integer, got 1\.5"):
        build_config(Job, {"count": 1.5})


def test_a_list_is_accepted_for_a_tuple_field():
    assert build_config(Job, {"sizes": [4, 5]}).sizes == (4, 5)


@pytest.mark.parametrize("value", [True, False])
def test_a_boolean_is_never_a_number(value):
    with pytest.raises(ConfigError, match=f"count must be a number, got {value}"):
        build_config(Job, {"count": value})


class Switch(ConfigModel):
    compile: bool | Literal["auto"] = "auto"


@pytest.mark.parametrize("value", [True, False, "auto"])
def test_a_boolean_or_auto_field_takes_its_words(value):
    assert build_config(Switch, {"compile": value}).compile == value


@pytest.mark.parametrize("value", [1, "yes", "true", "Auto"])
def test_a_boolean_or_auto_field_refuses_other_words_by_name(value):
    with pytest.raises(ConfigError, match="compile must be true or false or 'auto'"):
        build_config(Switch, {"compile": value})


@pytest.mark.parametrize("value", [1, "yes", "true"])
def test_only_true_and_false_are_booleans(value):
    with pytest.raises(ConfigError, match=r"inner\.enabled must be true or false"):
        build_config(Job, {"inner": {"enabled": value}})
    assert build_config(Job, {"inner": {"enabled": False}}).inner.enabled is False


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan"), "inf"])
def test_infinities_and_nan_are_refused(value):
    with pytest.raises(ConfigError, match="ratio must be a finite number"):
        build_config(Job, {"ratio": value})
    with pytest.raises(ConfigError, match="ratio must be a finite number"):  # YAML's .inf too
        build_config(Job, apply_overrides({}, ["ratio=.inf"]))


def test_none_is_kept_for_an_optional_field():
    assert build_config(Job, {"maybe": None}).maybe is None
    assert build_config(Job, {"maybe": "7"}).maybe == 7


# -- errors name the source and the key --------------------------------------------------------------


def test_unknown_key_names_the_dotted_key_and_the_allowed_ones():
    with pytest.raises(
        ConfigError, match=r"^f\.yaml: unknown key inner\.treshold; allowed: enabled, threshold$"
    ):
        build_config(Job, {"inner": {"treshold": 0.3}}, "f.yaml")


def test_top_level_must_be_a_mapping():
    with pytest.raises(ConfigError, match="src: top level must be a mapping, got list"):
        build_config(Job, [1], "src")


def test_direct_construction_reports_like_a_file_and_models_are_frozen():
    with pytest.raises(ConfigError, match="count must be an integer"):
        Job(count="many")
    cfg = Job()
    with pytest.raises(Exception, match="frozen"):
        cfg.count = 2
    assert cfg.replace(count=4).count == 4 and cfg.count == 1
    with pytest.raises(ConfigError, match="count must be an integer"):
        cfg.replace(count="many")


# -- overrides -----------------------------------------------------------------------------------------


def test_overrides_set_dotted_keys_as_yaml_values_on_a_copy():
    data = {"inner": {"threshold": 0.1}}
    out = apply_overrides(data, ["inner.threshold=0.7", "sizes=[3, 4]", "name=", "inner.enabled=false"])
    assert out == {"inner": {"threshold": 0.7, "enabled": False}, "sizes": [3, 4], "name": ""}
    assert data == {"inner": {"threshold": 0.1}}  # the input is not changed


@pytest.mark.parametrize("bad", ["novalue", "=3", "a..b=1", ".a=1", "a.=1"])
def test_malformed_overrides_are_refused(bad):
    with pytest.raises(ConfigError, match=r"expected section\.key=value"):
        apply_overrides({}, [bad])


def test_an_override_through_a_value_that_is_not_a_section_is_refused():
    with pytest.raises(ConfigError, match=r"override 'name\.x=1': name is not a section"):
        apply_overrides({"name": "x"}, ["name.x=1"])


def test_an_override_that_is_not_yaml_is_refused_naming_it():
    with pytest.raises(ConfigError, match=r"override 'name=\[1': "):
        apply_overrides({}, ["name=[1"])


def test_load_config_reads_the_file_then_the_overrides(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text("count: 2\ninner:\n  threshold: 0.2\n")
    cfg = load_config(Job, path, ["inner.threshold=0.9"])
    assert (cfg.count, cfg.inner.threshold) == (2, 0.9)
    assert load_config(Job) == Job()
    with pytest.raises(ConfigError, match=r"job\.yaml \(with overrides\): count must be an integer"):
        load_config(Job, path, ["count=many"])
    path.write_text("count: 1\ncount: 2\n")
    with pytest.raises(ConfigError, match="count"):  # a duplicate key is refused, not the last one kept
        load_config(Job, path)


def test_fingerprint_depends_on_content_not_key_order():
    assert fingerprint_of({"a": 1, "b": 2}) == fingerprint_of({"b": 2, "a": 1})
    assert fingerprint_of({"a": 1}) != fingerprint_of({"a": 2})
    assert len(fingerprint_of({})) == 12


# -- core.cli.load_settings: a command's flags are aliases of its keys ------------------------------------


def _args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_config_args(p, "here")
    p.add_argument("--count", type=int, default=None)
    return p.parse_args(argv)


def test_a_given_flag_wins_over_the_file_and_set(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("count: 2\nname: file\n")
    args = _args(["--config", str(path), "--set", "count=3", "--set", "name=set"])
    cfg = load_settings(Job, args, {"count": args.count})
    assert (cfg.count, cfg.name) == (3, "set")  # no flag: --set over the file
    args = _args(["--config", str(path), "--set", "count=3", "--count", "5"])
    assert load_settings(Job, args, {"count": args.count}).count == 5
    with pytest.raises(ConfigError, match="unknown key bogus"):
        load_settings(Job, _args(["--set", "bogus=1"]), {})
