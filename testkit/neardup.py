"""Evaluation material for dedup, built from the real text in ../shared/data (no synthetic prose).

- `real_documents()`: Wikipedia articles cut into article-sized chunks, ABC news documents, human-
  labelled Common Crawl documents, cc_net-extracted CC documents and the Clough-Stevenson sources.
- `leipzig_documents()`: documents of real sentences in one of 75 languages (Leipzig samples).
- `edit()`: a copy of a document with known edits (word deletions, insertions of words taken from
  other real documents, substitutions, sentence swaps, an appended or removed tail), at a given
  fraction of words, so the pair's true Jaccard spans the whole range around a threshold.
- `pair_metrics()`: brute-force true Jaccard of every pair on the same shingles the LSH sees, and
  precision / recall / F1 of a set of predicted pairs at a threshold.

Used by the tests (small) and by bench/dedup/accuracy.py and bench/dedup/scale.py (large).
"""

from __future__ import annotations

import gzip
import json
import random
import re
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from testkit.shared_data import shared_data_dir

_SENT = re.compile(r"(?<=[.!?])\s+")


def _chunks(text: str, target_words: int) -> list[str]:
    """Paragraph-aligned chunks of about `target_words` words."""
    out, cur, n = [], [], 0
    for para in (p.strip() for p in text.split("\n")):
        if not para:
            continue
        cur.append(para)
        n += len(para.split())
        if n >= target_words:
            out.append("\n".join(cur))
            cur, n = [], 0
    if n >= target_words // 2:
        out.append("\n".join(cur))
    return out


def real_documents(data_dir: Path | None = None, chunk_words: int = 400) -> list[str]:
    """Distinct real documents (deterministic order) from ../shared/data/quality and neardup."""
    d = Path(data_dir) if data_dir else shared_data_dir()
    docs: list[str] = []
    q = d / "quality"
    for line in (q / "enwiki_sample_articles.jsonl").read_text().splitlines():
        docs.extend(_chunks(json.loads(line)["text"], chunk_words))
    docs.extend(line.strip() for line in (q / "lee_background.cor").read_text().splitlines() if line.strip())
    for line in (q / "dclm_human_labels_dev.jsonl").read_text().splitlines():
        docs.append(json.loads(line)["text"])
    for f in sorted((q / "cc-extracted-ccnet-head").glob("*.json.gz")):
        with gzip.open(f, "rt", encoding="utf-8", errors="replace") as fh:
            docs.extend(t for line in fh if line.strip() and (t := json.loads(line).get("text")))
    cs = d / "neardup" / "clough-stevenson"
    for f in sorted(cs.glob("orig_task*.txt")):
        docs.append(f.read_bytes().decode("utf-8", "replace"))
    # Exact repeats inside the sources would blur "distinct": keep the first of each.
    seen, out = set(), []
    for t in docs:
        key = " ".join(t.split())
        if len(key.split()) >= 30 and key not in seen:
            seen.add(key)
            out.append(t)
    return out


def edit(text: str, fraction: float, rng: random.Random, vocabulary: list[str]) -> str:
    """A copy of `text` with about `fraction` of its words edited (a known, mixed edit pattern)."""
    out = " ".join(edit_tokens(text.split(" "), fraction, rng, vocabulary))
    if rng.random() < 0.3:  # reorder two sentences: shingles change only at the seams
        sents = _SENT.split(out)
        if len(sents) > 2:
            a, b = rng.sample(range(len(sents)), 2)
            sents[a], sents[b] = sents[b], sents[a]
            out = " ".join(sents)
    return out


def edit_tokens(words: list[str], fraction: float, rng: random.Random, vocabulary: list[str]) -> list[str]:
    """A copy of a token list with about `fraction` of them deleted, inserted or replaced (from
    `vocabulary`): `edit`'s word edits, for text whose words are not separated by spaces (give it
    a segmenter's words and join the result without them)."""
    words = list(words)
    n_edits = max(1, round(fraction * len(words)))
    for _ in range(n_edits):
        op = rng.random()
        i = rng.randrange(len(words))
        if op < 0.4 and len(words) > 1:
            del words[i]
        elif op < 0.7:
            words.insert(i, rng.choice(vocabulary))
        else:
            words[i] = rng.choice(vocabulary)
    return words


