"""Every number and every name a recipe or a mixture-search config holds is checked on load (issue 54).

Numbers: every numeric field states a finite range (mixtures/bounds.py); a value outside it, or not a
finite number, is refused with the key and the range before anything runs. Found by walking the
models, so a field added later without a range fails here. Names: a recipe's own name, its sources'
and phases' and a bucketed source's are one plain file name (core/names.py), since each becomes (or
may become) a folder name.
"""

from __future__ import annotations

import math
import types
import typing

import pytest
from pydantic import BaseModel

from core.config import build_config
from core.errors import ConfigError
from mixtures import search as ms
from mixtures.bounds import range_of
from mixtures.plan import compute_budget
from mixtures.recipe import RecipeError, RecipeSpec
from workflows.search import MixtureSearchConfig, estimate

HOSTILE_NUMBERS = [0, -1, math.inf, -math.inf, math.nan, 1e308, 1e-320]
HOSTILE_NAMES = ["../../../../tmp/x", "/etc/passwd", "..", ".", ".hidden", "a/b", "a\\b", "x%2F..%2Fy",
                 "nul\x00", "", "a" * 256, "line\n", " lead", "sp ace", "{brace}", "é"]  # fmt: skip


def _numeric_fields(model: type[BaseModel], prefix: str = "") -> list[tuple[str, type, typing.Any]]:
    """(dotted key, int or float, Range or None) of every numeric field under `model`; a dict of numbers
    is listed under `<key>.x` (its values' range)."""
    out = []
    for name, f in model.model_fields.items():
        key = f"{prefix}{name}"
        ann, meta = f.annotation, list(f.metadata)
        args = typing.get_args(ann)
        if typing.get_origin(ann) in (typing.Union, types.UnionType):  # X | None: the X
            inner = [a for a in args if a is not type(None)]
            if len(inner) == 1:
                ann = inner[0]
                meta += list(getattr(ann, "__metadata__", ()))
                ann = getattr(ann, "__origin__", ann) if hasattr(ann, "__metadata__") else ann
        origin, args = typing.get_origin(ann), typing.get_args(ann)
        item = args[-1] if origin is dict else args[0] if origin is tuple and args else None
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            out += _numeric_fields(ann, key + ".")
        elif isinstance(item, type) and issubclass(item, BaseModel):  # sources: {name: ...}, phases: [...]
            out += _numeric_fields(item, key + ".")
        elif origin is dict:
            value = args[1]
            base = typing.get_args(value)[0] if hasattr(value, "__metadata__") else value
            if base in (int, float):
                out.append((f"{key}.x", base, range_of(list(getattr(value, "__metadata__", ())))))
        elif ann in (int, float):
            out.append((key, ann, range_of(meta)))
    return out


SEARCH_FIELDS = _numeric_fields(MixtureSearchConfig)
RECIPE_FIELDS = _numeric_fields(RecipeSpec)
SETTABLE = [f for f in SEARCH_FIELDS if not f[0].startswith("search.buckets.")]  # a list: not by --set


def test_every_numeric_field_states_a_finite_range():
    """The class: no numeric field of a search config or a recipe without both ends."""
    assert len(SEARCH_FIELDS) >= 25 and len(RECIPE_FIELDS) >= 9  # the walk found them
    missing = [k for k, _, r in SEARCH_FIELDS + RECIPE_FIELDS if r is None]
    assert not missing, f"numeric fields without a stated range: {missing}"
    for key, _, r in SEARCH_FIELDS + RECIPE_FIELDS:
        assert math.isfinite(r.lo) and math.isfinite(r.hi) and r.lo <= r.hi, key


def _accepts(kind: type, rng, value: float) -> bool:
    if not math.isfinite(value) or not rng.lo <= value <= rng.hi:
        return False
    return kind is float or float(value).is_integer()


def _yaml(value: float) -> str:
    """The value as a `--set` writes it (a YAML scalar)."""
    if math.isnan(value):
        return ".nan"
    if math.isinf(value):
        return ".inf" if value > 0 else "-.inf"
    return repr(value)


