"""One file per extension: an extractor, an annotator, a dedup stage and a scorer of a user's own.

Each test writes its extension as a module in a temporary folder outside the project, names it in
the config (or on the command line) by import path, and runs the real job over real data: extract on
a shared WARC, dedup and score on real documents. The module reaches Spark's Python workers as a
user's would on a cluster: shipped with the job (`SparkContext.addPyFile`), never installed.
"""

from __future__ import annotations

import json
import textwrap
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from core.spark import SparkOptions
from testkit.neardup import real_documents

pytestmark = pytest.mark.spark


def _user_module(tmp_path: Path, spark, monkeypatch, source: str) -> str:
    """Write `source` as a new module outside the project, importable here and on the executors."""
    name = f"user_ext_{uuid.uuid4().hex[:8]}"
    folder = tmp_path / "user_code"
    folder.mkdir(exist_ok=True)
    path = folder / f"{name}.py"
    path.write_text(textwrap.dedent(source))
    monkeypatch.syspath_prepend(str(folder))
    spark.sparkContext.addPyFile(str(path))
    return name


EXTRACTOR = """
    import re

    import pyarrow as pa

    from core.stage import DocumentStage, Drop


    class TitleExtractor(DocumentStage):
        \"\"\"The page's <title> as its text, after a marker.\"\"\"

        def __init__(self, marker: str) -> None:
            self.marker = marker

        def process(self, doc):
            m = re.search(r"<title[^>]*>(.*?)</title>", doc.html or "", re.S | re.I)
            if m is None or not m.group(1).strip():
                return Drop("no_title")
            doc.text = f"{self.marker} {' '.join(m.group(1).split())}"
            doc.metadata["title"] = None
            return doc


    class WordCount(DocumentStage):
        name = "word_count"
        columns = {"n_words": pa.int64()}

        def process(self, doc):
            doc.metadata["n_words"] = len(doc.text.split())
            return doc
"""


def test_a_user_extractor_and_annotator_run_in_the_extract_job(spark, tmp_path, monkeypatch, warc_dir):
    from curation.config import ExtractJobConfig
    from curation.job import run_extract

    mod = _user_module(tmp_path, spark, monkeypatch, EXTRACTOR)
    cfg = ExtractJobConfig.from_dict(
        {
            "extract": {
                "extractors": [{"class": f"{mod}:TitleExtractor", "marker": "MINE"}],
                "cascade": False,
            },
            "langid": {"languages": [], "threshold": 0.0},  # a title is short: keep every language
            "filters": {
                k: None for k in ("gopher_repetition", "gopher_quality", "c4_quality", "fineweb_quality")
            },
            "annotators": [f"{mod}.WordCount"],
        }
    )
    out = tmp_path / "extract"
    warc = warc_dir / "cc-main-2020-34-sample.warc.gz"
    res = run_extract(
        [str(warc)], str(out), cfg, spark=SparkOptions(spark.sparkContext.master, progress=False)
    )
    assert res.ok, res
    docs = pq.read_table(out / "docs").to_pylist()
    assert len(docs) > 10
    assert all(d["text"].startswith("MINE ") for d in docs)  # the user's extractor made every text
    assert all(d["n_words"] == len(d["text"].split()) for d in docs)  # the annotator's column
    stats = json.loads((out / "stats.json").read_text())
    rows = {s["stage"]: s for s in stats["stages"]}
    assert list(rows)[-2:] == ["word_count", "write"]
    assert rows["word_count"]["docs_out"] == len(docs)


DEDUP_STAGE = """
    from functools import partial

    import pyarrow as pa
    from pyspark.sql import functions as F

    from dedup.stages import Feature, Stage
    from dedup.stages.common import alive, decisions_of, reason_counts


    def _has_word(word, docs):
        hits = [word in (t or "").lower().split() for t in docs.texts]
        return {"_has_word": pa.array(hits, pa.bool_())}


    class DropWord(Stage):
        \"\"\"Removes every document with `word`: a dedup method of one file, named in the config.\"\"\"

        name = "drop_word"
        removes = True
        funnel_row = "drop_word"
        counters = ("word_docs",)

        def __init__(self, word: str) -> None:
            self.word = word

        def features(self, cfg):
            return (Feature("_has_word boolean", lambda word=self.word: partial(_has_word, word)),)

        def run(self, ctx):
            hit = alive(ctx, ["_row", "id", "_bytes", "_has_word"]).where(F.col("_has_word"))
            ctx.write(decisions_of(hit, self.name, F.lit("has_word")), f"{self.name}/removed")
            counts = reason_counts(ctx.decisions([self.name]))
            return {"removed": counts, "word_docs": counts.get("has_word", {}).get("docs", 0)}
"""


