"""Micro-benchmark of dedup.normalize.normalize_bytes, the per-document hot loop of dedup's prepare
stage: the current implementation ("new") against the one before its fast path ("old",
dedup.normalize._normalize_bytes_slow), in microseconds per document.

Documents:
- the first --docs rows of --input (Parquet, column `text`): by default the first part of the
  1M-document input that bench/dedup/scale.py builds from the real text in ../shared/data
  (../scale/input-1000000/part-0000.parquet beside the checkout), else the first Parquet file under
  ../shared/data, else testkit.neardup.real_documents(); split into pure-ASCII and non-ASCII rows;
- multilingual: the Leipzig sentences of ../shared/data/langid (75 languages), joined into
  documents of ~1,700 characters ("pure"), and one to four of them inserted as a paragraph into the
  ASCII documents above ("mixed": English web text with a foreign quotation).
For the non-ASCII classes it also prints the share of documents that took the fast path (those that
never reached the general path).

Timing: old and new alternate on chunks of 100 documents, --repeats rounds in one process; medians
of the rounds reported (other jobs on the machine make single timings noisy). Every output is also checked to be
identical between old and new before timing.

    .venv/bin/python bench/dedup/normalize.py [--input PARQUET] [--docs 20000] [--repeats 7] [--per-language]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import pyarrow.parquet as pq  # noqa: E402

from dedup import normalize as norm  # noqa: E402
from testkit.neardup import real_documents  # noqa: E402
from testkit.shared_data import shared_data_dir  # noqa: E402

DEFAULT_INPUT = ROOT.parent / "scale" / "input-1000000" / "part-0000.parquet"


def default_input() -> Path | None:
    if DEFAULT_INPUT.is_file():
        return DEFAULT_INPUT
    return next(iter(sorted(shared_data_dir().rglob("*.parquet"))), None)


def load_texts(path: Path | None, n: int) -> tuple[list[str], str]:
    if path is None:
        return real_documents()[:n], "testkit.neardup.real_documents() (no Parquet found)"
    texts: list[str] = []
    for batch in pq.ParquetFile(path).iter_batches(batch_size=min(n, 65536), columns=["text"]):
        texts.extend(t for t in batch.column(0).to_pylist() if t)
        if len(texts) >= n:
            break
    return texts[:n], str(path)


def multilingual(ascii_docs: list[str], seed: int = 1) -> dict[str, tuple[list[str], list[str]]]:
    """Per language, (pure, mixed) documents from the Leipzig sentences; see the module docstring."""
    rng = random.Random(seed)
    out = {}
    for f in sorted((shared_data_dir() / "langid" / "leipzig" / "sentences").glob("*.txt")):
        sents = [s for s in f.read_text(encoding="utf-8").splitlines() if s.strip()]
        pure, mixed, cur = [], [], []
        for s in sents:
            cur.append(s)
            if sum(map(len, cur)) >= 1700:
                pure.append(" ".join(cur))
                cur = []
        for base in rng.sample(ascii_docs, min(8, len(ascii_docs))):
            paras = base.split("\n")
            paras.insert(rng.randrange(len(paras) + 1), " ".join(rng.sample(sents, rng.randint(1, 4))))
            mixed.append("\n".join(paras))
        out[f.stem] = (pure, mixed)
    return out


def fast_share(docs: list[str]) -> float:
    """Share of `docs` that normalize_bytes finished without its general path."""
    general = norm._normalize_bytes_general
    calls = 0

    def counting(*args):
        nonlocal calls
        calls += 1
        return general(*args)

    norm._normalize_bytes_general = counting
    try:
        for t in docs:
            norm.normalize_bytes(t)
    finally:
        norm._normalize_bytes_general = general
    return 1 - calls / len(docs) if docs else float("nan")


def interleaved_us(old, new, docs: list[str], chunk: int = 100) -> tuple[float, float]:
    """One round: old and new alternate on chunks of `chunk` documents (which one goes first
    alternates too), so a change in the machine's load hits both alike. Returns us/doc each."""
    spent = {old: 0.0, new: 0.0}
    for i in range(0, len(docs), chunk):
        part = docs[i : i + chunk]
        for fn in (old, new) if (i // chunk) % 2 else (new, old):
            t0 = time.perf_counter()
            for t in part:
                fn(t)
            spent[fn] += time.perf_counter() - t0
    return spent[old] / len(docs) * 1e6, spent[new] / len(docs) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--input", type=Path, default=None, help="Parquet file with a `text` column")
    ap.add_argument("--docs", type=int, default=20000, help="rows read from --input")
    ap.add_argument("--repeats", type=int, default=7, help="interleaved rounds (medians reported)")
    ap.add_argument("--per-language", action="store_true", help="also a row per Leipzig language")
    args = ap.parse_args()

    texts, source = load_texts(args.input or default_input(), args.docs)
    ascii_docs = [t for t in texts if t.isascii()]
    non_ascii = [t for t in texts if not t.isascii()]
    langs = multilingual(ascii_docs or texts)
    classes = {
        "ascii": ascii_docs,
        "non-ascii": non_ascii,
        "all": texts,
        f"leipzig pure ({len(langs)} languages)": [t for p, _ in langs.values() for t in p],
        "leipzig mixed (paragraph in ASCII doc)": [t for _, m in langs.values() for t in m],
    }
    if args.per_language:
        for lang, (pure, mixed) in langs.items():
            classes[f"  {lang} pure"] = pure
            classes[f"  {lang} mixed"] = mixed
    old, new = norm._normalize_bytes_slow, norm.normalize_bytes
    for name, docs in classes.items():
        for t in docs:  # also warms the per-character cache, as a long-running worker has it
            if new(t) != old(t):
                raise SystemExit(f"{name}: outputs differ on {t[:200]!r}")

    times: dict[str, list[tuple[float, float]]] = {}
    for _ in range(args.repeats):
        for name, docs in classes.items():
            if docs:
                times.setdefault(name, []).append(interleaved_us(old, new, docs))

    print(f"input: {source}, {len(texts)} docs ({len(non_ascii) / max(len(texts), 1):.1%} non-ASCII)")
    print(f"{args.repeats} interleaved rounds, medians, us/doc")
    header = (
        f"{'class':40} {'docs':>6} {'avg chars':>9} {'old':>8} {'new':>8} {'speedup':>8} {'fast path':>9}"
    )
    print(header)
    print("-" * len(header))
    for name, docs in classes.items():
        if not docs:
            continue
        o = statistics.median(t[0] for t in times[name])
        n = statistics.median(t[1] for t in times[name])
        avg = sum(map(len, docs)) / len(docs)
        share = "-" if name == "ascii" else f"{fast_share(docs):.1%}"
        print(f"{name:40} {len(docs):>6} {avg:>9.0f} {o:>8.1f} {n:>8.1f} {o / n:>7.2f}x {share:>9}")


if __name__ == "__main__":
    main()