@pytest.mark.parametrize("key,kind,rng", SETTABLE, ids=[k for k, _, _ in SETTABLE])
def test_search_settings_refuse_numbers_outside_their_range_naming_the_key(key, kind, rng):
    for value in HOSTILE_NUMBERS:
        setting = key.replace(".x", ".web")  # a dict of numbers (solve.min, model_overrides): one entry
        override = f"{setting}={_yaml(value)}"
        if _accepts(kind, rng, value):
            try:
                cfg = MixtureSearchConfig.load(None, [override])
            except ConfigError as e:  # a cross-field rule (max_draws >= proxies): named too
                assert setting.split(".")[-1] in str(e) or "swarm" in str(e), (override, e)
                continue
            got = cfg.to_dict()
            for part in setting.split("."):
                got = got[part]
            assert got == value, override
        else:
            with pytest.raises(ConfigError) as e:
                MixtureSearchConfig.load(None, [override])
            msg = str(e.value)
            assert setting in msg, (override, msg)
            assert "less than or equal to" in msg or "finite" in msg or "integer" in msg, (override, msg)


def test_the_issue_cases_exit_2_with_the_key_before_anything_runs(tmp_path, capsys):
    from workflows.cli import main

    recipe = tmp_path / "r.yaml"  # never read: the settings are refused first
    recipe.write_text("name: r\n")
    for setting, key in [("transfer.token_multiple=1e308", "transfer.token_multiple"),
                         ("cost.core_flops=1e-320", "cost.core_flops"),
                         ("search.swarm.proxies=1000000", "search.swarm.proxies")]:  # fmt: skip
        out = tmp_path / "out"
        code = main(["mixture-search", str(recipe), "--output", str(out), "--eval", "x=y", "--set", setting,
                     "--dry-run"])  # fmt: skip
        err = capsys.readouterr().err
        assert code == 2 and key in err and "less than or equal to" in err and "Traceback" not in err, (
            setting,
            err,
        )
        assert not out.exists()


def test_derived_numbers_are_checked_too():
    """Bounded inputs whose product is not: the validation runs' tokens, the cost, the plan's FLOPs."""
    with pytest.raises(ConfigError, match=r"transfer\.token_multiple 1000 x proxy\.tokens"):
        MixtureSearchConfig.load(None, ["transfer.token_multiple=1000", "proxy.tokens=1e15"])
    cost = MixtureSearchConfig.load(None, ["cost.core_flops=1e6", "cost.cores=1"]).cost
    assert math.isfinite(estimate(4096, 10**15, 10**15, cost)["core_hours"])  # large, finite
    from core.errors import InputError

    with pytest.raises(InputError, match="not a finite number"):
        estimate(4096, 10**15, 10**300, cost)  # a model size from a trainer config, not bounded here
    with pytest.raises(ConfigError, match=r"flops is inf"):
        compute_budget(1e308, 10**15)
    with pytest.raises(ConfigError, match="is inf"):
        compute_budget(1e9, 10**6, 0.4, 1e-320)


def test_swarm_advice_follows_what_rejected_the_draws():
    """A swarm that runs out of distinct mixtures says so; caps that rejected nothing are not blamed."""
    import numpy as np

    cfg = ms.SwarmSection(proxies=4096, concentration=1000, max_draws=5000)
    with pytest.raises(ConfigError) as e:
        ms.draw_swarm(np.array([0.5, 0.5]), cfg, lambda w: True)
    msg = str(e.value)
    assert "0 rejected by a cap" in msg and "repeated" in msg and "epoch caps" not in msg, msg
    with pytest.raises(ConfigError, match=r"rejected by a cap.*raise max_epochs"):
        ms.draw_swarm(np.array([0.5, 0.5]), ms.SwarmSection(proxies=4, max_draws=50), lambda w: False)


RECIPE = {
    "name": "r",
    "total_tokens": 1000,
    "sources": {"a": {"shards": "sa"}},
    "phases": [{"name": "main", "share": 1.0, "weights": {"a": 1}}],
}


