"""Train the fast engine's line model (curation/extract/fast.py) from trafilatura's own choices.

    .venv/bin/python -m curation.extract.train_fast --data ../shared/data \
        [--out curation/extract/models/fast-lines.json]

Pages: the shared data's trafilatura-eval pages whose file name's SHA-1 starts with an even byte
(`in_training_half`; the other half is what bench/curation/extraction_quality.py reports that set on,
as `trafilatura-eval-heldout`), plus every HTML response of the shared WARCs that are no gold set's
(`NON_GOLD_WARCS`). No page of WCXB or aeb, and no gold text of any set, is read: the labels are
trafilatura's. A line is labelled kept when trafilatura's text at its best setting on these pages
(`trafilatura.extract` with its defaults: balanced, comments kept, the readability/jusText fallback)
contains it: the whole line for a line under 8 words, else half of its 4-word shingles (trafilatura
joins and splits some lines differently). Lines are weighted by their words, as F1 over words
weighs them. The model, its feature names, the pages' provenance and the trafilatura version are
written as JSON; training is deterministic (the same pages give the same file).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import logging
import os
import re
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from curation.extract.charset import decode_html
from curation.extract.fast import FEATURES, MODEL_PATH, line_features, page_lines, parse_bounded

NON_GOLD_WARCS = (
    "warc/cc-main-2020-34-sample.warc.gz",
    "warc/cc-main-2024-22-whirlwind.warc.gz",
    "warc/crawl-2024-sample-0000.warc.gz",
    "warc/crawl-2024-sample-0001.warc.gz",
    "warc/BL-20140325121225068-00000-32090~opera~8443.warc.gz",
)
SHORT_WORDS = 8
SHINGLE = 4
# The keep threshold is chosen, not fixed: each candidate is scored by how well the student's page text
# agrees with the teacher's (word F1 per page, averaged over pages, as WCXB scores), on predictions for
# pages the model was not fitted on (FOLDS folds by page). Training pages and teacher text only: no
# gold set takes part in the choice.
THRESHOLDS = tuple(round(0.30 + 0.025 * k, 3) for k in range(17))  # 0.30 .. 0.70
FOLDS = 5


_WORD = re.compile(r"\w+")


def in_training_half(file_name: str) -> bool:
    """trafilatura-eval's training half: the pages whose file name's SHA-1 starts with an even byte."""
    return hashlib.sha1(file_name.encode("utf-8")).digest()[0] % 2 == 0


def training_pages(data: Path) -> Iterator[tuple[str, bytes, str | None]]:
    """(key, HTML bytes, content type) of every training page, in a fixed order."""
    root = data / "extraction" / "trafilatura-eval"
    evaldata = json.loads((root / "evaldata.json").read_text(encoding="utf-8"))
    for item in sorted(evaldata.values(), key=lambda it: it["file"]):
        if in_training_half(item["file"]):
            with gzip.open(root / "html" / f"{item['file']}.gz", "rb") as f:
                yield item["file"], f.read(), None
    from warcio.archiveiterator import ArchiveIterator

    for name in NON_GOLD_WARCS:
        with open(data / name, "rb") as f:
            for record in ArchiveIterator(f):
                if record.rec_type != "response" or record.http_headers is None:
                    continue
                ctype = record.http_headers.get_header("Content-Type") or ""
                if "html" not in ctype.lower() or record.http_headers.get_statuscode() != "200":
                    continue
                key = f"{name}#{record.rec_headers.get_header('WARC-Record-ID')}"
                yield key, record.content_stream().read(), ctype


def _shingles(text: str) -> set[tuple[str, ...]]:
    words = text.lower().split()
    return {tuple(words[i : i + SHINGLE]) for i in range(max(1, len(words) - SHINGLE + 1))}


def kept_by(line: str, teacher: str, teacher_shingles: set[tuple[str, ...]]) -> bool:
    if len(line.split()) < SHORT_WORDS:
        return line in teacher
    own = _shingles(line)
    return 2 * len(own & teacher_shingles) >= len(own)


@dataclass
class Rows:
    """Every training line's features, label and weight, and per page its lines' span and texts and
    the teacher's text (for the threshold's agreement score)."""

    x: list[list[float]] = field(default_factory=list)
    labels: list[int] = field(default_factory=list)
    weights: list[float] = field(default_factory=list)
    spans: list[tuple[int, int]] = field(default_factory=list)
    line_texts: list[str] = field(default_factory=list)
    teachers: list[str] = field(default_factory=list)


def build_rows(data: Path) -> Rows:
    import trafilatura

    out = Rows()
    for _key, payload, ctype in training_pages(data):
        html = decode_html(payload, ctype)[0]
        try:
            teacher = " ".join((trafilatura.extract(html) or "").split())
        except Exception:  # a page trafilatura cannot read teaches nothing
            continue
        lines, _title = page_lines(parse_bounded(html)[0])
        shingles = _shingles(teacher)
        start = len(out.labels)
        for line, row in zip(lines, line_features(lines), strict=True):
            out.x.append(row)
            out.labels.append(int(kept_by(line.text, teacher, shingles)))
            out.weights.append(float(line.text.count(" ") + 1))
            out.line_texts.append(line.text)
        out.spans.append((start, len(out.labels)))
        out.teachers.append(teacher)
    return out


def _fit(x, labels, weights):
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    scaler = StandardScaler().fit(x)
    return scaler, LogisticRegression(C=1.0, max_iter=5000).fit(
        scaler.transform(x), labels, sample_weight=weights
    )


def word_f1(pred: str, gold: str) -> float:
    """Word F1 of two texts as bags of lowercased `\\w+` tokens (1.0 when both are empty)."""
    p, g = Counter(_WORD.findall(pred.lower())), Counter(_WORD.findall(gold.lower()))
    if not p or not g:
        return float(not p and not g)
    overlap = sum((p & g).values())
    return 2 * overlap / (sum(p.values()) + sum(g.values()))


def choose_threshold(rows: Rows, x) -> tuple[float, dict[str, float]]:
    """The threshold whose out-of-fold page texts agree best with the teacher's (see THRESHOLDS), and
    the agreement of every candidate."""
    import numpy as np

    labels, weights = np.asarray(rows.labels), np.asarray(rows.weights)
    fold_of_page = np.arange(len(rows.spans)) % FOLDS
    p = np.empty(len(labels))
    for k in range(FOLDS):
        pages = np.flatnonzero(fold_of_page == k)
        held = np.concatenate([np.arange(*rows.spans[i]) for i in pages])
        train = np.ones(len(labels), bool)
        train[held] = False
        scaler, model = _fit(x[train], labels[train], weights[train])
        p[held] = model.predict_proba(scaler.transform(x[held]))[:, 1]
    agreement = {}
    for t in THRESHOLDS:
        f1s = [
            word_f1(" ".join(rows.line_texts[j] for j in range(a, b) if p[j] >= t), teacher)
            for (a, b), teacher in zip(rows.spans, rows.teachers, strict=True)
        ]
        agreement[f"{t:.3f}"] = round(float(np.mean(f1s)), 4)
    best = max(THRESHOLDS, key=lambda t: (agreement[f"{t:.3f}"], -abs(t - 0.5)))
    return best, agreement


def train(data: Path) -> dict:
    import numpy as np
    import sklearn
    import trafilatura

    rows = build_rows(data)
    x = np.asarray(rows.x, dtype=np.float64)
    labels = rows.labels
    threshold, agreement = choose_threshold(rows, x)
    scaler, model = _fit(x, labels, rows.weights)
    scale = [float(s) if s > 0 else 1.0 for s in scaler.scale_]
    return {
        "features": list(FEATURES),
        "mean": [float(m) for m in scaler.mean_],
        "scale": scale,
        "coef": [float(c) for c in model.coef_[0]],
        "intercept": float(model.intercept_[0]),
        "threshold": threshold,
        "threshold_choice": {
            "rule": f"mean per-page word F1 of the kept lines against the teacher's text, {FOLDS}-fold "
            "out-of-fold by page, training pages only",
            "agreement": agreement,
        },
        "trained_on": {
            "pages": len(rows.spans),
            "lines": len(labels),
            "kept_share": sum(labels) / len(labels),
            "sources": [
                "extraction/trafilatura-eval: pages whose file name's SHA-1 starts with an even byte",
                *NON_GOLD_WARCS,
            ],
            "teacher": f"trafilatura.extract() defaults, trafilatura {trafilatura.__version__}",
            "learner": f"scikit-learn {sklearn.__version__} LogisticRegression(C=1.0), standardized",
            "command": "python -m curation.extract.train_fast --data ../shared/data",
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    env = os.environ.get("REFINERY_SHARED_DATA")
    parser.add_argument("--data", type=Path, default=Path(env) if env else None, required=not env)
    parser.add_argument("--out", type=Path, default=MODEL_PATH)
    args = parser.parse_args(argv)
    if not (args.data / "extraction" / "trafilatura-eval").is_dir():
        parser.error(f"{args.data} has no extraction/trafilatura-eval folder")
    logging.basicConfig(level=logging.CRITICAL)  # trafilatura logs every page it finds hard
    model = train(args.data)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(model, indent=1) + "\n", encoding="utf-8")
    info = model["trained_on"]
    print(f"{args.out}: {info['pages']} pages, {info['lines']} lines, {info['kept_share']:.3f} kept")
    best = model["threshold_choice"]["agreement"][f"{model['threshold']:.3f}"]
    print(f"threshold {model['threshold']} (out-of-fold agreement with the teacher {best})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
