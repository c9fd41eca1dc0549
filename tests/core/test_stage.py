"""core/stage.py on its own: the registry, `resolve_stage` by name and import path, argument checks,
and `run_stages`' bookkeeping (counts, bytes, drop reasons, errors, annotate mode). No job, no Spark."""

from __future__ import annotations

import itertools

import pytest

from core.errors import ConfigError
from core.stage import (
    OPS,
    DatatroveFilter,
    Document,
    DocumentStage,
    Drop,
    Rules,
    build_class,
    build_stage,
    check_arguments,
    class_entries,
    evidence_key,
    register,
    register_path,
    registered,
    resolve_stage,
    run_stages,
)
from core.stats import Stats

_kinds = itertools.count()


def fresh_kind() -> str:
    """A registry kind no other test uses (the registry is process-wide)."""
    return f"test_kind_{next(_kinds)}"


class MinWords(DocumentStage):
    name = "min_words"
    annotatable = True

    def __init__(self, min_words: int = 3, stop: list[str] | None = None) -> None:
        self.min_words, self.stop = min_words, stop or []

    def process(self, doc: Document) -> Document | Drop:
        n = len(doc.text.split())
        return doc if n >= self.min_words else Drop("too_few_words", detail=f"{n} words")


class Upper(DocumentStage):
    name = "upper"

    def process(self, doc: Document) -> Document | Drop:
        doc.text = doc.text.upper()
        self.count("uppered")
        return doc


class Boom(DocumentStage):
    name = "boom"

    def process(self, doc: Document) -> Document | Drop:
        raise RuntimeError("kaput")


class KeepOnError(Boom):
    on_error = "keep"


class DatatroveStyle:
    """datatrove's contract: filter(doc) -> bool | (bool, reason)."""

    def filter(self, doc):
        return (False, "dt_reason") if "spam" in doc.text else True


class NotAStage:
    pass


# -- registry ---------------------------------------------------------------------------------------


def test_register_and_resolve_by_name():
    kind = fresh_kind()
    register(kind, "min")(MinWords)
    assert registered(kind) == {"min": MinWords}
    assert resolve_stage(kind, "min", "filters[0]") is MinWords


def test_register_path_imports_only_when_named_and_then_keeps_the_class():
    kind = fresh_kind()
    register_path(kind, "upper", f"{__name__}:Upper")
    assert registered(kind) == {"upper": f"{__name__}:Upper"}  # a path until first use
    assert resolve_stage(kind, "upper", "k") is Upper
    assert registered(kind) == {"upper": Upper}  # imported once


@pytest.mark.parametrize("spec", [f"{__name__}.MinWords", f"{__name__}:MinWords"])
def test_resolve_by_import_path_dotted_or_colon(spec):
    assert resolve_stage(fresh_kind(), spec, "k") is MinWords


def test_resolve_errors_name_the_key():
    kind = fresh_kind()
    register(kind, "min")(MinWords)
    with pytest.raises(ConfigError, match=r"filters\[2\]: unknown .* 'nope'; registered: min"):
        resolve_stage(kind, "nope", "filters[2]")
    with pytest.raises(ConfigError, match=r"k: cannot import 'no_such_module_xyz.Cls'"):
        resolve_stage(kind, "no_such_module_xyz.Cls", "k")
    with pytest.raises(ConfigError, match=r"k: .*NotAStage' is not a document stage"):
        resolve_stage(kind, f"{__name__}.NotAStage", "k")
    with pytest.raises(ConfigError, match="k must be a registry name or an import path"):
        resolve_stage(kind, "", "k")


def test_resolve_with_a_base_class_checks_subclassing():
    assert resolve_stage(fresh_kind(), f"{__name__}.KeepOnError", "k", base=Boom) is KeepOnError
    with pytest.raises(ConfigError, match=r"is not a subclass of .*Boom"):
        resolve_stage(fresh_kind(), f"{__name__}.Upper", "k", base=Boom)


