"""Per-document time of our four filter blocks against datatrove's, on the same real documents.

    .venv/bin/python -m bench.curation.filters [--passes 2] [--cache /tmp/refinery-filters-corpus.json]

Documents: every page of the shared WARCs that trafilatura extracts, plus the extraction eval
sets' texts (testkit/filter_corpus.py; extracted once and kept in --cache, outside the repo).
Both implementations run with the default config (FineWeb's settings), interleaved per document
(which one goes first alternates), so machine load falls on both alike:
- per block: each block alone on every document's text (what one block costs; per-text memos
  of both sides emptied first, so each block pays for its own word split);
- pipeline: the four in order on the extracted text, first drop wins (what the extract job pays;
  the blocks of one side share what they share: datatrove's cached word split, our pre-pass).
Pass 1 starts from empty caches on both sides (spaCy's vocabulary and, on ours, the chunk cache);
later passes show the steady state of a worker that has seen these words. Models and numba's
compiled kernel are loaded before timing. The load average is printed: the machine is shared.
"""

from __future__ import annotations

import argparse
import os
import time
from collections import Counter
from pathlib import Path

from bench.harness import table
from core.stage import Document, Drop, build_stage
from curation.config import FiltersConfig
from testkit.filter_corpus import cached_texts

KEYS = ("gopher_repetition", "gopher_quality", "c4_quality", "fineweb_quality")


def build(prefix: str) -> dict:
    cfg = FiltersConfig().enabled()
    return {k: build_stage("filter", prefix + k, dict(cfg[k]), f"filters.{k}", name=k) for k in KEYS}


def forget() -> None:
    """Empty both sides' per-text memo (datatrove: split_into_parts' lru_cache; ours: the pre-pass
    of the last texts), so each row pays for its own word split, whatever row ran before."""
    from datatrove.utils.text import split_into_parts

    from curation.filters.words import forget_recent

    split_into_parts.cache_clear()
    forget_recent()


def run_block(stage, text: str) -> float:
    forget()
    t0 = time.perf_counter()
    stage.process(Document(id="b", text=text))
    return time.perf_counter() - t0


def run_pipeline(stages: dict, text: str) -> float:
    forget()
    t0 = time.perf_counter()
    doc = Document(id="b", text=text)
    for k in KEYS:
        if isinstance(stages[k].process(doc), Drop):
            break
    return time.perf_counter() - t0


def one_pass(texts, ours, theirs) -> dict[str, list[float]]:
    """Seconds per row: [datatrove, ours]."""
    secs = {k: [0.0, 0.0] for k in (*KEYS, "pipeline")}
    for i, (_, text) in enumerate(texts):
        order = ((0, theirs), (1, ours)) if i % 2 == 0 else ((1, ours), (0, theirs))
        for side, stages in order:
            for k in KEYS:
                secs[k][side] += run_block(stages[k], text)
            secs["pipeline"][side] += run_pipeline(stages, text)
    return secs


def python_ngram_chars(words: list[str], top_ns, dup_ns) -> tuple[list[int], list[int]]:
    """The n-gram statistics in plain Python (Counter of word tuples, a set of joined strings):
    what curation/filters/words_kernels.py would be without numba, for the "where it pays" row."""
    top = []
    for n in top_ns:
        grams = Counter(zip(*(words[i:] for i in range(n))))
        if not grams:
            top.append(-1)
            continue
        gram, count = grams.most_common(1)[0]
        top.append((sum(map(len, gram)) + n - 1) * count)
    dup = []
    for n in dup_ns:
        seen, i, chars = set(), 0, 0
        while i < len(words) - n + 1:
            gram = "".join(words[i : i + n])
            if gram in seen:
                chars, i = chars + len(gram), i + n
            else:
                seen.add(gram)
                i += 1
        dup.append(chars)
    return top, dup


def ngram_rows(texts) -> str:
    """numba kernel vs plain Python on every document's words (same answers checked)."""
    from curation.filters.words import SPLITTER
    from curation.filters.words_kernels import ngram_chars

    top_ns, dup_ns = (2, 3, 4), (5, 6, 7, 8, 9, 10)
    secs = [0.0, 0.0]
    for _, text in texts:
        words = SPLITTER.words(text)
        t0 = time.perf_counter()
        ref = python_ngram_chars(words, top_ns, dup_ns)
        t1 = time.perf_counter()
        top, dup = ngram_chars(words, top_ns, dup_ns)
        secs[0] += t1 - t0
        secs[1] += time.perf_counter() - t1
        assert (list(top), list(dup)) == ref
    n = len(texts)
    return (
        f"{'n-gram stats':<20} {'python ms/doc':>17} {'numba ms/doc':>12} {'speed-up':>9}\n"
        f"{'(rep. rules)':<20} {1e3 * secs[0] / n:>17.3f} {1e3 * secs[1] / n:>12.3f} {secs[0] / secs[1]:>8.1f}x"
    )


def speed_table(secs: dict[str, list[float]], n: int, title: str) -> str:
    dt_sum, ours_sum = (sum(secs[k][s] for k in KEYS) for s in (0, 1))
    rows = [
        [k, f"{1e3 * dt / n:.3f}", f"{1e3 * ours / n:.3f}", f"{dt / ours:.1f}x"]
        for k, (dt, ours) in [*secs.items(), ("sum of the four", (dt_sum, ours_sum))]
    ]
    return title + "\n" + table(["block", "datatrove ms/doc", "ours ms/doc", "speed-up"], rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument("--cache", type=Path, default=Path("/tmp/refinery-filters-corpus.json"))
    args = ap.parse_args()
    texts = cached_texts(args.cache)
    ours, theirs = build(""), build("datatrove_")
    warm = "A warm-up text. It loads spaCy and the compiled kernel once.\n" * 3
    for stages in (ours, theirs):
        for k in KEYS:
            stages[k].process(Document(id="w", text=warm))
    n = len(texts)
    print(f"{n} documents, {sum(len(t) for _, t in texts):,} characters; load average {os.getloadavg()}")
    for p in range(1, args.passes + 1):
        secs = one_pass(texts, ours, theirs)
        title = f"pass {p} ({'cold caches' if p == 1 else 'warm'}), load average {os.getloadavg()[0]:.1f}"
        print(speed_table(secs, n, title))
    print(ngram_rows(texts))


if __name__ == "__main__":
    main()
