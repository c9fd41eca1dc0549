"""The dedup job end to end on Spark, over a corpus of real documents with planted duplicates."""

from __future__ import annotations

import itertools
import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from core.errors import InputError, OutputConflict
from core.spark import SparkOptions
from dedup import job
from dedup.config import DedupJobConfig
from dedup.job import resolve_input, run_dedup
from dedup.minhash import MinHashConfig, MinHasher, estimate_jaccard, exact_jaccard, shingle_hashes
from dedup.normalize import normalize_text
from dedup.stages import Stage, StageContext
from dedup.stages.common import alive, decisions_of, reason_counts
from testkit.neardup import real_documents, vocabulary
from tests.support.dedup_corpus import CFG, doc_row


def _read(out: Path) -> list[dict]:
    return sorted(pq.read_table(out / "docs").to_pylist(), key=lambda r: r["id"])


@pytest.mark.spark
def test_every_document_is_accounted_for(first_run, corpus):
    out, result = first_run
    _, rows, _plan, _ = corpus
    kept = _read(out)
    removed = pq.read_table(out / "removed_ids").to_pylist()
    assert result.docs_in == len(rows)
    assert len(kept) + len(removed) == len(rows)
    reasons = {}
    for r in removed:
        reasons[r["reason"]] = reasons.get(r["reason"], 0) + 1
    assert reasons == {
        "empty_text": 3,  # the empty and null texts, and the row with neither id nor text
        "null_id": 1,
        "no_words": 1,
        "duplicate_id": 1,
        "exact_duplicate": 4,
        "url_duplicate": 3,
        "near_duplicate": 15 + 1,  # 5 groups of 4 keep 1 each, plus the Chinese pair
        "lines_too_short": 1,
    }
    stats = json.loads((out / "stats.json").read_text())
    funnel = {s["stage"]: s for s in stats["stages"]}
    assert sum(sum(s["drops"].values()) for s in funnel.values()) == len(removed)
    assert stats["counters"]["minhash_too_short"] >= 1
    assert (out / "_SUCCESS").exists()


@pytest.mark.spark
def test_keep_policies_and_partners(first_run, corpus):
    out, _ = first_run
    _, _, plan, _ = corpus
    kept = {r["id"]: r for r in _read(out)}
    removed = {r["id"]: r for r in pq.read_table(out / "removed_ids").to_pylist()}
    for orig, copy in plan["exact"]:  # higher quality wins
        assert copy in kept and removed[orig]["partner_id"] == copy
    for orig, later in plan["url"]:  # latest capture wins
        assert later in kept and removed[orig]["reason"] == "url_duplicate"
        assert removed[orig]["partner_id"] == later
    for group in plan["near"]:
        survivor = group[0]  # highest quality in its cluster
        assert survivor in kept
        assert kept[survivor]["dup_cluster_size"] == 4
        for other in group[1:]:
            assert removed[other]["reason"] == "near_duplicate"
            assert removed[other]["partner_id"] == survivor
    a, b = plan["zh"]
    assert (a in kept) != (b in kept)
    assert plan["short"] in kept  # too short to shingle: kept, only counted
    assert kept[plan["short"]]["dup_cluster_size"] == 1


@pytest.mark.spark
def test_exact_duplicates_count_in_cluster_size(first_run, corpus):
    out, _ = first_run
    _, _, plan, _ = corpus
    kept = {r["id"]: r for r in _read(out)}
    for _, copy in plan["exact"]:
        assert kept[copy]["dup_cluster_size"] == 2
        assert kept[copy]["dup_cluster"] == copy  # not in a MinHash cluster: its own id


@pytest.mark.spark
def test_boilerplate_lines_removed(first_run, corpus):
    out, _ = first_run
    _, rows, plan, boiler = corpus
    kept = {r["id"]: r for r in _read(out)}
    original = {r["id"]: r["text"] for r in rows}
    for doc_id in plan["boiler"]:
        if doc_id in kept:
            text = kept[doc_id]["text"]
            assert boiler[0] not in text and boiler[1] not in text
            assert text.split("\n")[0] == original[doc_id].split("\n")[0]
    removed = {r["id"]: r for r in pq.read_table(out / "removed_ids").to_pylist()}
    assert removed[plan["too_short"]]["reason"] == "lines_too_short"
    stats = json.loads((out / "stats.json").read_text())
    assert stats["counters"]["frequent_lines"] == 2