def _recipe_with(key: str, value) -> dict:
    import copy

    data = copy.deepcopy(RECIPE)
    where = {"max_epochs": data, "seed": data, "total_tokens": data, "bytes_per_token": data,
             "sources.max_epochs": data["sources"]["a"], "phases.share": data["phases"][0],
             "phases.weights.x": data["phases"][0]["weights"]}  # fmt: skip
    if key == "phases.tokens":
        data["phases"][0].pop("share")
        data["phases"][0]["tokens"] = value
        data["total_tokens"] = value
    elif key == "weights.temperature":
        data["phases"][0].pop("weights")
        data["weights"] = {"by": "tokens", "temperature": value}
    else:
        where[key][key.split(".")[-1] if key != "phases.weights.x" else "a"] = value
    return data


@pytest.mark.parametrize("key,kind,rng", RECIPE_FIELDS, ids=[k for k, _, _ in RECIPE_FIELDS])
def test_recipe_numbers_outside_their_range_are_refused_naming_the_key(key, kind, rng):
    from mixtures.recipe import Recipe

    for value in HOSTILE_NUMBERS:
        data = _recipe_with(key, value)
        if _accepts(kind, rng, value):  # of these values, only seed 0
            Recipe.from_dict(data, source="r.yaml")
            continue
        with pytest.raises(RecipeError) as e:
            Recipe.from_dict(data, source="r.yaml")
        msg = str(e.value)
        last = key.split(".")[-1].replace("x", "a") if key.endswith(".x") else key.split(".")[-1]
        assert msg.startswith("r.yaml: ") and last in msg, (key, value, msg)
        assert "less than or equal to" in msg or "finite" in msg or "integer" in msg, (key, value, msg)


def test_a_share_that_rounds_to_no_tokens_is_refused():
    from mixtures.recipe import Recipe

    data = {**RECIPE, "phases": [{"name": "main", "share": 1.0, "weights": {"a": 1}},
                                  {"name": "tiny", "share": 1e-6, "weights": {"a": 1}}]}  # fmt: skip
    with pytest.raises(RecipeError, match=r"phases\.tiny\.share 1e-06 of total_tokens 1,000 is 0 tokens"):
        Recipe.from_dict(data, source="r.yaml")


@pytest.mark.parametrize("name", HOSTILE_NAMES, ids=repr)
@pytest.mark.parametrize("place", ["name", "source", "phase", "bucket"])
def test_a_name_from_a_file_is_one_plain_component(place, name):
    """Each place a recipe or search config names something that becomes a folder: refused on load,
    naming the file and the key; a plain name in the same place loads."""
    from mixtures.recipe import Recipe

    def data_with(n: str) -> dict:
        if place == "name":
            return {**RECIPE, "name": n}
        if place == "source":
            return {**RECIPE, "sources": {n: {"shards": "sa"}},
                    "phases": [{"name": "main", "share": 1.0, "weights": {n: 1}}]}  # fmt: skip
        return {**RECIPE, "phases": [{"name": n, "share": 1.0, "weights": {"a": 1}}]}

    if place == "bucket":
        with pytest.raises(
            ConfigError, match=r"^search\.yaml: search\.buckets\[0\]\.source: must be a file name"
        ):
            build_config(MixtureSearchConfig, {"search": {"buckets": [{"source": name, "column": "q"}]}},
                         "search.yaml")  # fmt: skip
        build_config(MixtureSearchConfig, {"search": {"buckets": [{"source": "web.hq-1", "column": "q"}]}})
        return
    with pytest.raises(RecipeError, match=r"^r\.yaml: .*must be a file name") as e:
        Recipe.from_dict(data_with(name), source="r.yaml")
    assert {"name": "name must", "source": "source name must", "phase": "phases[0].name must"}[place] in str(
        e.value
    )
    Recipe.from_dict(data_with("web.hq-1_v2"), source="r.yaml")
