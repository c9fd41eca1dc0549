"""Decisions carry their evidence (issue 46): every built-in rule that compares a measured value with a
threshold drops a real document with `metric`, `value`, `op` and `threshold` that agree with the drop
(`value op threshold` holds, and the value is recomputed here where that is cheap), kept documents
carry the values of the rules they passed (annotate mode), and the rejected sample is a fixed-size,
rerun-stable reservoir per (stage, reason, language) with bounded rows.

Documents are real: the shared quality sets (DCLM's human-labelled Common Crawl pages, Wikipedia
articles, cc_net's extracted pages) and the shared WARCs. Where no real document fails a rule at its
default threshold, the rule gets a tighter threshold (the evidence must then name that threshold), or
the text is built from real text in the one way the rule is about (a real paragraph repeated).
"""

from __future__ import annotations

import gzip
import json
import random
from collections import Counter
from functools import cache
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from core.output import OutputDir
from core.stage import OPS, Document, Drop, Rules, run_stages
from core.stats import Stats
from curation.config import ExtractJobConfig, FiltersConfig
from curation.filters.blocks import build_filter_steps
from curation.filters.text import C4Quality, FineWebQuality, GopherQuality, GopherRepetition
from curation.pipeline import LANG_COUNTER, _Rejected, process_file
from curation.schema import REJECTED_DETAIL_CHARS, REJECTED_SCHEMA, sample_key
from testkit.shared_data import shared_data_dir

BLOCKS = {
    "gopher_repetition": GopherRepetition,
    "gopher_quality": GopherQuality,
    "c4_quality": C4Quality,
    "fineweb_quality": FineWebQuality,
}


@cache
def corpus() -> tuple[str, ...]:
    """333 real documents, in a fixed order."""
    d = shared_data_dir() / "quality"
    texts = [json.loads(line)["text"] for line in (d / "dclm_human_labels_dev.jsonl").open(encoding="utf-8")]
    texts += [
        json.loads(line)["text"] for line in (d / "enwiki_sample_articles.jsonl").open(encoding="utf-8")
    ]
    with gzip.open(d / "cc-extracted-ccnet-head" / "000.json.gz", "rt", encoding="utf-8") as f:
        texts += [json.loads(line)["text"] for line in f]
    return tuple(texts)


def article(i: int = 0) -> str:
    """A real Wikipedia article of at least a few paragraphs."""
    d = shared_data_dir() / "quality" / "enwiki_sample_articles.jsonl"
    arts = [json.loads(line)["text"] for line in d.open(encoding="utf-8")]
    return [a for a in arts if a.count("\n\n") >= 6 and len(a) > 5000][i]


def paragraphs(text: str) -> list[str]:
    return [p for p in text.split("\n\n") if p.strip()]


def first_drop(block, reason: str) -> tuple[str, Drop]:
    """The first real document `block` drops with `reason` (`Rules()`: the verdict, nothing recorded)."""
    for text in corpus():
        drop = block.judge(text, Rules())
        if drop is not None and drop.reason == reason:
            return text, drop
    raise AssertionError(f"no real document is dropped with {reason}")


# -- independent recomputations (only what is cheap without the filters' tokenizer) ----------------


def _dup_frac(items: list[str]) -> float:
    return (len(items) - len(set(items))) / len(items)


def _dup_chars(items: list[str]) -> int:
    return sum(len(x) * (c - 1) for x, c in Counter(items).items() if c > 1)


def _lines_ending(text: str, ends: tuple[str, ...]) -> float:
    lines = text.splitlines()
    return sum(1 for s in lines if s.rstrip().endswith(ends)) / len(lines)


def _fineweb_lines(text: str) -> list[str]:
    return [line for line in text.split("\n") if line.strip()]


def _punct_ratio(text: str) -> float:
    from datatrove.utils.text import TERMINAL_PUNCTUATION

    lines = _fineweb_lines(text)
    return sum(1 for line in lines if line.endswith(tuple(TERMINAL_PUNCTUATION))) / len(lines)


def _short_ratio(text: str) -> float:
    lines = _fineweb_lines(text)
    return sum(1 for line in lines if len(line) <= 30) / len(lines)