@pytest.mark.spark
def test_lines_max_fraction_raises_the_bar(listed_run, corpus):
    """max_fraction 0.9: a line must be in more than 90% of the surviving documents, so the boilerplate
    of the documents that carry it stays (max_docs 10 alone removes it, as the test above shows)."""
    out, _ = listed_run
    _, _, plan, boiler = corpus
    info = json.loads((out / "stages" / "lines.json").read_text())
    stats = json.loads((out / "stats.json").read_text())
    surviving = next(st["docs_out"] for st in stats["stages"] if st["stage"] == "cluster")
    assert info["max_docs"] == int(0.9 * surviving) > len(plan["boiler"]) + 1
    assert info["frequent_lines"] == 0
    kept = {r["id"]: r for r in _read(out)}
    assert plan["too_short"] in kept
    carriers = [d for d in plan["boiler"] if d in kept]
    assert len(carriers) > CFG["lines"]["max_docs"]  # without max_fraction these lines would go
    assert all(boiler[0] in kept[d]["text"] for d in carriers)


@pytest.mark.spark
def test_columns_added_and_input_columns_kept(first_run, corpus):
    out, _ = first_run
    folder, *_ = corpus
    in_cols = pq.read_schema(folder / "part-0.parquet").names
    out_cols = pq.read_schema(next((out / "docs").glob("*.parquet"))).names
    assert out_cols == [*in_cols, "dup_cluster", "dup_cluster_size"]
    sample = pq.read_table(out / "removed").to_pylist()
    assert {"id", "reason", "partner_id", "snippet"} <= set(sample[0])


@pytest.mark.spark
def test_rerun_is_deterministic_and_resumes(first_run, corpus, tmp_path):
    """A run crashed after minhash (a copy of first_run with the later markers and outputs gone) resumes
    there and ends with the same documents and removed/ sample. That a fresh run decides as first_run
    did is tests/isolated/test_dedup_s3.py's check too (another run of this corpus, on the isolated
    cluster and S3, through a lost worker and driver: the same documents, decisions and funnel), so
    this test no longer pays for a second whole run of its own."""
    out1, _ = first_run
    folder, *_ = corpus
    out2 = tmp_path / "run2"
    shutil.copytree(out1, out2)
    for name in ("cluster", "lines", "output"):
        (out2 / "stages" / f"{name}.json").unlink()
    for name in ("docs", "removed"):
        shutil.rmtree(out2 / name)
    again = run_dedup(
        str(folder), str(out2), DedupJobConfig.from_dict(CFG), spark=SparkOptions(progress=False)
    )
    assert again.resumed == ["prepare", "ids", "exact", "url", "minhash"]
    assert _read(out2) == _read(out1)
    # the output stage ran again and drew its removed/ sample again: the same rows
    assert pq.read_table(out2 / "removed").to_pylist() == pq.read_table(out1 / "removed").to_pylist()
    with pytest.raises(OutputConflict, match="lines"):
        run_dedup(str(folder), str(out2), DedupJobConfig.from_dict({**CFG, "lines": {"max_docs": 3}}))


def _chain(text: str, rng: random.Random, vocab: list[str]) -> tuple[str, str, str]:
    """A, B, C: B is A with words replaced at spaced positions, C is B with as many more replaced.

    Each replaced word breaks 5 shingles, so with k = 1.5% of the words J(A,B) = J(B,C) ~ 0.86 and
    J(A,C) ~ 0.74: a chain across the 0.8 threshold (the test checks the true values)."""
    words = text.split(" ")
    k = round(0.015 * len(words))
    b = list(words)
    for j in range(k):
        b[10 + 30 * j] = rng.choice(vocab)
    c = list(b)
    for j in range(k):
        c[25 + 30 * j] = rng.choice(vocab)
    return text, " ".join(b), " ".join(c)


