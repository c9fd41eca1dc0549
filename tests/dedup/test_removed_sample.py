"""dedup's removed/ sample (dedup/removed.py): bounded per (stage, reason, lang, size band), every
reason present, and each row's evidence (cluster id and size, shingle Jaccard against the document
kept) checked against an independent computation. (The same sample on a rerun: tests/dedup/test_job.py.)

One dedup run over real documents with planted groups of every size band (near-duplicate clusters of
2, 4, 8 and 24; exact groups of 2 and 7; URL recaptures; a duplicate id; an empty text; a Chinese
pair as a second language), with 3 rows per cell, so most cells are cut and a few are not; and a
second, small run with `cluster.keep: drop_cluster`, whose removals have no kept partner.
"""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from core.spark import SparkOptions
from curation.schema import sample_key
from dedup.config import DedupJobConfig
from dedup.job import run_dedup
from dedup.normalize import normalize_text
from dedup.removed import COLUMNS, _bottom_k_fn
from testkit.neardup import edit, real_documents, vocabulary
from tests.support.dedup_corpus import doc_row

K = 3
CFG = {"output": {"partitions": 2, "removed_sample_per_reason": K}, "lines": {"enabled": False}}
NEAR_SIZES = (2, 2, 2, 2, 4, 4, 4, 8, 8, 24)
EXACT_SIZES = (2, 2, 2, 7)


def _band(size: int | None) -> str | None:
    if size is None:
        return None
    return "2" if size == 2 else "3-5" if size <= 5 else "6-20" if size <= 20 else "21+"


