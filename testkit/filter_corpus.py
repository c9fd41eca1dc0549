"""Real documents for the heuristic filters' parity test and benchmark (tests and bench only).

Two sources, both read from the shared data folder at run time (nothing cached in the repo):
- every page of every file under warc/ (quirks and WET fragments included), read and extracted
  exactly as the `extract` job does (curation's reader, charset decoding and trafilatura with the
  default ExtractConfig), but with no URL filter, language ID or filter after it, so the filters
  see every text the extractor produces, in any language;
- the extraction eval sets' own texts: the article-extraction-benchmark's gold `articleBody`
  (181 articles) and, per page of trafilatura's evaluation set, its `with` snippets joined by
  newlines (990 short multilingual texts).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

from testkit.shared_data import shared_data_dir


def warc_files() -> list[Path]:
    return sorted(p for p in (shared_data_dir() / "warc").rglob("*") if p.is_file())


def warc_texts(limit_files: int | None = None) -> Iterator[tuple[str, str]]:
    """(id, text) for every page of the shared WARCs that trafilatura extracts a text from."""
    for path in warc_files()[:limit_files]:
        yield from file_texts(path)


def file_texts(path: Path) -> list[tuple[str, str]]:
    """(id, text) for every page of one WARC that trafilatura extracts a text from."""
    from core.stage import Document, Drop
    from curation.config import ExtractConfig, ReaderConfig
    from curation.extract.extractors import Extractor, ExtractStep
    from curation.warc.records import Page, iter_records

    step = ExtractStep(Extractor(ExtractConfig()))
    step.start_file()
    out = []
    for item in iter_records(str(path), ReaderConfig()):
        if not isinstance(item, Page):
            continue
        # what the extract stage reads of a page (curation/pipeline.py builds the same fields)
        meta = {
            "url": item.url,
            "source_format": "warc" if item.kind == "html" else "wet",
            "content_type": item.content_type,
        }
        doc = step.process(Document(id="", text=None, payload=item.payload, metadata=meta))
        if not isinstance(doc, Drop) and doc.text:
            out.append((f"{path.name}@{item.offset}", doc.text))
    return out


def spawn_pool(workers: int | None = None) -> ProcessPoolExecutor:
    """Worker processes for the corpus' per-document work (trafilatura, datatrove's blocks: single
    threaded, minutes in all): one per core. Spawned, not forked: the test process may hold a
    JVM gateway's threads, and a fork copies their locks."""
    return ProcessPoolExecutor(max_workers=workers or pool_size(), mp_context=get_context("spawn"))


def pool_size() -> int:
    return max(1, min(len(os.sched_getaffinity(0)), 4))


def eval_set_texts() -> Iterator[tuple[str, str]]:
    """(id, text) for the extraction eval sets' gold texts (aeb) and joined snippets (trafilatura-eval)."""
    root = shared_data_dir() / "extraction"
    aeb = json.loads((root / "aeb" / "ground-truth.json").read_text(encoding="utf-8"))
    for key, item in sorted(aeb.items()):
        if item.get("articleBody"):
            yield f"aeb:{key}", item["articleBody"]
    evaldata = json.loads((root / "trafilatura-eval" / "evaldata.json").read_text(encoding="utf-8"))
    for url, item in evaldata.items():
        snippets = [s for s in item.get("with", []) if s]
        if snippets:
            yield f"trafilatura-eval:{url}", "\n".join(snippets)


def all_texts() -> list[tuple[str, str]]:
    """warc_texts() then eval_set_texts(), in that order; the WARCs extracted in parallel (spawn_pool),
    largest first so no worker is left with the biggest file at the end."""
    files = warc_files()
    with spawn_pool() as pool:
        futures = {p: pool.submit(file_texts, p) for p in sorted(files, key=lambda p: -p.stat().st_size)}
        per_file = [futures[p].result() for p in files]
    return [*(t for texts in per_file for t in texts), *eval_set_texts()]


def cached_texts(path: Path) -> list[tuple[str, str]]:
    """all_texts(), kept in `path` (outside the repo) between runs of the benchmark."""
    if path.is_file():
        return [tuple(x) for x in json.loads(path.read_text(encoding="utf-8"))]
    texts = all_texts()
    path.write_text(json.dumps(texts), encoding="utf-8")
    return texts