def _char_dup(text: str) -> float:
    return _dup_chars(_fineweb_lines(text)) / (len(text) - text.count("\n"))


def _para_dup_frac(text: str) -> float:
    import re

    return _dup_frac(re.split(r"\n{2,}", text.strip()))


def _para_dup_char_frac(text: str) -> float:
    import re

    return _dup_chars(re.split(r"\n{2,}", text.strip())) / len(text)


def _line_dup_frac(text: str) -> float:
    import re

    return _dup_frac(re.split(r"\n+", text))


def _line_dup_char_frac(text: str) -> float:
    import re

    return _dup_chars(re.split(r"\n+", text)) / len(text)


# -- the cases: (block, its arguments, reason, metric, text: None = the first real document dropped) -


def _repeat_paragraph() -> str:
    ps = paragraphs(article())[:4]
    return "\n\n".join([ps[0], ps[1], ps[0], ps[2], ps[0]])  # 2 of 5 paragraphs repeated: 0.4 > 0.3


def _repeat_long_paragraph() -> str:
    ps = sorted(paragraphs(article()), key=len)
    long, short = ps[-1], ps[:6]
    return "\n\n".join([long, *short, long])  # 1 of 8 repeated (0.125), but a long one: its characters


def _repeat_long_line() -> str:
    ps = sorted(paragraphs(article()), key=len)
    long, short = ps[-1].replace("\n", " "), [p.replace("\n", " ") for p in ps[:6]]
    return "\n".join([long, *short, long])  # one paragraph (no blank line); a long line repeated


def _bulleted() -> str:
    return "\n".join(f"- {line}" for line in article().splitlines() if line.strip())


def _without_stop_words() -> str:
    import re

    stop = {"the", "be", "to", "of", "and", "that", "have", "with"}
    words = [w for w in re.findall(r"[A-Za-z]+", article()) if w.lower() not in stop]
    return " ".join(w + ("." if i % 12 == 11 else "") for i, w in enumerate(words))


def _twice() -> str:
    body = " ".join(article().split()[:400])
    return f"{body} {body}"


_NO_LINE_RULES = {
    "dup_para_frac": None,
    "dup_para_char_frac": None,
    "dup_line_frac": None,
    "dup_line_char_frac": None,
}

CASES = [
    ("gopher_repetition", {}, "dup_para_frac", "dup_para_frac", _repeat_paragraph, _para_dup_frac),
    (
        "gopher_repetition",
        {},
        "dup_para_char_frac",
        "dup_para_char_frac",
        _repeat_long_paragraph,
        _para_dup_char_frac,
    ),
    ("gopher_repetition", {}, "dup_line_frac", "dup_line_frac", None, _line_dup_frac),
    (
        "gopher_repetition",
        {},
        "dup_line_char_frac",
        "dup_line_char_frac",
        _repeat_long_line,
        _line_dup_char_frac,
    ),
    ("gopher_repetition", {"top_n_grams": [[2, 0.01]]}, "top_2_gram", "top_2_gram_char_frac", None, None),
    ("gopher_repetition", {}, "top_3_gram", "top_3_gram_char_frac", None, None),
    ("gopher_repetition", {}, "top_4_gram", "top_4_gram_char_frac", None, None),
    (
        "gopher_repetition",
        {**_NO_LINE_RULES, "top_n_grams": []},
        "duplicated_5_n_grams",
        "dup_5_gram_char_frac",
        _twice,
        None,
    ),
    ("gopher_quality", {}, "gopher_short_doc", "words", None, None),
    ("gopher_quality", {"max_doc_words": 100}, "gopher_long_doc", "words", lambda: article(), None),
    (
        "gopher_quality",
        {"min_avg_word_length": 6},
        "gopher_below_avg_threshold",
        "avg_word_length",
        article,
        None,
    ),
    (
        "gopher_quality",
        {"max_avg_word_length": 4},
        "gopher_above_avg_threshold",
        "avg_word_length",
        article,
        None,
    ),
    (
        "gopher_quality",
        {"max_symbol_word_ratio": 0.002},
        "gopher_too_many_hashes",
        "hash_word_ratio",
        None,
        None,
    ),
    (
        "gopher_quality",
        {"max_symbol_word_ratio": 0.002},
        "gopher_too_many_ellipsis",
        "ellipsis_word_ratio",
        None,
        None,
    ),
    ("gopher_quality", {}, "gopher_too_many_bullets", "bullet_lines_ratio", _bulleted, None),
    (
        "gopher_quality",
        {},
        "gopher_too_many_end_ellipsis",
        "end_ellipsis_lines_ratio",
        None,
        lambda t: _lines_ending(t, ("...", "…")),
    ),
    ("gopher_quality", {}, "gopher_below_alpha_threshold", "alpha_words_ratio", None, None),
    ("gopher_quality", {}, "gopher_enough_stop_words", "stop_words", _without_stop_words, lambda t: 0),
    ("c4_quality", {}, "too_few_sentences", "sentences", None, None),
    ("fineweb_quality", {}, "line_punct_ratio", "line_punct_ratio", None, _punct_ratio),
    ("fineweb_quality", {}, "short_line_ratio", "short_line_ratio", None, _short_ratio),
    ("fineweb_quality", {}, "char_dup_ratio", "char_dup_ratio", None, _char_dup),
    ("fineweb_quality", {"new_line_ratio": 0.02}, "list_ratio", "list_ratio", None, None),
]