def edit_segmented(text: str, segmenter, fraction: float, rng: random.Random, vocabulary: list[str]) -> str:
    """`edit_tokens` on a segmenter's words (`.words(text)`, curation.filters.segment), for any
    script: each whitespace run of `text` is segmented on its own and its last word keeps the space
    after it, so only the edits change the text (Chinese stays unspaced, Latin words stay apart)."""
    tokens = []
    for chunk in text.split():
        words = segmenter.words(chunk)
        if words:
            tokens += [*words[:-1], words[-1] + " "]
    return "".join(edit_tokens(tokens, fraction, rng, vocabulary)).strip()


def leipzig_documents(
    iso639_1: str, sentences: int = 10, limit: int = 100, data_dir: Path | None = None
) -> list[str]:
    """Up to `limit` distinct documents of `sentences` consecutive real sentences each, from the
    Leipzig sample of one language (../shared/data/langid/leipzig/sentences/<code>.txt)."""
    d = Path(data_dir) if data_dir else shared_data_dir()
    lines = [
        s.strip()
        for s in (d / "langid" / "leipzig" / "sentences" / f"{iso639_1}.txt").read_text().splitlines()
    ]
    lines = list(dict.fromkeys(s for s in lines if s))  # a repeated sentence would tie two documents
    return ["\n".join(lines[i : i + sentences]) for i in range(0, len(lines) - sentences + 1, sentences)][
        :limit
    ]


def vocabulary(docs: Iterable[str], limit: int = 50_000) -> list[str]:
    """Words of real documents, for insertions and substitutions."""
    vocab: list[str] = []
    for t in docs:
        vocab.extend(w for w in t.split() if w.isalpha())
        if len(vocab) >= limit:
            break
    return vocab[:limit]


def jaccard_matrix(shingle_sets: list[np.ndarray]):
    """All-pairs true Jaccard (dense, float32) of shingle-hash sets by sparse matrix products."""
    from scipy import sparse

    uniq = [np.unique(s) for s in shingle_sets]
    allh = np.unique(np.concatenate([u for u in uniq if u.size] or [np.zeros(0, np.uint64)]))
    rows = np.concatenate([np.full(u.size, i) for i, u in enumerate(uniq)] or [np.zeros(0, int)])
    cols = np.searchsorted(allh, np.concatenate(uniq or [np.zeros(0, np.uint64)]))
    x = sparse.csr_matrix((np.ones(rows.size, np.float32), (rows, cols)), shape=(len(uniq), allh.size))
    inter = (x @ x.T).toarray()
    sizes = np.array([u.size for u in uniq], dtype=np.float32)
    union = sizes[:, None] + sizes[None, :] - inter
    with np.errstate(invalid="ignore", divide="ignore"):
        jac = np.where(union > 0, inter / union, 0.0)
    return jac.astype(np.float32)


def pair_metrics(jac: np.ndarray, predicted: set[tuple[int, int]], threshold: float) -> dict[str, float]:
    """Precision, recall, F1 of predicted pairs (i < j) against true Jaccard >= threshold."""
    iu = np.triu_indices(jac.shape[0], k=1)
    truth = {(int(i), int(j)) for i, j in zip(*iu) if jac[i, j] >= threshold}
    tp = len(truth & predicted)
    precision = tp / len(predicted) if predicted else 1.0
    recall = tp / len(truth) if truth else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "true_pairs": len(truth),
        "predicted_pairs": len(predicted),
        "tp": tp,
        "precision": precision,
        "recall": recall,
        "f1": f1,
    }


def candidate_pairs(band_keys: list[np.ndarray | None]) -> set[tuple[int, int]]:
    """Pairs (i < j) of documents that share at least one LSH band key (all pairs in a bucket)."""
    buckets: dict[tuple[int, int], list[int]] = {}
    for i, keys in enumerate(band_keys):
        if keys is None:
            continue
        for b, k in enumerate(keys.tolist()):
            buckets.setdefault((b, k), []).append(i)
    pairs: set[tuple[int, int]] = set()
    for members in buckets.values():
        for x in range(len(members)):
            for y in range(x + 1, len(members)):
                pairs.add((members[x], members[y]))
    return pairs
