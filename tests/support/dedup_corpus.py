"""The dedup job test's corpus and its first run, shared by the job's tests and the isolated tier.

`corpus`: real documents (testkit.neardup.real_documents) with planted exact, URL, near and
boilerplate-line duplicates and bad rows, so every stage of dedup decides something; `first_run`: the
job over it on local folders with `CFG`. Session-scoped, so tests/isolated compares its object-store
run on the isolated cluster against this very run instead of building and running both again.
Registered as a plugin by tests/conftest.py.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from core.spark import SparkOptions
from dedup.config import DedupJobConfig
from dedup.job import run_dedup
from testkit.neardup import edit, real_documents, vocabulary

__all__ = ["CFG", "T0", "corpus", "doc_row", "first_run"]

T0 = datetime(2024, 5, 1, tzinfo=UTC)
CFG = {"output": {"partitions": 2}, "lines": {"max_docs": 10, "min_words": 50}}


def doc_row(i: int, text: str | None, url: str | None = None, quality: float = 0.5, day: int = 0, id_=None):
    return {
        "id": id_ or f"doc-{i:05d}",
        "url": url or f"https://example.org/page/{i}",
        "text": text,
        "crawl": "CC-MAIN-2024-22",
        "fetch_time": T0 + timedelta(days=day),
        "lang": "en",
        "quality": quality,
    }


@pytest.fixture(scope="session")
def corpus(tmp_path_factory, data_dir):
    """Rows plus what the test planted in them (which ids should go, and why)."""
    docs = real_documents(data_dir)
    rng = random.Random(11)
    vocab = vocabulary(docs)
    sized = [d for d in docs if 300 <= len(d.split()) <= 900]
    base = sized[:40]
    rows, plan = [], {"exact": [], "url": [], "near": [], "boiler": [], "too_short": None}
    for i, t in enumerate(base):
        rows.append(doc_row(i, t, quality=0.5))
    n = len(rows)
    # exact: same text up to case and punctuation; the copy has the higher quality and is kept.
    for i in range(0, 4):
        copy = base[i].upper().replace(".", " .").replace(",", ";")
        rows.append(doc_row(n, copy, quality=0.9))
        plan["exact"].append((f"doc-{i:05d}", f"doc-{n:05d}"))
        n += 1
    # url: the same page captured again later with different text; the later capture is kept.
    for i in range(4, 7):
        url = f"HTTP://www.Example.org/page/{i}/?utm_source=x#top"
        rows.append(doc_row(n, edit(base[i], 0.5, rng, vocab), url=url, day=30))
        plan["url"].append((f"doc-{i:05d}", f"doc-{n:05d}"))
        n += 1
    # near: 3 lightly edited copies each, the original has the highest quality.
    for i in range(7, 12):
        group = [f"doc-{i:05d}"]
        for _ in range(3):
            rows.append(doc_row(n, edit(base[i], 0.004, rng, vocab), quality=0.3))
            group.append(f"doc-{n:05d}")
            n += 1
        rows[i]["quality"] = 0.95
        plan["near"].append(group)
    # boilerplate: two real lines appended to 15 distinct documents (> max_docs = 10).
    boiler = [base[-1].split("\n")[0][:200], " ".join(base[-2].split()[:25])]
    for i in range(12, 27):
        rows[i]["text"] = rows[i]["text"] + "\n" + "\n".join(boiler)
        plan["boiler"].append(f"doc-{i:05d}")
    # a document that is mostly boilerplate: too short once those lines go.
    rows.append(doc_row(n, " ".join(base[30].split()[:20]) + "\n" + "\n".join(boiler)))
    plan["too_short"] = f"doc-{n:05d}"
    n += 1
    # bad rows: empty, null, punctuation only, shorter than one shingle, a duplicate id.
    rows += [
        doc_row(n, ""),
        doc_row(n + 1, None),
        doc_row(n + 2, "!!! ... ???"),
        doc_row(n + 3, "four words only here"),
    ]
    plan["empty"] = [f"doc-{n:05d}", f"doc-{n + 1:05d}"]
    plan["no_words"] = f"doc-{n + 2:05d}"
    plan["short"] = f"doc-{n + 3:05d}"
    n += 4
    rows.append(doc_row(n, base[35][:500], id_="doc-00035"))  # same id as base[35], shorter text
    # no id: a real document not otherwise in the corpus, and a row with no text either (the text reason
    # comes first); both dropped by `ids`, neither reaches a later stage
    rows.append({**doc_row(n + 3, sized[40]), "id": None})
    rows.append({**doc_row(n + 4, ""), "id": None})
    # scripts without spaces: real Chinese sentences and a copy with one sentence dropped.
    tsv = (data_dir / "langid" / "tatoeba_long.tsv").read_text().splitlines()[1:]
    zh = "".join(line.split("\t")[3] for line in tsv if line.split("\t")[0] in ("zh", "zh-Hant"))
    zh_sents = zh.split("。")
    rows.append(doc_row(n + 1, zh))
    rows.append(doc_row(n + 2, "。".join(zh_sents[:-2] + zh_sents[-1:])))
    plan["zh"] = (f"doc-{n + 1:05d}", f"doc-{n + 2:05d}")
    folder = tmp_path_factory.mktemp("dedup-input")
    table = pa.Table.from_pylist(rows)
    pq.write_table(table.slice(0, len(rows) // 2), folder / "part-0.parquet")
    pq.write_table(table.slice(len(rows) // 2), folder / "part-1.parquet")
    return folder, rows, plan, boiler


@pytest.fixture(scope="session")
def first_run(spark, corpus, tmp_path_factory):
    folder, *_ = corpus
    out = tmp_path_factory.mktemp("dedup-out") / "run1"
    result = run_dedup(
        str(folder), str(out), DedupJobConfig.from_dict(CFG), spark=SparkOptions(progress=False)
    )
    return out, result