# the argument each metric's threshold is, by block (default values from the blocks' signatures)
THRESHOLD_ARG = {
    "dup_para_frac": "dup_para_frac",
    "dup_para_char_frac": "dup_para_char_frac",
    "dup_line_frac": "dup_line_frac",
    "dup_line_char_frac": "dup_line_char_frac",
    "gopher_short_doc": "min_doc_words",
    "gopher_long_doc": "max_doc_words",
    "gopher_below_avg_threshold": "min_avg_word_length",
    "gopher_above_avg_threshold": "max_avg_word_length",
    "gopher_too_many_hashes": "max_symbol_word_ratio",
    "gopher_too_many_ellipsis": "max_symbol_word_ratio",
    "gopher_too_many_bullets": "max_bullet_lines_ratio",
    "gopher_too_many_end_ellipsis": "max_ellipsis_lines_ratio",
    "gopher_below_alpha_threshold": "max_non_alpha_words_ratio",
    "gopher_enough_stop_words": "min_stop_words",
    "too_few_sentences": "min_num_sentences",
    "line_punct_ratio": "line_punct_thr",
    "short_line_ratio": "short_line_thr",
    "char_dup_ratio": "char_duplicates_ratio",
    "list_ratio": "new_line_ratio",
}


@pytest.mark.parametrize(
    ("key", "kwargs", "reason", "metric", "make", "recompute"),
    CASES,
    ids=[f"{c[0]}:{c[2]}" for c in CASES],
)
def test_every_rule_drops_a_real_document_with_evidence_that_agrees(
    key, kwargs, reason, metric, make, recompute
):
    block = BLOCKS[key](**kwargs)
    if make is None:
        text, _ = first_drop(block, reason)
    else:
        text = make()
    # through the stage contract, as the pipeline runs it (FilterStep: reason prefixed, evidence kept)
    (step,) = build_filter_steps(
        FiltersConfig.model_validate({key: kwargs, **{k: None for k in BLOCKS if k != key}})
    )
    drops: list[Drop] = []
    out = run_stages(Document("d", text), [step], Stats(), lambda n, d, r: drops.append(r))
    assert out is None
    (drop,) = drops
    assert drop.reason == f"{key}:{reason}"
    assert drop.metric == metric and drop.op in OPS
    assert isinstance(drop.value, int | float) and isinstance(drop.threshold, int | float)
    assert OPS[drop.op](drop.value, drop.threshold), drop  # the evidence is the drop's
    if reason in THRESHOLD_ARG:
        assert drop.threshold == getattr(block, THRESHOLD_ARG[reason])
    elif reason.startswith("top_"):
        assert drop.threshold == dict(block.top_n_grams)[int(reason.split("_")[1])]
    else:
        assert drop.threshold == dict(block.dup_n_grams)[int(reason.split("_")[1])]
    if recompute is not None:
        assert drop.value == pytest.approx(recompute(text), abs=1e-12)
    # the verdict alone (`reason`) is the same: evidence changed no decision
    assert block.reason(text) == reason