@pytest.mark.spark
@pytest.mark.parametrize("verify", ["exact", "signature"])
def test_verified_removals_are_checked_against_the_kept_document(spark, data_dir, tmp_path, verify):
    """With `verify` on, a chain A-B-C (A~B, B~C, A not~ C) is one component, but C is far from the
    kept A: C must be kept (detached), B removed, and every removal pass the check against its partner."""
    docs = real_documents(data_dir)
    rng = random.Random(5)
    vocab = vocabulary(docs)
    mh = MinHashConfig(bands=32, rows=4, verify=verify)  # chains of J >= 0.7 surely collide
    hasher = MinHasher(mh)
    rows, chains = [], []
    for i, text in enumerate([d for d in docs if 600 <= len(d.split(" ")) <= 900][:12]):
        a, b, c = _chain(text, rng, vocab)
        ha, hb, hc = (shingle_hashes(normalize_text(t), mh.ngram) for t in (a, b, c))
        assert exact_jaccard(ha, hb) >= 0.8 and exact_jaccard(hb, hc) >= 0.8 > exact_jaccard(ha, hc)
        ids = [f"chain-{i}-{x}" for x in "abc"]
        for t, q, id_ in zip((a, b, c), (0.9, 0.5, 0.1), ids):  # quality makes A the one kept
            rows.append(doc_row(len(rows), t, quality=q, id_=id_))
        chains.append(ids)
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "chains.parquet")
    out = tmp_path / "out"
    cfg = DedupJobConfig.from_dict({**CFG, "minhash": mh.to_dict(), "lines": {"enabled": False}})
    run_dedup(str(tmp_path / "chains.parquet"), str(out), cfg, spark=SparkOptions(progress=False))
    kept = {r["id"]: r for r in _read(out)}
    removed = {r["id"]: r for r in pq.read_table(out / "removed_ids").to_pylist()}
    text = {r["id"]: r["text"] for r in rows}

    def jac(x: str, y: str) -> float:
        """What the job checks: the exact Jaccard, or the signatures' estimate of it."""
        if verify == "signature":
            return estimate_jaccard(*(hasher.text_signature(normalize_text(text[i])) for i in (x, y)))
        return exact_jaccard(*(shingle_hashes(normalize_text(text[i]), mh.ngram) for i in (x, y)))

    assert len(kept) + len(removed) == len(rows)
    for rid, r in removed.items():  # every removal is justified against the document kept
        assert r["reason"] == "near_duplicate" and jac(rid, r["partner_id"]) >= mh.threshold
    detached = [c for a, b, c in chains if a in kept and b in removed and c in kept]
    info = json.loads((out / "stages" / "cluster.json").read_text())
    assert detached and info["detached"] == len(detached)
    for c in detached:
        assert kept[c]["dup_cluster"] == c and kept[c]["dup_cluster_size"] == 1  # a cluster of its own
    for a, b, c in chains:
        if a in kept and b in removed:  # A stands for itself and the members it replaced, not C
            assert kept[a]["dup_cluster_size"] == 2 + (c in removed)


@pytest.mark.spark
@pytest.mark.slow
def test_giant_cluster(spark, data_dir, tmp_path):
    """10,000 near-copies of one page: one cluster, linear edges, nothing collected, no crash."""
    docs = real_documents(data_dir)
    page = next(d for d in docs if 400 <= len(d.split()) <= 600)
    rng = random.Random(3)
    vocab = vocabulary(docs)
    words = page.split(" ")
    rows = []
    for i in range(10_000):
        w = list(words)
        w.insert(rng.randrange(len(w)), rng.choice(vocab))  # one real word inserted: J ~ 0.99
        rows.append(doc_row(i, " ".join(w)))
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "giant.parquet")
    out = tmp_path / "out"
    cfg = DedupJobConfig.from_dict({**CFG, "lines": {"enabled": False}})
    result = run_dedup(str(tmp_path / "giant.parquet"), str(out), cfg, spark=SparkOptions(progress=False))
    kept = _read(out)
    assert len(kept) == 1
    assert kept[0]["dup_cluster_size"] == 10_000  # exact copies folded in count too
    info = json.loads((out / "stages" / "minhash.json").read_text())
    # Star edges per bucket: at most one edge per (document, band), never 10,000^2 / 2 pairs.
    assert info["edges"] <= info["bands"] * 10_000
    # One inserted word changes ~1% of shingles, so a 13-row band survives in ~88% of copies
    # (fewer after exact copies are gone): the largest bucket holds thousands of documents.
    assert info["largest_bucket"] > 5_000
    removed = pq.read_table(out / "removed_ids").to_pylist()
    assert len(removed) == 9_999
    assert result.docs_out == 1


def test_bad_input_is_refused_before_spark(tmp_path):
    with pytest.raises(InputError, match="not found"):
        resolve_input(str(tmp_path / "nope"))
    with pytest.raises(InputError, match="no Parquet"):
        resolve_input(str(tmp_path))
    pq.write_table(pa.table({"id": ["a"], "body": ["x"]}), tmp_path / "x.parquet")
    with pytest.raises(InputError, match="no `text` column"):
        resolve_input(str(tmp_path))
    (tmp_path / "x.parquet").write_bytes(b"not parquet")
    with pytest.raises(InputError, match="not a readable Parquet"):
        resolve_input(str(tmp_path))


def test_cli_exit_code_2_on_bad_input_and_config(tmp_path):
    cmd = [
        sys.executable,
        "-m",
        "dedup",
        "run",
        "--input",
        str(tmp_path / "nope"),
        "--output",
        str(tmp_path / "o"),
    ]
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=Path(__file__).parents[2])
    assert p.returncode == 2 and "input not found" in p.stderr
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("minhash:\n  threshold: 2\n")
    pq.write_table(pa.table({"id": ["a"], "text": ["x"]}), tmp_path / "x.parquet")
    cmd = [sys.executable, "-m", "dedup", "run", "--input", str(tmp_path), "--output", str(tmp_path / "o")]
    p = subprocess.run(
        [*cmd, "--config", str(cfg)], capture_output=True, text=True, cwd=Path(__file__).parents[2]
    )
    assert p.returncode == 2 and "minhash.threshold" in p.stderr