@pytest.fixture(scope="module")
def planted(data_dir, tmp_path_factory):
    docs = [d for d in real_documents(data_dir) if 300 <= len(d.split()) <= 900]
    rng = random.Random(46)
    vocab = vocabulary(docs)
    rows: list[dict] = []
    plan: dict = {"near": [], "exact": [], "url": []}
    pages = iter(docs)
    for size in NEAR_SIZES:  # the original is the best: it is kept, the edited copies go
        page = next(pages)
        group = [len(rows)]
        rows.append(doc_row(len(rows), page, quality=0.9))
        for _ in range(size - 1):
            group.append(len(rows))
            rows.append(doc_row(len(rows), edit(page, 0.004, rng, vocab), quality=0.3))
        plan["near"].append(group)
    for size in EXACT_SIZES:  # same text up to case and punctuation
        page = next(pages)
        variants = [page, page.upper(), page.replace(".", " ."), page.replace(",", ";")]
        group = []
        for j in range(size):
            group.append(len(rows))
            rows.append(doc_row(len(rows), variants[j % len(variants)], quality=0.9 if j == 0 else 0.5))
        plan["exact"].append(group)
    for _ in range(3):  # the same URL captured again a month later, its text half rewritten
        page, url = next(pages), f"https://example.org/recaptured/{len(rows)}"
        rows.append(doc_row(len(rows), page, url=url))
        rows.append(doc_row(len(rows), edit(page, 0.5, rng, vocab), url=url, day=30))
        plan["url"].append((len(rows) - 2, len(rows) - 1))
    page = next(pages)
    rows.append(doc_row(len(rows), page))
    rows.append(doc_row(len(rows), page[:400], id_=rows[-1]["id"]))  # duplicate id, shorter text
    rows.append(doc_row(len(rows), ""))
    tsv = (data_dir / "langid" / "tatoeba_long.tsv").read_text().splitlines()[1:]
    zh = "".join(line.split("\t")[3] for line in tsv if line.split("\t")[0] in ("zh", "zh-Hant"))
    sents = zh.split("。")
    for text in (zh, "。".join(sents[:-2] + sents[-1:])):
        rows.append({**doc_row(len(rows), text), "lang": "zh"})
    folder = tmp_path_factory.mktemp("removed-input")
    table = pa.Table.from_pylist(rows)
    pq.write_table(table.slice(0, len(rows) // 2), folder / "part-0.parquet")
    pq.write_table(table.slice(len(rows) // 2), folder / "part-1.parquet")
    return folder, rows, plan


@pytest.fixture(scope="module")
def run(spark, planted, tmp_path_factory):
    folder, rows, plan = planted
    out = tmp_path_factory.mktemp("removed-out") / "run"
    cfg = DedupJobConfig.from_dict(CFG)
    run_dedup(str(folder), str(out), cfg, spark=SparkOptions(progress=False))
    # The sample's sameness on a rerun is checked elsewhere: resumed after a crash, which draws it again, by
    # tests/dedup/test_job.py::test_rerun_is_deterministic_and_resumes; a run of its own (on the isolated
    # cluster) by tests/isolated/test_dedup_s3.py. A second run here only repeated them.
    return out, pq.read_table(out / "removed"), rows, plan


def _population(out, rows) -> list[dict]:
    """Every removal with its cell, computed here from removed_ids/, docs/ and the input alone."""
    kept = {r["id"]: r for r in pq.read_table(out / "docs").to_pylist()}
    lang = {r["id"]: r["lang"] for r in rows}
    decisions = pq.read_table(out / "removed_ids").to_pylist()
    per_partner = Counter((d["stage"], d["partner_id"]) for d in decisions if d["partner_id"])
    for d in decisions:
        d["lang"] = lang[d["id"]]
        if d["stage"] == "cluster":
            d["cluster_size"] = kept[d["partner_id"]]["dup_cluster_size"]
        elif d["stage"] in ("exact", "url"):  # no group here was merged into by an earlier stage
            d["cluster_size"] = 1 + per_partner[(d["stage"], d["partner_id"])]
        else:
            d["cluster_size"] = None
        d["size_band"] = _band(d["cluster_size"])
    return decisions


def _cell(r: dict) -> tuple:
    return (r["stage"], r["reason"], r["lang"], r["size_band"])


@pytest.mark.spark
def test_sample_is_the_k_smallest_keys_of_every_cell(run):
    out, _, rows, _ = run
    sample = pq.read_table(out / "removed")
    assert sample.column_names == list(COLUMNS)
    got = defaultdict(list)
    for r in sample.to_pylist():
        assert r["sample_key"] == sample_key(r["id"])
        got[_cell(r)].append(r["id"])
    want = defaultdict(list)
    for d in _population(out, rows):
        want[_cell(d)].append(d["id"])
    for cell, ids in want.items():
        want[cell] = sorted(ids, key=lambda i: (sample_key(i), i))[:K]
    assert {c: sorted(v) for c, v in got.items()} == {c: sorted(v) for c, v in want.items()}
    sizes = Counter(_cell(d) for d in _population(out, rows))
    # the planted layout: every band of near duplicates, cut to K where larger, and small cells whole
    near = {c[3]: n for c, n in sizes.items() if c[:3] == ("cluster", "near_duplicate", "en")}
    # (LSH may miss a planted pair; the bands of 3 and more hold more than K either way)
    assert set(near) == {"2", "3-5", "6-20", "21+"} and min(near.values()) >= K
    assert Counter(c[3] for c in got if c[:2] == ("cluster", "near_duplicate")) == {
        "2": 2,  # en and zh
        "3-5": 1,
        "6-20": 1,
        "21+": 1,
    }
    assert all(len(v) == min(K, sizes[c]) for c, v in got.items())
    reasons = {d["reason"] for d in _population(out, rows)}
    assert reasons == {
        "near_duplicate",
        "exact_duplicate",
        "url_duplicate",
        "duplicate_id",
        "empty_text",
    }
    assert {r["reason"] for r in sample.to_pylist()} == reasons


def _shingles(text: str, n: int = 5) -> set[tuple[str, ...]]:
    """Word 5-grams of the normalized text as tuples of strings: no hashing, unlike the job."""
    words = normalize_text(text).split(" ")
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def _jaccard(a: str, b: str) -> float:
    sa, sb = _shingles(a), _shingles(b)
    return len(sa & sb) / len(sa | sb)


@pytest.mark.spark
def test_evidence_agrees_with_an_independent_computation(run):
    """The recorded Jaccard is the exact one over shingle strings (64-bit shingle hashes collide with
    probability ~1e-13 here, so 1e-12 is float rounding only); datasketch's 128-permutation MinHash
    estimates it within 5 standard deviations (sqrt(J(1-J)/128)) plus one permutation's step."""
    from datasketch import MinHash

    out, _, rows, _plan = run
    text = {r["id"]: r["text"] for r in rows}
    kept = {r["id"]: r for r in pq.read_table(out / "docs").to_pylist()}
    sample = pq.read_table(out / "removed").to_pylist()
    seen = Counter()
    for r in sample:
        seen[r["reason"]] += 1
        if r["reason"] == "empty_text":
            assert r["metric"] is r["value"] is r["partner_id"] is None
            continue
        partner = kept[r["partner_id"]]  # every partner here is a kept document
        assert r["metric"] == "shingle_jaccard"
        if r["reason"] == "duplicate_id":  # the partner is the row kept under the same id
            assert r["id"] == r["partner_id"] and text[r["id"]] != partner["text"]
        j = _jaccard(text[r["id"]], partner["text"])  # the removed row's own text (the last of its id)
        assert abs(r["value"] - j) < 1e-12, r
        if r["reason"] in ("exact_duplicate",):
            assert r["value"] == 1.0 and r["threshold"] is None
        elif r["reason"] in ("url_duplicate", "duplicate_id"):
            assert r["value"] < 0.8 and r["threshold"] is None and r["cluster_id"] is None
        else:
            assert r["stage"] == "cluster" and r["threshold"] == 0.8
            assert r["op"] == (">=" if r["value"] >= 0.8 else "<")
            assert r["cluster_id"] == partner["dup_cluster"]
            assert r["cluster_size"] == partner["dup_cluster_size"]
            m = [MinHash(num_perm=128, seed=1) for _ in range(2)]
            for mh, t in zip(m, (text[r["id"]], partner["text"])):
                mh.update_batch([" ".join(s).encode() for s in _shingles(t)])
            tol = 5 * math.sqrt(j * (1 - j) / 128) + 1 / 128
            assert abs(m[0].jaccard(m[1]) - r["value"]) <= tol
    # the cluster sizes are the planted ones
    sizes = {r["cluster_size"] for r in sample if r["reason"] == "near_duplicate"}
    assert sizes == set(NEAR_SIZES)
    assert seen["near_duplicate"] == 4 * K + 1  # 4 bands in English cut to K, and the Chinese pair


def test_bottom_k_per_partition_keeps_the_smallest_keys_however_batched():
    """The combiner alone (no Spark): whatever the batch sizes, a partition yields per cell the K
    smallest (sample_key, id, _row), ties of one id broken by _row."""
    names = ["_row", "id", "stage", "reason", "partner_id", "lang", "cluster_id", "cluster_size"]
    names += ["size_band", "sample_key"]
    rows = [
        {
            "_row": i,
            "id": f"d{i % 40}",  # every id twice: ties of the key
            "stage": "cluster",
            "reason": "near_duplicate",
            "partner_id": "p",
            "lang": ("en", "zh", None)[i % 3],
            "cluster_id": "c",
            "cluster_size": 4,
            "size_band": "3-5",
        }
        for i in range(80)
    ]
    table = pa.Table.from_pylist(rows)
    want = defaultdict(list)
    for r in sorted(rows, key=lambda r: (sample_key(r["id"]), r["id"], r["_row"])):
        want[r["lang"]].append(r["_row"])
    for size in (1, 7, 80):
        (out,) = list(_bottom_k_fn(K, names)(table.to_batches(max_chunksize=size)))
        got = defaultdict(list)
        for r in out.to_pylist():
            assert r["sample_key"] == sample_key(r["id"])
            got[r["lang"]].append(r["_row"])
        assert dict(got) == {lang: v[:K] for lang, v in want.items()}
    (empty,) = list(_bottom_k_fn(0, names)(table.to_batches()))
    assert empty.num_rows == 0


@pytest.mark.spark
def test_drop_cluster_rows_name_their_cluster_and_its_size(spark, data_dir, tmp_path):
    """keep: drop_cluster removes every member (partner_id = the cluster's id, itself removed): each
    row's cluster_id is that id, cluster_size the planted group's size, and the member that is the
    cluster's id has no similarity to itself."""
    docs = [d for d in real_documents(data_dir) if 300 <= len(d.split()) <= 900]
    rng = random.Random(7)
    vocab = vocabulary(docs)
    rows, groups = [], []
    for page, size in zip(docs, (2, 4, 7)):
        groups.append(
            [doc_row(len(rows) + j, edit(page, 0.004, rng, vocab) if j else page) for j in range(size)]
        )
        rows += groups[-1]
    rows.append(doc_row(len(rows), docs[3]))  # a page with no copy: kept
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "in.parquet")
    cfg = {**CFG, "cluster": {"keep": "drop_cluster"}}
    run_dedup(
        str(tmp_path / "in.parquet"),
        str(tmp_path / "out"),
        DedupJobConfig.from_dict(cfg),
        spark=SparkOptions(progress=False),
    )
    sample = pq.read_table(tmp_path / "out" / "removed").to_pylist()
    text = {r["id"]: r["text"] for r in rows}
    for group in groups:
        ids = {r["id"] for r in group}
        got = [r for r in sample if r["id"] in ids]
        assert len(got) == min(K, len(group))
        for r in got:
            assert r["reason"] == "near_duplicate_cluster" and r["partner_id"] in ids
            assert r["cluster_id"] == r["partner_id"] and r["cluster_size"] == len(group)
            assert r["size_band"] == _band(len(group))
            if r["id"] == r["partner_id"]:
                assert r["metric"] is r["value"] is None
            else:
                assert abs(r["value"] - _jaccard(text[r["id"]], text[r["partner_id"]])) < 1e-12