def test_matches_that_are_no_comparison_carry_no_metric():
    c4 = C4Quality()
    _, drop = first_drop(c4, "curly_bracket")
    assert (drop.metric, drop.value, drop.threshold, drop.op) == (None, None, None, None)
    lorem = (
        "\n".join(paragraphs(article())[:3]) + "\nLorem ipsum dolor sit amet, consectetur adipiscing elit."
    )
    drop = c4.judge(lorem, Rules())
    assert drop.reason == "lorem_ipsum" and drop.metric is None


# -- kept documents: the values of the rules they passed (annotate mode) ---------------------------

# (op, threshold) of each default rule, written out here rather than read from the code
DEFAULT_RULES = {
    "filter:gopher_repetition/dup_para_frac": [(">", 0.3)],
    "filter:gopher_repetition/dup_para_char_frac": [(">", 0.2)],
    "filter:gopher_repetition/dup_line_frac": [(">", 0.3)],
    "filter:gopher_repetition/dup_line_char_frac": [(">", 0.2)],
    "filter:gopher_repetition/top_2_gram_char_frac": [(">", 0.2)],
    "filter:gopher_repetition/top_3_gram_char_frac": [(">", 0.18)],
    "filter:gopher_repetition/top_4_gram_char_frac": [(">", 0.16)],
    **{
        f"filter:gopher_repetition/dup_{n}_gram_char_frac": [(">", t)]
        for n, t in ((5, 0.15), (6, 0.14), (7, 0.13), (8, 0.12), (9, 0.11), (10, 0.10))
    },
    "filter:gopher_quality/words": [("<", 50), (">", 100000)],
    "filter:gopher_quality/avg_word_length": [("<", 3), (">", 10)],
    "filter:gopher_quality/hash_word_ratio": [(">", 0.1)],
    "filter:gopher_quality/ellipsis_word_ratio": [(">", 0.1)],
    "filter:gopher_quality/bullet_lines_ratio": [(">", 0.9)],
    "filter:gopher_quality/end_ellipsis_lines_ratio": [(">", 0.3)],
    "filter:gopher_quality/alpha_words_ratio": [("<", 0.8)],
    "filter:gopher_quality/stop_words": [("<", 2)],
    "filter:c4_quality/sentences": [("<", 5)],
    "filter:fineweb_quality/line_punct_ratio": [("<", 0.12)],
    "filter:fineweb_quality/short_line_ratio": [(">", 0.67)],
    "filter:fineweb_quality/char_dup_ratio": [(">", 0.01)],
    "filter:fineweb_quality/list_ratio": [(">", 0.3)],
}


def test_kept_documents_carry_the_values_of_every_rule_they_passed():
    steps = build_filter_steps(FiltersConfig())
    kept = 0
    for i, text in enumerate(corpus()):
        out = run_stages(Document(str(i), text), steps, Stats(), lambda *a: None, annotate=True)
        ev = out.metadata.get("evidence") or {}
        assert set(ev) <= set(DEFAULT_RULES)
        if out.metadata.get("drop_stage") is not None:
            # annotated as dropped: the failing rule's value is there and fails it
            stage = out.metadata["drop_stage"]
            failed = [
                k
                for k in ev
                if k.startswith(stage + "/") and any(OPS[o](ev[k], t) for o, t in DEFAULT_RULES[k])
            ]
            assert failed or out.metadata["drop_reason"].endswith(("curly_bracket", "lorem_ipsum", "empty"))
            continue
        kept += 1
        assert set(ev) == set(DEFAULT_RULES)  # every rule judged, every value kept
        for k, v in ev.items():
            for op, t in DEFAULT_RULES[k]:
                assert not OPS[op](v, t), (k, v, op, t)
        assert ev["filter:fineweb_quality/line_punct_ratio"] == pytest.approx(_punct_ratio(text))
        assert ev["filter:gopher_repetition/dup_line_frac"] == pytest.approx(_line_dup_frac(text))
    assert kept > 50  # most Wikipedia articles pass


# -- the rejected sample over real WARCs: evidence, reservoir, bounds ------------------------------