class _DropPlanted(Stage):
    """A dedup method added by a test: one Stage and one entry in the list, nothing else."""

    name = "planted"
    removes = True
    funnel_row = "planted"
    counters = ("planted_seen",)

    def run(self, ctx: StageContext) -> dict:
        from pyspark.sql import functions as F

        gone = alive(ctx, ctx.keep_cols).where(F.col("id").isin(*PLANTED))
        ctx.write(decisions_of(gone, self.name, F.lit("planted_reason")), f"{self.name}/removed")
        return {"removed": reason_counts(ctx.decisions([self.name])), "planted_seen": len(PLANTED)}


PLANTED = ("doc-00020", "doc-00021", "doc-00022")


@pytest.fixture(scope="module")
def listed_run(spark, corpus, tmp_path_factory):
    """One run of the job test's corpus for two tests: url off by config, a stage of the test's own
    (_DropPlanted) inserted before minhash, and lines.max_fraction 0.9. Each test reads only what its
    setting decides (test_the_stage_list_drives_markers_and_funnel; test_lines_max_fraction_raises_the_bar):
    the planted stage removes three of the 15 boilerplate carriers, still more than max_docs."""
    folder, *_ = corpus
    stages = list(job.STAGES)
    stages.insert([s.name for s in stages].index("minhash"), _DropPlanted())
    out = tmp_path_factory.mktemp("dedup-listed") / "listed"
    cfg = {**CFG, "url": {"enabled": False}, "lines": {**CFG["lines"], "max_fraction": 0.9}}
    with pytest.MonkeyPatch.context() as m:
        m.setattr(job, "STAGES", tuple(stages))
        result = run_dedup(
            str(folder), str(out), DedupJobConfig.from_dict(cfg), spark=SparkOptions(progress=False)
        )
    return out, result


@pytest.mark.spark
def test_the_stage_list_drives_markers_and_funnel(listed_run, corpus):
    """url off by config: no url marker, folder or funnel row; a stage added to the list: its own
    marker, funnel row, counter and decisions, with the rows before and after it chained."""
    _, rows, plan, _ = corpus
    out, result = listed_run
    markers = sorted(p.stem for p in (out / "stages").glob("*.json"))
    assert markers == sorted(["prepare", "ids", "exact", "planted", "minhash", "cluster", "lines", "output"])
    assert not (out / "stages" / "url").exists()
    stats = json.loads((out / "stats.json").read_text())
    funnel = stats["stages"]
    assert [s["stage"] for s in funnel] == ["ids", "exact", "planted", "cluster", "lines"]
    assert funnel[0]["docs_in"] == len(rows) and funnel[-1]["docs_out"] == result.docs_out
    for before, after in itertools.pairwise(funnel):
        assert after["docs_in"] == before["docs_out"] and after["bytes_in"] == before["bytes_out"]
    planted = next(s for s in funnel if s["stage"] == "planted")
    assert planted["drops"] == {"planted_reason": len(PLANTED)}
    assert stats["counters"]["planted_seen"] == len(PLANTED)
    assert sorted(stats["stage_info"]) == markers  # what ran or resumed, and nothing else
    removed = {r["id"]: r["reason"] for r in pq.read_table(out / "removed_ids").to_pylist()}
    assert all(removed[i] == "planted_reason" for i in PLANTED)
    assert "url_duplicate" not in removed.values()
    kept = {r["id"] for r in _read(out)}
    assert not kept & set(PLANTED)
    assert all(orig in kept and later in kept for orig, later in plan["url"])  # no URL dedup: both stay


@pytest.mark.spark
def test_null_id_is_a_counted_drop(first_run, corpus):
    """The corpus's real document without an id, and its row with neither id nor text: counted drops of
    `ids` (null_id; empty_text, the text reason first), and no document kept has a null id or cluster."""
    out, _ = first_run
    _, rows, _, _ = corpus
    kept = pq.read_table(out / "docs").to_pylist()
    assert all(r["id"] is not None and r["dup_cluster"] is not None for r in kept)
    removed = pq.read_table(out / "removed_ids").to_pylist()
    no_id = sorted(r["reason"] for r in removed if r["id"] is None)
    assert no_id == ["empty_text", "null_id"] and sum(r["id"] is None for r in rows) == 2
    funnel = {s["stage"]: s for s in json.loads((out / "stats.json").read_text())["stages"]}
    assert funnel["ids"]["drops"]["null_id"] == 1
