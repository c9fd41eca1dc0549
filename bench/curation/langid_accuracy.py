"""Language-ID accuracy per language of lid.176 in canonical codes, on labelled text found offline (issue 43).

Two labelled sets in the shared data (testkit.shared_data):
- Leipzig Corpora sentences, langid/leipzig/sentences/<iso639-1>.txt (one sentence a line): the
  label is the file's ISO 639-1 code read by core.languages.split_code (`nb` -> `nob`);
- Tatoeba long sentences, langid/tatoeba_long.tsv, label column `Tatoeba-iso-639-3`.

The predictor is the pipeline's own: curation.filters.langid.LanguageIdentifier with every language
kept (its top label read as a canonical code, `ru` -> `rus_Cyrl`). A prediction is a hit when
`LanguageSet([gold])` contains it: any script, and a macrolanguage label matches its members (gold
`zho` or `ara` is hit by `cmn_Hani` or `arb_Arab`), as the pipeline's keep-lists compare codes. A
gold language lid.176 has no label for (neither the code, nor a member or the macrolanguage of one
of its labels) is listed apart and left out of the macro average: no model output could be a hit.

`--docs 20` adds a column: the same sentences grouped 20 to a document (Leipzig only: its files
are one language each), closer to the length of the pages the pipeline judges.

`--kept-docs 5` adds a table: of the documents of that many sentences that lid.176 names correctly,
the share the multilingual preset's language ID keeps, i.e. whose probability (or its macrolanguage
family's sum) reaches the language's `lid_threshold` (configs/languages/: FineWeb-2's values, set on
GlotLID's probabilities, not lid.176's). Clean news prose in the language, so a share well under 1
says the threshold is strict for lid.176 there (the languages under 90% are listed first). The
shipped lid.176 table (configs/languages/models/lid176.yaml, `python -m curation calibrate-lid`) was
measured on each Leipzig file's first 500 sentences, so the table reads documents from sentence
`--kept-from` (default 500) on: text the calibration did not see.

    .venv/bin/python -m bench.curation.langid_accuracy [--max-per-lang 1000] [--docs 20]
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

from bench.harness import table
from core.languages import LID176, MACROLANGUAGE, LanguageCodeError, LanguageSet, split_code


def nameable(gold: str) -> bool:
    """Whether some lid.176 label can be a hit for `gold` (its code, a member, or its macrolanguage)."""
    lang, _ = split_code(gold)
    names = set(LID176.values())
    return (
        lang in names or any(MACROLANGUAGE.get(n) == lang for n in names) or MACROLANGUAGE.get(lang) in names
    )


def leipzig(folder: Path, limit: int) -> dict[str, list[str]]:
    """gold code (ISO 639-3) -> up to `limit` sentences of that file."""
    out = {}
    for f in sorted(folder.glob("*.txt")):
        try:
            lang, _ = split_code(f.stem)
        except LanguageCodeError:
            continue  # a file named by no code (none today): not labelled text
        lines = [s.strip() for s in f.read_text(encoding="utf-8").splitlines() if s.strip()]
        out[lang] = lines[:limit]
    return out


def tatoeba(path: Path, limit: int) -> dict[str, list[str]]:
    """gold code (Tatoeba's ISO 639-3) -> up to `limit` texts; rows whose label is no code are skipped."""
    out: dict[str, list[str]] = defaultdict(list)
    with open(path, encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            gold, text = row["Tatoeba-iso-639-3"].strip(), row["text"].strip()
            try:
                split_code(gold)
            except LanguageCodeError:
                continue
            if text and len(out[gold]) < limit:
                out[gold].append(text)
    return dict(out)


def documents(sentences: list[str], size: int) -> list[str]:
    return ["\n".join(sentences[i : i + size]) for i in range(0, len(sentences), size)]


def accuracy(predict, data: dict[str, Iterable[str]]) -> dict[str, tuple[int, float]]:
    """gold -> (n, share of texts whose predicted code `LanguageSet([gold])` contains)."""
    out = {}
    for gold, texts in data.items():
        texts = list(texts)
        if not texts:
            continue
        want = LanguageSet([gold])
        hits = sum(1 for t in texts if predict(t) in want)
        out[gold] = (len(texts), hits / len(texts))
    return out


def macro(acc: dict[str, tuple[int, float]]) -> float | None:
    xs = [a for gold, (_, a) in acc.items() if nameable(gold)]
    return sum(xs) / len(xs) if xs else None


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.split("\n"))


def accuracy_table(
    name: str, acc: dict[str, tuple[int, float]], docs: dict[str, tuple[int, float]] | None
) -> str:
    lines = [f"{name}: accuracy per language (hit: LanguageSet([gold]) contains lid.176's canonical code)"]
    head = ["lang", "n", "accuracy", *(["docs n", "docs acc"] if docs else [])]
    rows = []
    for gold in sorted(acc, key=lambda g: (acc[g][1], g)):
        if not nameable(gold):
            continue
        n, a = acc[gold]
        row = [gold, n, f"{100 * a:.1f}%"]
        if docs:
            row += [docs[gold][0], f"{100 * docs[gold][1]:.1f}%"] if gold in docs else ["", ""]
        rows.append(row)
    lines.append(_indent(table(head, rows)))
    m = macro(acc)
    tail = f"  macro average over {sum(nameable(g) for g in acc)} languages: {100 * m:.1f}%" if m else ""
    if docs and macro(docs) is not None:
        tail += f"; on documents: {100 * macro(docs):.1f}%"
    lines.append(tail)
    unnamed = sorted(g for g in acc if not nameable(g))
    lines.append(f"  lid.176 cannot name ({len(unnamed)}): {', '.join(unnamed) or '-'}")
    return "\n".join(lines)


def kept_at_threshold(lid, data: dict[str, list[str]], size: int) -> dict[str, tuple[int, float, float]]:
    """gold -> (documents named correctly, share kept at the language's threshold, that threshold)."""
    out = {}
    for gold, sentences in data.items():
        want = LanguageSet([gold])
        named = kept = 0
        threshold = None
        for doc in documents(sentences, size):
            lang, _ = lid.predict(doc)
            if lang not in want:
                continue
            named += 1
            r = lid(doc)
            kept += r.reason is None
            threshold = lid.threshold(lang)
        if named:
            out[gold] = (named, kept / named, threshold)
    return out


def kept_table(kept: dict[str, tuple[int, float, float]], size: int) -> str:
    lines = [
        f"Leipzig documents of {size} sentences named correctly: share kept at the threshold they are judged by",
        _indent(
            table(
                ["lang", "named", "threshold", "kept"],
                [
                    [g, kept[g][0], f"{kept[g][2]:.3f}", f"{100 * kept[g][1]:.1f}%"]
                    for g in sorted(kept, key=lambda g: (kept[g][1], g))
                ],
            )
        ),
    ]
    under = sorted(g for g, (_, k, _t) in kept.items() if k < 0.9)
    lines.append(f"  under 90% kept ({len(under)} of {len(kept)}): {', '.join(under) or '-'}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from curation.config import LangIdConfig
    from curation.filters.langid import LanguageIdentifier
    from testkit.shared_data import shared_data_dir

    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument(
        "--max-per-lang", type=int, default=1000, help="texts per language and set (default 1000)"
    )
    ap.add_argument(
        "--docs", type=int, default=20, help="sentences per document for the docs column (0: off)"
    )
    ap.add_argument(
        "--kept-docs",
        type=int,
        default=5,
        help="sentences per document for the kept-at-threshold table (0: off)",
    )
    ap.add_argument(
        "--kept-from", type=int, default=500, help="first Leipzig sentence of the kept-at-threshold table"
    )
    ap.add_argument("--data", type=Path, default=None, help="the langid/ folder (default: the shared data's)")
    args = ap.parse_args(argv)
    root = args.data or shared_data_dir() / "langid"

    lid = LanguageIdentifier(LangIdConfig(languages=()))

    def predict(text: str) -> str:
        return lid.predict(text)[0]

    lz = leipzig(root / "leipzig" / "sentences", args.max_per_lang)
    lz_acc = accuracy(predict, lz)
    lz_docs = accuracy(predict, {g: documents(s, args.docs) for g, s in lz.items()}) if args.docs else None
    tt_acc = accuracy(predict, tatoeba(root / "tatoeba_long.tsv", args.max_per_lang))
    print(accuracy_table("Leipzig sentences", lz_acc, lz_docs))
    print()
    print(accuracy_table("Tatoeba long sentences", tt_acc, None))
    kept = None
    if args.kept_docs:
        from curation.languages.schema import FOLDER

        judge = LanguageIdentifier(LangIdConfig(languages=()), settings=FOLDER)
        held_out = leipzig(root / "leipzig" / "sentences", args.kept_from + args.max_per_lang)
        kept = kept_at_threshold(judge, {g: s[args.kept_from :] for g, s in held_out.items()}, args.kept_docs)
        print()
        print(kept_table(kept, args.kept_docs))
    summary = {
        "leipzig": {g: round(a, 4) for g, (_, a) in lz_acc.items()},
        "leipzig_macro": round(macro(lz_acc) or 0, 4),
        "leipzig_docs_macro": round(macro(lz_docs) or 0, 4) if lz_docs else None,
        "tatoeba_macro": round(macro(tt_acc) or 0, 4),
        "unnamed": sorted(g for g in {**lz_acc, **tt_acc} if not nameable(g)),
        "kept_at_threshold": {g: round(k, 4) for g, (_, k, _t) in kept.items()} if kept else None,
    }
    print(json.dumps(summary))  # the last line: machine-readable
    return 0


if __name__ == "__main__":
    sys.exit(main())
