"""Decontamination on real data: the shared WARC pages against the shared Wikipedia and WikiText.

The documents are every page of the shared WARCs, extracted (resiliparse, no language or quality
filter: 1,300+ pages in many languages, a harder test for false hits than the 300 English pages the
default filters keep). The evaluation sets are the shared Wikipedia articles (JSONL) and WikiText-2
validation (text, a paragraph per line). Passages of them, of lengths from one n-gram to whole
articles, are planted at the start, middle or end of some pages with changes that normalization
must absorb (case, punctuation, whitespace, digits, full-width letters, WikiText's tokenization).

What is expected comes from a plain reference written here: each n-gram as a string (the shared
normalization, split into words), in Python sets; no hash, kernel or index of the code under test.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from core.config import ConfigError
from core.errors import InputError
from core.spark import SparkOptions
from core.storage import open_store
from dedup.config import DecontaminateConfig, DedupJobConfig
from dedup.decontam import build_index, find_hits
from dedup.normalize import normalize_bytes, normalize_text
from testkit.shared_data import REPO_ROOT
from tests.support.bench import load_bench

N = 13


def _words(text: str) -> list[str]:
    return normalize_text(text).split()


def _trivial(tok: str) -> bool:
    return set(tok) == {"0"} or (len(tok) == 1 and tok.isascii())


def ref_ngrams(text: str) -> set[str]:
    """The reference: every N-gram of the normalized words, as a string."""
    w = _words(text)
    return {" ".join(w[i : i + N]) for i in range(len(w) - N + 1)}


def nontrivial(grams: set[str]) -> set[str]:
    """Without the n-grams made only of numbers and single ASCII characters."""
    return {g for g in grams if not all(map(_trivial, g.split()))}


@pytest.fixture(scope="module")
def pages(warc_dir, tmp_path_factory) -> dict[str, tuple[str, str]]:
    """id -> (url, text) of every page of the shared WARCs (the benchmark's documents)."""
    found = load_bench("dedup/decontaminate").warc_pages(warc_dir, tmp_path_factory.mktemp("pages"))
    assert len(found) > 1000, len(found)
    return found


@pytest.fixture(scope="module")
def eval_sets(data_dir) -> dict[str, dict]:
    """name -> its config entry and the passages and reference n-grams of the set."""
    q = data_dir / "quality"
    wiki = [
        json.loads(line)["text"] for line in (q / "enwiki_sample_articles.jsonl").read_text().splitlines()
    ]
    wikitext = [line for line in (q / "wikitext-2-valid.txt").read_text().splitlines() if line.strip()]
    out = {}
    for name, path, passages in (
        ("wikipedia", q / "enwiki_sample_articles.jsonl", wiki),
        ("wikitext", q / "wikitext-2-valid.txt", wikitext),
    ):
        every = set().union(*(ref_ngrams(p) for p in passages))
        out[name] = {
            "entry": {"name": name, "paths": [str(path)]},
            "passages": passages,
            "grams": nontrivial(every),
            "every": every,
        }
    return out


def _config(eval_sets, **kw) -> dict:
    return {"sets": [s["entry"] for s in eval_sets.values()], **kw}


def _ref_hits(eval_sets, text: str) -> dict[str, set[str]]:
    mine = ref_ngrams(text)  # the sets' reference n-grams leave trivial ones out
    return {name: g for name, s in eval_sets.items() if (g := mine & s["grams"])}


def test_every_hit_on_the_shared_warc_pages_is_a_real_overlap(pages, eval_sets):
    """Wikipedia + WikiText against every shared WARC page: the hits are exactly the reference's,
    and each is an n-gram the page and the set both hold. With trivial n-grams left out (the
    default) there are none; with them in, the hits are rows of figures and `a b c ... z` indexes."""
    ids = list(pages)
    norms = [normalize_bytes(pages[i][1]) for i in ids]
    page_grams = {i: ref_ngrams(pages[i][1]) for i in ids}
    for skip in (True, False):
        grams = {n: s["grams" if skip else "every"] for n, s in eval_sets.items()}
        index = build_index(DecontaminateConfig(**_config(eval_sets, skip_trivial=skip)))
        assert index.names == ("wikipedia", "wikitext")
        found = {}
        for doc_id, hits in zip(ids, find_hits(index.table, norms), strict=True):
            if hits is not None:
                found[doc_id] = {index.names[s]: n for s, n in zip(hits.sets, hits.ngrams, strict=True)}
                for s, example in zip(hits.sets, hits.examples, strict=True):
                    print(f"skip_trivial={skip}: {pages[doc_id][0]} {index.names[s]}: {example!r}")
                    assert example in normalize_text(pages[doc_id][1])
                    assert example in grams[index.names[s]]
        expected = {}
        for doc_id in ids:
            # the set's n-grams are without trivial ones already when `skip`: so is what is shared
            shared = {n: len(page_grams[doc_id] & g) for n, g in grams.items()}
            if any(shared.values()):
                expected[doc_id] = {n: c for n, c in shared.items() if c}
        assert found == expected
        if skip:
            assert found == {}
        else:  # without the rule: a handful of pages, sharing only n-grams of numbers and single letters
            assert 0 < len(found) < 20
            either = set().union(*grams.values())
            assert all(all(map(_trivial, g.split())) for i in found for g in page_grams[i] & either)


# -- planted passages ----------------------------------------------------------------------------


def _upper(s: str) -> str:
    return re.sub(r"[a-z]+", lambda m: m.group().upper(), s)


def _punctuation(s: str) -> str:
    return s.replace(", ", " ; ").replace(". ", "!  ").replace(" ", " -- ", 3)


def _whitespace(s: str) -> str:
    w = s.split(" ")
    return "\n".join(" \t ".join(w[i : i + 5]) for i in range(0, len(w), 5))


def _fullwidth(s: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "a" <= c <= "z" and i % 3 == 0 else c for i, c in enumerate(s))


def _digits(s: str) -> str:
    return re.sub(r"\d", lambda m: str((int(m.group()) + 7) % 10), s)


def _detokenize(s: str) -> str:
    """WikiText's tokenized form as the text it was made from (`state @-@ of` -> `state-of`)."""
    s = re.sub(r" @(.)@ ", r"\1", s)
    return re.sub(r" ([,.;:!?)]|'s)", r"\1", s).replace("( ", "(")


CHANGES = (_upper, _punctuation, _whitespace, _fullwidth, _digits, _detokenize, str)
LENGTHS = (13, 14, 20, 40, 120, None)  # normalized words; None: the whole passage
POSITIONS = ("start", "middle", "end")


def _slice(passage: str, words: int | None, rng: random.Random) -> str | None:
    """Whitespace-separated words of `passage` making at least `words` normalized words (exactly
    that many when the words allow it), from a random start; None if the passage is too short."""
    raw = passage.split()
    if words is None:
        return passage.strip() if len(_words(passage)) >= N else None
    for _ in range(20):
        start = rng.randrange(max(1, len(raw) - words))
        for end in range(start + 1, len(raw) + 1):
            got = len(_words(" ".join(raw[start:end])))
            if got >= words:
                return " ".join(raw[start:end])
    return None


def _plant(text: str, passage: str, where: str) -> str:
    if where == "start":
        return f"{passage}\n{text}"
    if where == "end":
        return f"{text}\n{passage}"
    cut = text.find(" ", len(text) // 2)
    cut = cut if cut >= 0 else len(text)
    return f"{text[:cut]} {passage} {text[cut:]}"


@pytest.fixture(scope="module")
def planted(pages, eval_sets) -> tuple[dict[str, str], dict[str, str]]:
    """(id -> text of every page, some with a passage planted; id -> the set planted in it)."""
    rng = random.Random(28)
    texts = {i: t for i, (_, t) in pages.items()}
    hosts = rng.sample(sorted(texts), 48)
    plan: dict[str, str] = {}
    for k, host in enumerate(hosts):
        name = ("wikipedia", "wikitext")[k % 2]
        passage = None
        while passage is None:
            passage = _slice(rng.choice(eval_sets[name]["passages"]), LENGTHS[k % len(LENGTHS)], rng)
        change = CHANGES[k % len(CHANGES)]
        texts[host] = _plant(texts[host], change(passage), POSITIONS[k % len(POSITIONS)])
        plan[host] = name
    # the reference finds each plant under its own set, and nothing in the pages left alone
    for i, t in texts.items():
        hit = _ref_hits(eval_sets, t)
        assert (set(hit) == {plan[i]}) if i in plan else not hit, (i, plan.get(i), hit)
    return texts, plan


def test_every_planted_passage_is_found_and_nothing_else(planted, eval_sets):
    texts, plan = planted
    index = build_index(DecontaminateConfig(**_config(eval_sets)))
    ids = list(texts)
    found = {}
    for doc_id, hits in zip(
        ids, find_hits(index.table, [normalize_bytes(texts[i]) for i in ids]), strict=True
    ):
        if hits is not None:
            found[doc_id] = {index.names[s]: n for s, n in zip(hits.sets, hits.ngrams, strict=True)}
    expected = {i: {plan[i]: len(_ref_hits(eval_sets, texts[i])[plan[i]])} for i in plan}
    assert found == expected
    assert min(n for hit in expected.values() for n in hit.values()) == 1  # a plant of exactly one n-gram


# -- the stage on Spark --------------------------------------------------------------------------


def _input(tmp_path: Path, texts: dict[str, str], plan: dict[str, str]) -> tuple[Path, list[str]]:
    """The planted pages and 100 pages left alone, as one Parquet input."""
    ids = sorted(plan) + sorted(i for i in texts if i not in plan)[:100]
    inp = tmp_path / "in"
    inp.mkdir()
    pq.write_table(pa.table({"id": ids, "text": [texts[i] for i in ids]}), inp / "docs.parquet")
    return inp, ids


STAGE_ONLY = {  # the other methods off: what is removed or annotated is decontamination's alone
    "exact": {"enabled": False},
    "url": {"enabled": False},
    "cluster": {"enabled": False},
    "lines": {"enabled": False},
    "output": {"partitions": 2},
}


@pytest.mark.spark
def test_drop_mode_removes_the_planted_documents_with_their_set_as_reason(
    spark, tmp_path, planted, eval_sets
):
    from dedup.job import run_dedup

    texts, plan = planted
    inp, ids = _input(tmp_path, texts, plan)
    cfg = DedupJobConfig.from_dict({**STAGE_ONLY, "decontaminate": _config(eval_sets)})
    out = tmp_path / "out"
    res = run_dedup(str(inp), str(out), cfg, spark=SparkOptions(spark.sparkContext.master, progress=False))
    removed = pq.read_table(out / "removed_ids").to_pylist()
    assert {r["id"]: r["reason"] for r in removed} == {i: f"decontaminate:{plan[i]}" for i in plan}
    assert {r["stage"] for r in removed} == {"decontaminate"}
    kept = set(pq.read_table(out / "docs").column("id").to_pylist())
    assert kept == set(ids) - set(plan) and res.docs_out == len(ids) - len(plan)
    stats = json.loads((out / "stats.json").read_text())
    row = next(s for s in stats["stages"] if s["stage"] == "decontaminate")
    assert row["drops"] == {f"decontaminate:{n}": sum(v == n for v in plan.values()) for n in eval_sets}
    report = json.loads((out / "stages" / "decontaminate" / "report.json").read_text())
    info = stats["stage_info"]["decontaminate"]
    assert {k: v for k, v in info.items() if k not in ("removed", "seconds")} == report
    assert report["documents_checked"] == len(ids) and report["contaminated_docs"] == len(plan)
    for name, s in report["sets"].items():
        mine = [i for i in plan if plan[i] == name]
        assert s["documents_hit"] == s["documents_matched"] == len(mine)
        assert s["ngrams_hit"] == len(set().union(*(_ref_hits(eval_sets, texts[i])[name] for i in mine)))
        assert s["passages"] == len(eval_sets[name]["passages"])
        assert s["ngrams"] == len(eval_sets[name]["grams"])
        assert len(s["examples"]) == 5
        for ex in s["examples"]:
            assert ex["ngram"] in eval_sets[name]["grams"] and ex["ngram"] in normalize_text(texts[ex["id"]])


@pytest.mark.spark
def test_annotate_mode_keeps_every_document_with_its_sets_and_overlap(spark, tmp_path, planted, eval_sets):
    """min_ngrams 2: a page sharing one n-gram is not contaminated, but its overlap is still counted."""
    from dedup.job import run_dedup

    texts, plan = planted
    inp, ids = _input(tmp_path, texts, plan)
    dc = _config(eval_sets, mode="annotate", min_ngrams=2)
    cfg = DedupJobConfig.from_dict({**STAGE_ONLY, "decontaminate": dc})
    out = tmp_path / "out"
    run_dedup(str(inp), str(out), cfg, spark=SparkOptions(spark.sparkContext.master, progress=False))
    docs = {r["id"]: r for r in pq.read_table(out / "docs").to_pylist()}
    assert set(docs) == set(ids)
    for i in ids:
        shared = _ref_hits(eval_sets, texts[i])
        assert docs[i]["contamination_ngrams"] == len(set().union(*shared.values()))
        assert docs[i]["contaminated_by"] == [n for n, g in shared.items() if len(g) >= 2]
        assert (docs[i]["contamination_ngrams"] > 0) == (i in plan)
    assert any(0 < d["contamination_ngrams"] < 2 for d in docs.values())  # the threshold left one out
    assert not pq.read_table(out / "removed_ids").num_rows


# -- configuration and bad input -----------------------------------------------------------------


def test_off_by_default_and_the_fingerprint_is_untouched(tmp_path, eval_sets):
    base = DedupJobConfig()
    assert "decontaminate" not in base.to_dict()
    assert DedupJobConfig.load(REPO_ROOT / "configs" / "dedup.yaml") == base
    unused = DedupJobConfig.from_dict({"decontaminate": {"ngram": 8, "mode": "annotate", "min_ngrams": 3}})
    assert unused.fingerprint() == base.fingerprint()
    passage = eval_sets["wikitext"]["passages"][3]
    path = tmp_path / "set.txt"
    path.write_text(passage)
    on = DedupJobConfig.from_dict({"decontaminate": {"sets": [{"name": "mine", "paths": str(path)}]}})
    before = on.fingerprint()
    assert on.decontaminate.sets[0].paths == (str(path),) and before != base.fingerprint()
    path.write_text(passage.upper())  # the same name, other content: another output
    assert on.fingerprint() != before


@pytest.mark.parametrize(
    ("entry", "needle"),
    [
        (
            {"name": "x", "paths": ["/no/such/eval.jsonl"]},
            r"decontaminate\.sets\[0\]: x: paths\[0\]: no such file '/no/such/eval\.jsonl'",
        ),
        ({"name": "x", "paths": ["/no/such/*.jsonl"]}, r"no such file '/no/such/\*\.jsonl'"),
        ({"name": "x y", "paths": ["a"]}, "letters, digits"),
        ({"name": "x", "paths": [], "format": "jsonl"}, "at least one file"),
        ({"name": "x", "paths": ["a"], "format": "csv"}, "format must be one of"),
    ],
)
def test_bad_sets_are_refused_on_load_naming_them(entry, needle):
    with pytest.raises(ConfigError, match=needle):
        DedupJobConfig.from_dict({"decontaminate": {"sets": [entry]}})


def test_missing_eval_set_exits_2_before_spark_starts(tmp_path, capsys):
    from dedup.cli import main

    inp = tmp_path / "in"
    inp.mkdir()
    pq.write_table(pa.table({"id": ["a"], "text": ["some text"]}), inp / "a.parquet")
    missing = tmp_path / "held-out" / "mmlu.jsonl"
    argv = ["run", "--input", str(inp), "--output", str(tmp_path / "out")]
    argv += ["--set", f"decontaminate.sets=[{{name: mmlu, paths: [{missing}]}}]", "--no-progress"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert str(missing) in err and "decontaminate.sets[0]" in err
    assert not (tmp_path / "out").exists()


def test_unreadable_records_and_empty_sets_are_named(tmp_path, data_dir):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\n{"text": broken\n')
    with pytest.raises(InputError, match=r"bad\.jsonl:2: not valid JSON"):
        build_index(DecontaminateConfig(sets=[{"name": "bad", "paths": str(bad)}]))
    wiki = str(data_dir / "quality" / "enwiki_sample_articles.jsonl")
    with pytest.raises(
        InputError, match=r"set q: no n-gram .*\(105 records, 105 without a 'question' text\)"
    ):
        build_index(DecontaminateConfig(sets=[{"name": "q", "paths": wiki, "text_field": "question"}]))


def test_a_set_on_s3_is_the_same_set(s3_bucket, data_dir):
    """An `s3://` glob reads the same passages as the local file (through core.storage)."""
    local = data_dir / "quality" / "wikitext-2-valid.txt"
    uri = f"{s3_bucket}/evals/wikitext-2-valid.txt"
    open_store(uri).upload(local, uri)
    remote = build_index(DecontaminateConfig(sets=[{"name": "w", "paths": f"{s3_bucket}/evals/*.txt"}]))
    here = build_index(DecontaminateConfig(sets=[{"name": "w", "paths": str(local)}]))
    assert remote.sets[0].files == [uri]
    assert (remote.table.keys == here.table.keys).all() and remote.sets[0].passages == here.sets[0].passages


# -- a setting that removes everything -----------------------------------------------------------


def test_allow_remove_all_is_not_part_of_the_fingerprint(eval_sets):
    """It permits, it decides nothing: the folder of a refused run accepts the rerun that sets it."""
    on = DedupJobConfig.from_dict({"decontaminate": _config(eval_sets)})
    allowed = DedupJobConfig.from_dict({"decontaminate": _config(eval_sets, allow_remove_all=True)})
    assert allowed.fingerprint() == on.fingerprint()
    assert DecontaminateConfig().allow_remove_all is False


@pytest.mark.spark
def test_a_setting_that_removes_nearly_everything_is_refused_then_resumed_when_allowed(
    spark, tmp_path, pages, eval_sets
):
    """The issue's case: `ngram: 1, skip_trivial: false` matches a word of every page. 200 real pages
    that share a word with the sets and one written page that shares none: 200 of 201 (99.5%) removed
    is refused, naming the settings, before anything is published; the rerun that allows it resumes
    from the decontaminate stage in the same folder."""
    from core.removal import RemovedTooMuch
    from dedup.job import run_dedup

    vocab = set().union(*(set(_words(p)) for s in eval_sets.values() for p in s["passages"]))
    shared = sorted(i for i, (_, t) in pages.items() if set(_words(t)) & vocab)[:200]
    assert len(shared) == 200
    ids = [*shared, "clean"]
    texts = [*(pages[i][1] for i in shared), "Qwxz vrrplt zzyzx, qqq jjjk xkcdq."]
    assert not set(_words(texts[-1])) & vocab
    inp = tmp_path / "in"
    inp.mkdir()
    pq.write_table(pa.table({"id": ids, "text": texts}), inp / "docs.parquet")
    dc = _config(eval_sets, ngram=1, skip_trivial=False)
    out = tmp_path / "out"
    opts = SparkOptions(spark.sparkContext.master, progress=False)
    with pytest.raises(RemovedTooMuch) as e:
        run_dedup(
            str(inp), str(out), DedupJobConfig.from_dict({**STAGE_ONLY, "decontaminate": dc}), spark=opts
        )
    msg = str(e.value)
    assert "decontaminate removed 200 of 201 (99.5%) documents" in msg
    assert "decontaminate.ngram (1), decontaminate.skip_trivial (false)" in msg
    assert "set decontaminate.allow_remove_all: true" in msg and "Nothing is published" in msg
    assert isinstance(e.value, ConfigError)  # `error: ...`, exit 2
    assert (out / "stages" / "decontaminate" / "report.json").is_file()  # named in the message
    assert not (out / "docs").exists() and not (out / "_SUCCESS").exists()

    allowed = DedupJobConfig.from_dict({**STAGE_ONLY, "decontaminate": {**dc, "allow_remove_all": True}})
    res = run_dedup(str(inp), str(out), allowed, spark=opts)
    assert {"prepare", "ids"} <= set(res.resumed) and "decontaminate" not in res.resumed
    assert pq.read_table(out / "docs").column("id").to_pylist() == ["clean"] and res.docs_out == 1
