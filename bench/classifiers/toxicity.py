"""Toxicity scorer: docs/s/core on real pages, precision/recall on the written test texts, and why windows.

Rows (backends x scoring):
- `profanity-check (windows)`: the default scorer (classifiers/toxicity.py): alt-profanity-check's
  model on ~50-word windows, word-weighted mean.
- `profanity-check (whole text)`: the peer usage, what the package's README does
  (`predict_prob([text])` on the whole document): same model, no windows.
- `fastText (windows)`: a `train-toxicity` model trained here on the template lines of
  testkit/toxicity_texts.py (`training_texts`, 64 + 64 lines, never the evaluation texts),
  default fastText config, scored like the default.

Columns:
- docs/s/core on real pages: the 105 Wikipedia articles (quality/enwiki_sample_articles.jsonl,
  ~28k characters each) and the 218 extracted Common Crawl documents of
  quality/dclm_human_labels_dev.jsonl (~2k characters), scored in one batch per set as the score
  job does (batch 1024), in this one process with BLAS/OpenMP held to one thread; best of
  `--repeats`.
- P / R / AUC at 0.5 on the written texts (20 toxic; 20 clean + 16 hard negatives labelled 0) and
  how many of the 16 hard negatives reach 0.5.
- wiki>=0.5: Wikipedia articles scored >= 0.5 (all are clean prose: false positives).
- spliced: a real Wikipedia article (2,000 words) with 20 of the toxic texts spliced in as
  paragraphs (19 % of its words): the windows report about that share, the whole text saturates.
A second table gives, per language of the Leipzig sentences (langid/leipzig), the share of clean
sentences profanity-check flags when read as English: why the scorer gives null for other languages.
The last line is one JSON object with every number.

    python -m bench.classifiers.toxicity [--repeats 3]
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one core: docs/s/core, set before numpy loads

import argparse  # noqa: E402
import json  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from bench.harness import table  # noqa: E402
from classifiers.config import ToxicityTrainConfig  # noqa: E402
from classifiers.metrics import binary_metrics  # noqa: E402
from classifiers.scorer import load_scorer, make_spec  # noqa: E402
from classifiers.toxicity import PROFANITY_CHECK, ProfanityCheck, train_toxicity  # noqa: E402
from testkit.shared_data import shared_data_dir  # noqa: E402
from testkit.toxicity_texts import HARD_NEGATIVES, TOXIC, labelled, training_texts  # noqa: E402

LANGS = ("en", "de", "fr", "es", "nl", "af", "st")


def _jsonl(path: Path) -> list[str]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f if line.strip()]


def _spliced(article: str) -> tuple[str, float]:
    """The article's first 2,000 words as 50-word paragraphs with 20 toxic texts spread among them."""
    words = article.split()[:2000]
    paras = [" ".join(words[i : i + 50]) for i in range(0, len(words), 50)]
    for j in range(20):
        paras.insert(j * 40 // 20 + j, TOXIC[j])
    toxic_words = sum(len(t.split()) for t in TOXIC[:20])
    return "\n".join(paras), toxic_words / (toxic_words + len(words))


def _rate(score: Callable[[list[str]], np.ndarray], docs: list[str], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        score(docs)
        best = min(best, time.perf_counter() - t0)
    return len(docs) / best


def measure(name: str, score: Callable[[list[str]], np.ndarray], data: dict, repeats: int) -> dict:
    rows = labelled()
    s = score([t for t, _, _ in rows])
    m = binary_metrics(np.array([y for _, y, _ in rows]), s, 0.5)
    hard = score(HARD_NEGATIVES)
    return {
        "backend": name,
        "wiki_docs_s_core": round(_rate(score, data["wiki"], repeats), 1),
        "web_docs_s_core": round(_rate(score, data["web"], repeats), 1),
        "precision": round(m["precision"], 3),
        "recall": round(m["recall"], 3),
        "roc_auc": round(m["roc_auc"], 3),
        "hard_negatives_flagged": int((hard >= 0.5).sum()),
        "wiki_flagged": int((score(data["wiki"]) >= 0.5).sum()),
        "spliced_score": round(float(score([data["spliced"]])[0]), 3),
    }


def language_table(model: ProfanityCheck, root: Path) -> dict[str, float]:
    out = {}
    for lang in LANGS:
        with open(root / "langid" / "leipzig" / "sentences" / f"{lang}.txt", encoding="utf-8") as f:
            lines = [line.strip() for line in f if line.strip()]
        out[lang] = round(float((model.predict(lines) >= 0.5).mean()), 3)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    root = shared_data_dir()
    wiki = _jsonl(root / "quality" / "enwiki_sample_articles.jsonl")
    spliced, share = _spliced(wiki[0])
    data = {"wiki": wiki, "web": _jsonl(root / "quality" / "dclm_human_labels_dev.jsonl"), "spliced": spliced}

    def by_scorer(model: str) -> Callable[[list[str]], np.ndarray]:
        scorer = load_scorer(make_spec("toxicity", model))
        return lambda texts: scorer.score(texts, ["en"] * len(texts))["toxicity"]

    pc = ProfanityCheck()
    results = [
        measure("profanity-check (windows)", by_scorer(PROFANITY_CHECK), data, args.repeats),
        measure("profanity-check (whole text)", pc.predict, data, args.repeats),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        toxic, clean = training_texts()
        (Path(tmp) / "toxic.txt").write_text("\n".join(toxic) + "\n", encoding="utf-8")
        (Path(tmp) / "clean.txt").write_text("\n".join(clean) + "\n", encoding="utf-8")
        out = Path(tmp) / "model"
        train_toxicity([Path(tmp) / "toxic.txt"], [Path(tmp) / "clean.txt"], out, ToxicityTrainConfig())
        results.append(measure("fastText (windows)", by_scorer(str(out)), data, args.repeats))

    cols = list(results[0])
    print(f"texts: {len(TOXIC)} toxic, {len(labelled()) - len(TOXIC)} not (16 hard negatives); "
          f"spliced: {share:.1%} toxic words")  # fmt: skip
    print(table(cols, [[r[c] for c in cols] for r in results]))
    langs = language_table(pc, root)
    print("\nclean Leipzig sentences flagged (>= 0.5) by profanity-check read as English:")
    print("  ".join(f"{k} {v:.1%}" for k, v in langs.items()))
    print(
        json.dumps(
            {"backends": results, "spliced_toxic_share": round(share, 3), "flagged_by_language": langs}
        )
    )


if __name__ == "__main__":
    main()
