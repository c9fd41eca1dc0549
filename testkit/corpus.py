"""A small real document corpus for the token-shard and mixture tests, built once per test session.

Three Parquet files in one documents folder, all real text, nothing synthetic except the edge rows:
- `web`: the documents `curation.pipeline.process_file` keeps from the real 2024 crawl sample WARC
  (the same path `extract` takes);
- `multi`: documents of 12 Leipzig sentences in eight non-Latin and Latin-script languages (zh, ja, ko,
  ru, ar, hi, el, de), with a `quality` column (a deterministic per-document value, only so selectors
  have a numeric column to test);
- `edge`: one null text, one empty text, a document that literally contains the EOD token string,
  and one with CRLF, tabs and an emoji.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from core.output import OutputDir
from curation.config import ExtractJobConfig
from curation.pipeline import process_file
from testkit.shared_data import shared_data_dir

LANGS = ("zh", "ja", "ko", "ru", "ar", "hi", "el", "de")
DOCS_PER_LANG = 5
SENTENCES_PER_DOC = 12
EDGE_TEXTS = [
    None,
    "",
    "A document that mentions <|endoftext|> in its text must keep it as text.",
    "Windows line\r\nends\tand tabs, and an emoji \U0001f600 survive.\n",
]

_CACHE: dict[str, Path] = {}


def _id(s: str) -> str:
    return hashlib.sha1(s.encode()).hexdigest()[:32]


def _commit(out: OutputDir, unit: str, table: pa.Table) -> None:
    """A hand-made unit committed as a job commits one (file, stats, then its done/ marker): readers
    take only marked units of a job output (core.files.finished_docs)."""
    tmp = out.tmp_path("docs", unit, ".parquet")
    pq.write_table(table, tmp)
    out.commit_unit(unit, {"docs": tmp}, {"input": f"hand-made:{unit}", "docs_written": table.num_rows})


def build_corpus(root: Path) -> Path:
    """Write the three files under root/extract/docs/ (an `extract`-shaped folder); return root/extract."""
    key = str(root)
    if key in _CACHE:
        return _CACHE[key]
    data = shared_data_dir()
    ex = root / "extract"
    cfg = ExtractJobConfig()
    out = OutputDir(ex)
    out.prepare("extract", cfg.to_dict(), cfg.fingerprint())
    res = process_file(str(data / "warc" / "crawl-2024-sample-0000.warc.gz"), cfg, str(ex))
    assert res["status"] == "done" and res["docs"] > 5, res

    rows = []
    for lang in LANGS:
        lines = (data / "langid" / "leipzig" / "sentences" / f"{lang}.txt").read_text("utf-8").splitlines()
        for d in range(DOCS_PER_LANG):
            chunk = lines[d * SENTENCES_PER_DOC : (d + 1) * SENTENCES_PER_DOC]
            text = "\n".join(chunk)
            rows.append({"id": _id(f"{lang}:{d}"), "text": text, "lang": lang, "quality": (d + 1) / 5})
    _commit(out, "multi", pa.Table.from_pylist(rows))
    edge = [
        {"id": _id(f"edge:{i}"), "text": t, "lang": "en", "quality": 1.0} for i, t in enumerate(EDGE_TEXTS)
    ]
    schema = pa.schema(
        [("id", pa.string()), ("text", pa.string()), ("lang", pa.string()), ("quality", pa.float64())]
    )
    _commit(out, "zz-edge", pa.Table.from_pylist(edge, schema=schema))
    _CACHE[key] = ex
    return ex


def all_texts(docs_dir: Path) -> dict[str, list]:
    """file name -> its `text` column, in row order."""
    return {
        p.name: pq.read_table(p, columns=["text"]).column("text").to_pylist()
        for p in sorted((docs_dir / "docs").glob("*.parquet"))
    }


def build_source(
    out_root: Path, tok_path: Path, source: str, files: list[Path], select: dict | None = None
) -> Path:
    """shards/<source> with manifest.json from `files`, through the job's own per-file function
    and manifest builder, without Spark (the Spark path is tested in tests/curation/test_tokenize.py)."""
    from core.selectors import parse_selectors, selectors_spec
    from tokens.job import TokenizeTask, tokenize_file
    from tokens.shards import build_manifest
    from tokens.tokenizer import load_tokenizer

    tok = load_tokenizer(tok_path)
    out = out_root / "shards" / source
    (out / "done").mkdir(parents=True, exist_ok=True)
    sels = parse_selectors(select or {})
    task = TokenizeTask(
        source=source,
        out_dir=str(out),
        tokenizer_json=Path(tok.path).read_text(),
        tokenizer_sha256=tok.sha256,
        eod_token=tok.eod_token,
        selectors=sels,
    )
    done = [tokenize_file(i, str(f), task) for i, f in enumerate(files)]
    assert all(d["status"] == "done" for d in done), done
    config = {"select": selectors_spec(sels)}
    manifest = build_manifest(source, config, "test", tok, done)
    (out / "manifest.json").write_text(json.dumps(manifest))
    return out


def two_source_recipe(srcs: dict) -> dict:
    """The mixture tests' two-phase recipe over build_two_sources' `web` and `multi` (paths or URIs):
    3:1 in the main phase (75% of 12,800 tokens), `multi` alone in the anneal."""
    return {
        "name": "t",
        "seed": 11,
        "total_tokens": 12_800,
        "sources": {k: {"shards": str(v)} for k, v in srcs.items()},
        "phases": [
            {"name": "main", "share": 0.75, "weights": {"web": 3, "multi": 1}},
            {"name": "anneal", "share": 0.25, "weights": {"multi": 1}},
        ],
    }


def build_two_sources(root: Path) -> dict[str, Path]:
    """The mixture tests' two real sources under `root`: `web` (the extracted WARC pages and edge rows)
    and `multi` (Leipzig sentences), tokenized with a 512-token BPE trained on them; name -> shards folder."""
    from tokens.tokenizer import TokenizerConfig, train_tokenizer

    corpus = build_corpus(root / "corpus")
    tok = train_tokenizer(corpus, root / "tok", TokenizerConfig(vocab_size=512))
    docs = sorted((corpus / "docs").glob("*.parquet"))
    web = [d for d in docs if d.name != "multi.parquet"]
    multi = [d for d in docs if d.name == "multi.parquet"]
    return {
        "web": build_source(root / "tokens", tok, "web", web),
        "multi": build_source(root / "tokens", tok, "multi", multi),
    }