EVIDENCE_REASONS = {  # drops that must carry a metric (they compare a value with a threshold)
    "lang_low_score",
    "extract_empty",
    "extract_oversize",
    *(f"{k}:{r}" for k, _, r, *_ in CASES),
}


def _extract(uri: Path, root: Path, overrides: list[str]) -> tuple[list[dict], dict]:
    cfg = ExtractJobConfig.load(None, overrides)
    OutputDir(root).prepare("extract", cfg.to_dict(), cfg.fingerprint())
    res = process_file(str(uri), cfg, str(root))
    assert res["status"] == "done", res
    rows = pq.read_table(root / "rejected" / f"{res['unit']}.parquet").to_pylist()
    return rows, json.loads((root / "stats" / f"{res['unit']}.json").read_text())


@pytest.mark.parametrize("name", ["cc-main-2020-34-sample.warc.gz", "crawl-2024-sample-0000.warc.gz"])
def test_rejected_sample_is_a_stable_reservoir_per_stage_reason_and_language(tmp_path, warc_dir, name):
    k = 2
    over = [f"output.rejected_per_reason={k}", "output.rejected_text_chars=3000"]
    rows, stats = _extract(warc_dir / name, tmp_path / "a", over)
    again, _ = _extract(warc_dir / name, tmp_path / "b", over)
    assert rows == again  # a rerun keeps the same rows

    cells = Counter((r["stage"], r["reason"], r["lang"]) for r in rows)
    assert max(cells.values()) <= k
    # every language a reason dropped (exact counts: the lang_funnel counters) has min(n, k) rows
    langs = set()
    for key, n in stats["counters"].items():
        parts = key.split("|")
        if parts[0] == LANG_COUNTER and parts[2] == "drop":
            lang, reason = parts[1], parts[3]
            langs.add(lang)
            got = sum(c for (_, r, lg), c in cells.items() if r == reason and lg == lang)
            assert got == min(n, k), (lang, reason, n)
    assert langs and langs <= {r["lang"] for r in rows}
    if name.startswith("cc-main"):
        assert len(langs) >= 3  # the multilingual sample: several languages each get their own cell
    # and per reason, exact counts stay in the funnel: the sample never has more than was dropped
    drops = {(st["stage"], r): n for st in stats["stages"] for r, n in st["drops"].items()}
    for (stage, reason, _), c in cells.items():
        assert c <= drops[(stage, reason)]

    # the kept rows are those with the smallest keys of their cell, and the key is the id's
    for r in rows:
        if r["id"] is not None:
            assert r["sample_key"] == sample_key(r["id"])
    for r in rows:  # every row: evidence consistent with the drop, text bounded
        if r["reason"] in EVIDENCE_REASONS or r["stage"] == "prelid":
            assert r["metric"] is not None, r["reason"]
        if r["metric"] is not None:
            assert OPS[r["op"]](r["value"], r["threshold"]), r
        if r["stage"] == "langid" and r["metric"] == "lang_score":
            assert r["value"] == pytest.approx(r["lang_score"], abs=1e-6)
        if r["text"] is not None:
            assert len(r["text"]) <= 3000 and r["text"].startswith(r["snippet"])
    assert any(r["metric"] for r in rows)


def _candidates(n: int) -> list[dict]:
    """Real dropped-document rows: ids of the records of a real WARC, texts of real documents."""
    texts = corpus()
    return [
        {
            "stage": "filter:x",
            "reason": "x:r",
            "id": f"{i:032x}",
            "lang": ("eng_Latn", "deu_Latn", None)[i % 3],
            "detail": "",
            "snippet": texts[i % len(texts)],
        }
        for i in range(n)
    ]


def test_reservoir_ignores_arrival_order_and_merges_across_units():
    cands = _candidates(300)
    one = _Rejected(5, 200, None, 1000)
    for c in cands:
        one.add(**dict(c))
    shuffled = _Rejected(5, 200, None, 1000)
    for c in random.Random(7).sample(cands, len(cands)):
        shuffled.add(**dict(c))
    assert one.rows == shuffled.rows
    assert Counter(r["lang"] for r in one.rows) == {"eng_Latn": 5, "deu_Latn": 5, None: 5}
    # two units' samples, merged by the smallest keys per cell, are the sample of both together
    a, b = _Rejected(5, 200, None, 1000), _Rejected(5, 200, None, 1000)
    for i, c in enumerate(cands):
        (a if i % 2 else b).add(**dict(c))
    merged: dict[tuple, list] = {}
    for r in [*a.rows, *b.rows]:
        merged.setdefault((r["stage"], r["reason"], r["lang"]), []).append(r)
    merged_rows = [
        r
        for cell in sorted(merged, key=lambda c: (c[0], c[1], c[2] or ""))
        for r in sorted(merged[cell], key=lambda r: r["sample_key"])[:5]
    ]
    assert merged_rows == one.rows