def test_class_entries_reads_names_and_mappings():
    entries = ["min", {"class": "pkg.Mod", "min_words": 5}]
    assert class_entries(entries, "filters") == [("min", {}), ("pkg.Mod", {"min_words": 5})]
    with pytest.raises(ConfigError, match=r"filters\[0\] must be"):
        class_entries([{"min_words": 5}], "filters")


# -- arguments --------------------------------------------------------------------------------------


def test_check_arguments_refuses_unknown_names_listing_the_allowed():
    with pytest.raises(
        ConfigError, match=r"filters\[0\]\.min_wordz is not an argument .*allowed: min_words, stop"
    ):
        check_arguments(MinWords, {"min_wordz": 2}, "filters[0]")


def test_check_arguments_checks_types_by_annotation():
    check_arguments(MinWords, {"min_words": 2, "stop": ["a"]}, "f")
    check_arguments(MinWords, {"min_words": "2"}, "f")  # pydantic's lax rules: "2" is an integer
    with pytest.raises(ConfigError, match=r"f\.min_words: .*integer.*got 'many'"):
        check_arguments(MinWords, {"min_words": "many"}, "f")
    with pytest.raises(ConfigError, match=r"f\.stop\[0\]: .*string.*got \['a', 'b'\]"):
        check_arguments(MinWords, {"stop": [["a", "b"]]}, "f")


def test_build_stage_checks_first_and_adapts_datatrove_filters():
    kind = fresh_kind()
    stage = build_stage(kind, f"{__name__}.MinWords", {"min_words": 5}, "f")
    assert isinstance(stage, MinWords) and stage.min_words == 5
    with pytest.raises(ConfigError, match="not an argument"):
        build_class(kind, f"{__name__}.MinWords", {"bogus": 1}, "f")
    dt = build_stage(kind, f"{__name__}.DatatroveStyle", {}, "f", name="dt")
    assert dt.name == "dt"
    assert dt.process(Document("1", "ham")).text == "ham"
    assert dt.process(Document("2", "spam")) == Drop("dt_reason")


# -- run_stages -------------------------------------------------------------------------------------


def _run(stages, text, annotate=False):
    stats, drops = Stats(), []
    out = run_stages(
        Document("d", text), stages, stats, lambda n, d, r: drops.append((n, r.reason)), annotate
    )
    return out, stats, drops


def test_run_stages_counts_docs_bytes_and_counters():
    out, stats, drops = _run([MinWords(2), Upper()], "héllo world")
    assert out.text == "HÉLLO WORLD" and drops == []
    mw, up = stats.stage("min_words"), stats.stage("upper")
    assert (mw.docs_in, mw.docs_out, mw.bytes_in, mw.bytes_out) == (1, 1, 12, 12)  # é is 2 UTF-8 bytes
    assert (up.docs_in, up.docs_out) == (1, 1)
    assert stats.counters["uppered"] == 1


def test_a_drop_ends_the_document_with_its_reason_counted():
    out, stats, drops = _run([MinWords(3), Upper()], "two words")
    assert out is None and drops == [("min_words", "too_few_words")]
    assert stats.stage("min_words").drops["too_few_words"] == 1
    assert stats.stage("min_words").drop_bytes["too_few_words"] == 9
    assert stats.stage("upper").docs_in == 0


def test_an_exception_drops_or_keeps_per_on_error():
    out, stats, drops = _run([Boom(), Upper()], "x")
    assert out is None and drops == [("boom", "boom_error")]
    out, stats, _ = _run([KeepOnError(), Upper()], "x")
    assert out.text == "X" and stats.counters["boom_error"] == 1


def test_annotate_mode_records_the_drop_and_runs_the_rest_that_are_not_filters():
    out, stats, drops = _run([MinWords(3), MinWords(1), Upper()], "two words", annotate=True)
    assert out is not None and out.text == "TWO WORDS"
    assert (out.metadata["drop_stage"], out.metadata["drop_reason"]) == ("min_words", "too_few_words")
    assert drops == [("min_words", "too_few_words")]
    assert stats.counters["annotated:upper"] == 1
    assert stats.stage("upper").docs_in == 0  # not a funnel row in annotate passes