def test_a_user_dedup_stage_runs_in_the_dedup_job(spark, tmp_path, monkeypatch, data_dir):
    from dedup.config import DedupJobConfig
    from dedup.job import run_dedup

    mod = _user_module(tmp_path, spark, monkeypatch, DEDUP_STAGE)
    texts = real_documents(data_dir)[:200]
    word = "city"
    expected = sum(word in t.lower().split() for t in texts)
    assert 0 < expected < len(texts)
    inp = tmp_path / "in"
    inp.mkdir()
    ids = [f"doc-{i:04d}" for i in range(len(texts))]
    pq.write_table(pa.table({"id": ids, "text": texts}), inp / "docs.parquet")
    cfg = DedupJobConfig.from_dict(
        {
            # the other methods off, so that what the stage removes is exactly what has the word
            "exact": {"enabled": False},
            "url": {"enabled": False},
            "cluster": {"enabled": False},
            "lines": {"enabled": False},
            "output": {"partitions": 2},
            "stages": [{"class": f"{mod}:DropWord", "word": word}],
        }
    )
    out = tmp_path / "dedup"
    res = run_dedup(str(inp), str(out), cfg, spark=SparkOptions(spark.sparkContext.master, progress=False))
    stats = json.loads((out / "stats.json").read_text())
    row = next(s for s in stats["stages"] if s["stage"] == "drop_word")
    assert row["drops"] == {"has_word": expected}
    assert stats["counters"]["word_docs"] == expected
    kept = pq.read_table(out / "docs").column("text").to_pylist()
    assert res.docs_out == len(kept) == len(texts) - expected
    assert not any(word in t.lower().split() for t in kept)


SCORER = """
    from pathlib import Path

    import numpy as np

    from classifiers.scorer import Scorer


    class WordScorer(Scorer):
        \"\"\"`words` = number of words x the factor in DIR/factor.txt x option `scale`.\"\"\"

        kind = "words"

        def __init__(self, factor: float) -> None:
            self.factor = factor

        @property
        def columns(self):
            return ("words",)

        def score(self, texts, langs):
            return {"words": np.array([np.nan if t is None else len(t.split()) * self.factor for t in texts],
                                      dtype=np.float32)}

        @classmethod
        def describe(cls, model, options):
            return {"factor": cls._factor(model, options)}

        @classmethod
        def load(cls, model, options):
            return cls(cls._factor(model, options))

        @staticmethod
        def _factor(model, options):
            return float((Path(model) / "factor.txt").read_text()) * float(options.get("scale", 1))
"""


def test_a_user_scorer_runs_in_the_score_command(spark, tmp_path, monkeypatch, data_dir):
    from classifiers.cli import main

    mod = _user_module(tmp_path, spark, monkeypatch, SCORER)
    texts = real_documents(data_dir)[:50]
    inp = tmp_path / "in"
    inp.mkdir()
    pq.write_table(pa.table({"id": [str(i) for i in range(len(texts))], "text": texts}), inp / "a.parquet")
    model = tmp_path / "words-model"
    model.mkdir()
    (model / "factor.txt").write_text("0.5")
    out = tmp_path / "scored"
    argv = ["score", "--input", str(inp), "--output", str(out), "--scorer", f"{mod}.WordScorer={model}"]
    argv += ["--option", f"{mod}.WordScorer.scale=4", "--master", spark.sparkContext.master, "--no-progress"]
    assert main(argv) == 0
    table = pq.read_table(out / "docs")
    assert table.column_names == ["id", "text", "words"]
    assert table.column("words").to_pylist() == [
        len(t.split()) * 2.0 for t in table.column("text").to_pylist()
    ]