def test_hostile_lengths_are_bounded_and_text_is_scrubbed(warc_dir):
    from curation.pii.scrub import PiiStage

    scrubber = PiiStage(ExtractJobConfig().pii.scrub_config()).scrubber
    email = "jane.roe@example.org"
    body = article()
    text = body[:5000] + f" write to {email} " + body * 400  # ~2 MB of real text, an address past the snippet
    rej = _Rejected(3, 200, scrubber, 20_000)
    rej.add(
        "filter:x",
        "x:r",
        id="a" * 32,
        lang="eng_Latn",
        url="http://example.com/" + "w-" * 200_000,
        detail="word " * 100_000,
        metric="m" * 50_000,
        snippet=text,
    )
    (row,) = rej.rows
    assert len(row["text"]) == 20_000 and len(row["snippet"]) == 200
    assert email not in row["text"] and "<EMAIL>" in row["text"]
    assert len(row["detail"]) == REJECTED_DETAIL_CHARS and len(row["metric"]) == REJECTED_DETAIL_CHARS
    table = pa.Table.from_pylist(rej.rows, schema=REJECTED_SCHEMA)  # the row is the schema's
    assert table.num_rows == 1
    # rejected_text_chars: 0 keeps no text, the snippet stays; values out of range are refused on load
    none = _Rejected(3, 200, None, 0)
    none.add("filter:x", "x:r", id="b" * 32, lang=None, snippet=text)
    assert none.rows[0]["text"] is None and len(none.rows[0]["snippet"]) == 200
    # a stage whose input must not be shown (a PII scrub that failed: Drop.snippet "") shows no text either
    failed = _Rejected(3, 200, None, 20_000)
    failed.add_drop(
        "pii", Document("c" * 32, text, {"lang": "eng_Latn"}), Drop("pii_error", "boom", snippet="")
    )
    assert (failed.rows[0]["snippet"], failed.rows[0]["text"]) == (None, None)
    from core.errors import ConfigError

    for bad in ("-1", "2000000"):
        with pytest.raises(ConfigError, match=r"output\.rejected_text_chars"):
            ExtractJobConfig.load(None, [f"output.rejected_text_chars={bad}"])
    # the default is left out of the fingerprint: folders made before the option keep their names
    assert (
        ExtractJobConfig.load(None, ["output.rejected_text_chars=20000"]).fingerprint()
        == ExtractJobConfig().fingerprint()
    )


def test_old_rejected_files_without_the_new_columns_still_read(tmp_path):
    """report/collect.py reads rejected/ by column name: a run written before issue 46 (no metric, value,
    threshold, op, text, sample_key) reads as one written now."""
    from report.collect import languages

    old = pa.schema(
        [
            f
            for f in REJECTED_SCHEMA
            if f.name not in {"metric", "value", "threshold", "op", "text", "sample_key"}
        ]
    )
    rej = tmp_path / "run" / "extract" / "rejected"
    rej.mkdir(parents=True)
    row = {"id": "a", "stage": "langid", "reason": "lang_not_kept", "lang": "deu_Latn", "snippet": "Hallo"}
    pq.write_table(pa.Table.from_pylist([row], schema=old), rej / "old.parquet")
    new_row = {
        **row,
        "id": "b",
        "metric": "lang_score",
        "value": 0.3,
        "threshold": 0.65,
        "op": "<",
        "sample_key": 1,
    }
    pq.write_table(pa.Table.from_pylist([new_row], schema=REJECTED_SCHEMA), rej / "new.parquet")
    assert languages(tmp_path / "run")["rejected_sample"] == {"deu_Latn": 2}