# -- evidence (issue 46) ----------------------------------------------------------------------------


class MinWordsRule(DocumentStage):
    """A user filter giving its evidence through the contract (`Rules.check`)."""

    name = "min_words_rule"
    annotatable = True

    def __init__(self, min_words: int = 3) -> None:
        self.min_words = min_words

    def process(self, doc: Document) -> Document | Drop:
        n = len(doc.text.split())
        return Rules(self).check("too_few_words", "words", n, "<", self.min_words) or doc


class BoomAfterMeasuring(DocumentStage):
    name = "boom_after"
    annotatable = True
    on_error = "keep"

    def process(self, doc: Document) -> Document | Drop:
        self.measure("half", 1.0)
        raise RuntimeError("kaput")


def _run_drops(stages, text, annotate=False):
    stats, drops = Stats(), []
    out = run_stages(Document("d", text), stages, stats, lambda n, d, r: drops.append(r), annotate)
    return out, drops


def test_a_rule_drop_carries_metric_value_op_threshold_and_reads_as_text():
    out, drops = _run_drops([MinWordsRule(3)], "two words")
    assert out is None
    (drop,) = drops
    assert (drop.reason, drop.metric, drop.value, drop.op, drop.threshold) == (
        "too_few_words",
        "words",
        2,
        "<",
        3,
    )
    assert OPS[drop.op](drop.value, drop.threshold)
    assert drop.evidence() == "words 2 < 3"
    assert Drop("x").evidence() == "" and Drop("x", metric="m", value=0.5).evidence() == "m 0.5"
    with pytest.raises(ValueError, match=r"Drop\.op"):
        Drop("x", metric="m", value=1, threshold=2, op="lt")


def test_annotate_mode_writes_the_values_of_rules_passed_and_of_the_one_failed():
    # kept: the value of the rule it passed, under <stage>/<metric>
    out, _ = _run_drops([MinWordsRule(2), Upper()], "three short words", annotate=True)
    assert out.metadata["evidence"] == {evidence_key("min_words_rule", "words"): 3.0}
    assert out.metadata.get("drop_stage") is None
    # annotated as dropped: the failing rule's value, next to its drop_stage
    out, drops = _run_drops([MinWordsRule(5), MinWords(1)], "two words", annotate=True)
    assert out.metadata["drop_stage"] == "min_words_rule"
    assert (
        out.metadata["evidence"] == {"min_words_rule/words": 2.0} == {"min_words_rule/words": drops[0].value}
    )
    # drop mode never sets the column: the document row stays as it was
    out, _ = _run_drops([MinWordsRule(2)], "three short words")
    assert "evidence" not in out.metadata


def test_values_of_a_stage_that_raised_or_ran_over_budget_are_not_kept(monkeypatch):
    out, _ = _run_drops([BoomAfterMeasuring(), MinWordsRule(1)], "one two", annotate=True)
    assert out.metadata["evidence"] == {"min_words_rule/words": 2.0}  # not boom_after/half
    assert BoomAfterMeasuring().take_evidence() is None

    import core.stage as core_stage

    now = [0.0]
    monkeypatch.setattr(core_stage, "_clock", lambda: now[0])

    class Slow(MinWordsRule):
        name = "slow"
        time_budget_s = 5.0

        def process(self, doc):
            now[0] += 7.0
            return super().process(doc)

    out, drops = _run_drops([Slow(1)], "one two", annotate=True)
    (drop,) = drops
    assert (drop.reason, drop.metric, drop.value, drop.op, drop.threshold) == (
        "slow_time_budget",
        "seconds",
        7.0,
        ">",
        5.0,
    )
    # annotated (a filter's drop): the budget's evidence, not the discarded result's words
    assert out.metadata["evidence"] == {"slow/seconds": 7.0}


def test_datatrove_filters_give_no_evidence():
    dt = DatatroveFilter(DatatroveStyle())
    drop = dt.process(Document("2", "spam"))
    assert (drop.metric, drop.value, drop.threshold, drop.op) == (None, None, None, None)
