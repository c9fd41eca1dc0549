"""Multilingual curation, ours vs datatrove (issue 43): kept-set agreement per language, pages/s/core.

The same WARCs through two pipelines with the same per-language settings, on the same cores:

  (a) datatrove   WarcReader -> URLFilter -> Trafilatura(favour_precision) -> LanguageFilter (lid.176,
                  `label_only`: it labels, `PerLanguageLID` judges) -> per-language GopherRepetition,
                  GopherQuality, C4Quality (English only) and FineWebQuality -> ParquetWriter(zstd),
                  under LocalPipelineExecutor(tasks=<n files>, workers=<cores>): throughput.py's
                  pipeline with the judges swapped (`sides.datatrove_pipeline(judges=...)`).
  (b) ours        the preset, `configs/extract-multilingual.yaml`, through `process_file` mapped by a
                  Pool(<cores>) (bench/curation/sides.py's `run_pool`); `--spark` adds the Spark job as well.

Same settings on both sides. Each document's language is lid.176's top label read as a canonical code
(`core.languages.from_lid176`: `ru` -> `rus_Cyrl`); its settings are `settings_for(code)`
(configs/languages/): the LID threshold, and the kwargs of the three blocks, given to datatrove's own
filter classes (GopherRepetitionFilter, GopherQualityFilter, FineWebQualityFilter: the settings files
use their argument names), plus `language=` the code datatrove's tokenizer_assignment.csv knows
(`datatrove_language`: it takes ISO 639-3 + script, `rus_Cyrl`, so the code itself where listed,
else the settings file's language, else the bare ISO 639-3 code, else datatrove's WhitespaceTokenizer
(spaCy `xx`, our `whitespace`)). So each side splits words with its own tokenizer for the language:
ours curation/filters/segment.py, datatrove's word_tokenizers.py. C4QualityFilter(filter_no_terminal_punct=False)
runs for English only on both sides (the files' `c4_quality`). One difference is the preset's on purpose:
ours keeps ZWNJ/ZWJ in the text (`extract.keep_joiners`), datatrove's trafilatura deletes them, so a
Persian or Indic page's text differs by those characters (its word counts rarely do).

LID threshold: a page is kept when its top label's probability, or the summed probability of the
labels of its macrolanguage in the same script, reaches the language's threshold under lid.176
(`lid_threshold_for`: its file's, or lid.176's own measure where lower) (ours:
curation/filters/langid.py `_judge` / `family_score`). The datatrove side applies the same rule to
the labels datatrove's LanguageFilter reports (`keep_top_pairs_threshold=0.01`; ours sums its top
10 labels; a label under 0.01 cannot move a sum across a threshold given to two decimals unless it
sits within 0.01 of it), so the family sum is ON on both sides. Our `>=` is used on both sides
(datatrove's own LanguageFilter keeps `> threshold`).

What is compared. Pages: WARC records each reader takes (the readers differ a little, see
throughput.py's "pages read" line). Kept set per language: documents kept by both (the same WARC
record id: ours `warc_record_id`, datatrove's `id`) over documents kept by either; the language of a
document is the one its keeping side gave it (ours when both). A language is listed when it has
>= `--min-pages` pages identified as it by datatrove's LID (every page datatrove extracted is
labelled; ours drops some before extraction, the cascade's pre-check). Every page is run, English
included (a page's language is known only after extraction), and the throughput counts every page;
the agreement table lists English apart from the goal's non-English languages.

Timing: each side's whole call (executor.run(), the Pool's start and map), set-up INCLUDED on both
sides: datatrove builds its blocks, tokenizers and LID model lazily in each task; ours builds the
stages once per worker process and each language's blocks on first use. pages/s/core = pages in /
(wall x cores); CPU s: the run's process tree from /proc.

    .venv/bin/python -m bench.curation.multilingual [--cores 2] [--timeout 5] [--min-pages 20]
        [--input FILES ...] [--spark] [--large-mb M] [--keep] [--verbose]

The last line printed is JSON: both sides' pages/s/core, the ratio, agreement per language.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from datatrove.pipeline.filters.base_filter import BaseFilter

from bench.curation.sides import (
    LocalLanguageFilter,
    Run,
    large_inputs,
    resolve_files,
    run_datatrove,
    run_pool,
    run_spark,
    start_spark,
)
from bench.harness import stderr_to, table
from curation.config import DATATROVE_FILTERS, ExtractJobConfig
from curation.filters.langid import default_model_path

REPO = Path(__file__).resolve().parents[2]

PRESET = REPO / "configs" / "extract-multilingual.yaml"
DEFAULT_FILES = (
    "pages-trafilatura-eval-part0.warc.gz",
    "pages-trafilatura-eval-part1.warc.gz",
    "pages-trafilatura-eval-part2.warc.gz",
    "pages-trafilatura-eval-part3.warc.gz",
    "cc-main-2020-34-sample.warc.gz",
)
TOP_PAIRS_MIN = 0.01
"""Labels datatrove's LanguageFilter reports besides the top one (FineWeb-2's `lang_scores` floor)."""


# ---------------------------------------------------------------------------------------------
# datatrove's side: its LanguageFilter and filter blocks, chosen per document's language
# ---------------------------------------------------------------------------------------------


def datatrove_language(code: str, settings_language: str) -> Any:
    """What datatrove's blocks take as `language=` for our canonical `code`: a key of its
    tokenizer_assignment.csv (ISO 639-3 + script or bare ISO 639-3), else its WhitespaceTokenizer."""
    from datatrove.utils.word_tokenizers import WhitespaceTokenizer, load_tokenizer_assignments

    known = load_tokenizer_assignments()
    for key in (code, settings_language, code.split("_")[0]):
        if key in known:
            return key
    return _whitespace(WhitespaceTokenizer)


_WS: list = []


def _whitespace(cls: type) -> Any:
    """One WhitespaceTokenizer per process: datatrove caches tokenizers by the object passed."""
    if not _WS:
        _WS.append(cls())
    return _WS[0]


def family_sum(code: str, pairs: dict[str, float], text: str) -> float:
    """The summed probability of the labels of `code`'s macrolanguage in its script (ours:
    LanguageIdentifier.family_score); 0 for a language with no macrolanguage."""
    from core.languages import MACROLANGUAGE, from_lid176, split_code

    lang, script = split_code(code)
    macro = MACROLANGUAGE.get(lang)
    if macro is None:
        return 0.0
    total = 0.0
    for label, p in pairs.items():
        c, s = split_code(from_lid176(label, text))
        if s == script and MACROLANGUAGE.get(c, c) == macro:
            total += p
    return min(total, 1.0)


class PerLanguageLID(LocalLanguageFilter):
    """datatrove's LanguageFilter (lid.176, every language, `label_only`), then our per-language rule:
    top probability or family sum >= the language's `lid_threshold`. Sets metadata `lang` (canonical)
    and counts `lang:<code>` in its stats (every page it sees, kept or not)."""

    name = "🌍 Language ID (per language)"

    def __init__(self, model_path: str, folder: str) -> None:
        super().__init__(model_path=model_path, languages=None, language_threshold=0.0)
        self.label_only = True
        self.keep_top_pairs_threshold = TOP_PAIRS_MIN
        self.folder = folder

    def filter(self, doc) -> bool | tuple[bool, str]:
        from core.languages import from_lid176
        from curation.languages.lookup import lid_threshold_for

        super().filter(doc)
        pairs = {
            k[len("top_language_") : -len("_score")]: doc.metadata.pop(k)
            for k in [k for k in doc.metadata if k.startswith("top_language_")]
        }  # popped: per-document keys would give the Parquet writer a different schema per batch
        code = from_lid176(doc.metadata["language"], doc.text)
        score = doc.metadata["language_score"]
        doc.metadata["lang"] = code
        self.stat_update(f"lang:{code}")
        t = lid_threshold_for(code, "lid176", self.folder)  # the threshold ours judges by, the same model
        if score >= t or family_sum(code, pairs, doc.text) >= t:
            return True
        return False, "lang_low_score"


class PerLanguageBlock(BaseFilter):
    """One of datatrove's four filter classes, built per language (cached) with that language's
    settings-file kwargs and `language=`; C4's only where the file says `c4_quality` (English)."""

    def __init__(self, key: str, overrides: dict[str, Any], folder: str) -> None:
        super().__init__()
        self.key, self.overrides, self.folder = key, overrides, folder
        self.name = f"{DATATROVE_FILTERS[key]} (per language)"
        self._blocks: dict[str, Any] = {}

    def block_for(self, code: str) -> Any:
        if code not in self._blocks:
            from datatrove.pipeline import filters as dt_filters

            from curation.languages.lookup import settings_for

            s = settings_for(code, self.folder)
            if self.key == "c4_quality":
                args = dict(self.overrides) if s.c4_quality else None
            else:
                args = {**getattr(s, self.key).kwargs(), **self.overrides}
            self._blocks[code] = (
                None
                if args is None
                else getattr(dt_filters, DATATROVE_FILTERS[self.key])(
                    **args, language=datatrove_language(code, s.language)
                )
            )
        return self._blocks[code]

    def filter(self, doc) -> bool | tuple[bool, str]:
        block = self.block_for(doc.metadata["lang"])
        return True if block is None else block.filter(doc)


def datatrove_judges(cfg: ExtractJobConfig) -> list:
    """The per-language LID and blocks, by reference (`bench.curation.multilingual.…`, importable in
    datatrove's workers, not `__main__.…`, which dill would pickle by value)."""
    here = importlib.import_module("bench.curation.multilingual")
    folder = str(cfg.languages.folder())
    lid = here.PerLanguageLID(cfg.langid.model_path or default_model_path(), folder)
    blocks = [here.PerLanguageBlock(k, kw, folder) for k, kw in cfg.filters.enabled().items()]
    return [lid, *blocks]


# ---------------------------------------------------------------------------------------------
# kept sets per language
# ---------------------------------------------------------------------------------------------


def our_kept(root: Path) -> dict[str, str]:
    """warc_record_id -> lang of our output's documents (the preset writes docs/lang=<code>/: read by
    the project's one listing rule, as every later job reads it)."""
    import pyarrow.parquet as pq

    from core.files import doc_parquet_files

    return {
        r["warc_record_id"]: r["lang"]
        for f in doc_parquet_files(root)
        for r in pq.read_table(f, columns=["warc_record_id", "lang"]).to_pylist()
    }


def datatrove_kept(folder: Path) -> dict[str, str]:
    """id (the WARC record id) -> lang of datatrove's written documents."""
    import pyarrow.parquet as pq

    return {
        r["id"]: r["metadata"]["lang"]
        for f in sorted(folder.glob("*.parquet"))
        for r in pq.read_table(f, columns=["id", "metadata"]).to_pylist()
    }


def datatrove_lang_pages(logging_dir: Path) -> Counter:
    """Pages per language as datatrove's LID labelled them (PerLanguageLID's `lang:` stats)."""
    blocks = json.loads((logging_dir / "stats.json").read_text())
    out: Counter = Counter()
    for b in blocks:
        for k, v in b["stats"].items():
            if k.startswith("lang:"):
                out[k[5:]] += int(v["total"] if isinstance(v, dict) else v)
    return out


def read_by_both(files: list[str], cfg: ExtractJobConfig) -> tuple[set[str], dict[str, int]]:
    """WARC record ids both readers take as pages, and the count each reader alone takes. The readers
    select differently by design (ours: HTTP 200 responses with an HTML type; datatrove's
    process_record: any record whose identified payload type is HTML, `resource` records and any status
    included): a page only one reads says nothing about curation, so the agreement is over the rest."""
    from datatrove.pipeline.readers.warc import process_record
    from warcio.archiveiterator import ArchiveIterator

    from curation.warc.records import iter_records

    ours: set[str] = set()
    theirs: set[str] = set()
    for f in files:
        ours |= {it.record_id for it in iter_records(f, cfg.reader) if getattr(it, "kind", None)}
        with open(f, "rb") as fh:
            for rec in ArchiveIterator(fh):
                if process_record(rec) is not None:
                    theirs.add(rec.rec_headers.get_header("WARC-Record-ID"))
    return ours & theirs, {"ours": len(ours - theirs), "datatrove": len(theirs - ours)}


def agreement(
    ours: dict[str, str], theirs: dict[str, str], pages: Counter, min_pages: int, both_read: set[str]
) -> list[dict]:
    """Per language with >= min_pages pages: kept by both, ours only, datatrove only, both/either,
    over the pages both readers take (`both_read`)."""
    rows: dict[str, Counter] = {}
    for doc_id in (set(ours) | set(theirs)) & both_read:
        lang = ours.get(doc_id) or theirs[doc_id]
        side = "both" if doc_id in ours and doc_id in theirs else "ours" if doc_id in ours else "dt"
        rows.setdefault(lang, Counter())[side] += 1
    out = []
    for lang in sorted(pages, key=lambda c: (-pages[c], c)):
        if pages[lang] < min_pages:
            continue
        c = rows.get(lang, Counter())
        either = c["both"] + c["ours"] + c["dt"]
        out.append(
            {
                "lang": lang,
                "pages": pages[lang],
                "both": c["both"],
                "ours_only": c["ours"],
                "datatrove_only": c["dt"],
                "agreement": c["both"] / either if either else None,  # neither side kept one
            }
        )
    return out


# ---------------------------------------------------------------------------------------------
# report
# ---------------------------------------------------------------------------------------------


def report(groups: list[list[Run]], rows: list[dict], args: argparse.Namespace, files: list[str]) -> str:
    """`groups`: runs over the same inputs, datatrove's first (its rate is the group's `vs dt` base)."""
    run_rows = []
    for group in groups:
        base, base_cpu = group[0].per_core(), group[0].pages_in / group[0].cpu
        run_rows += [
            [
                r.name,
                f"{r.wall:.1f}",
                f"{r.pages_in:,}",
                f"{r.kept:,}",
                f"{r.per_core():.2f}",
                f"{r.per_core() / base:.2f}x",
                f"{r.cpu:.1f}",
                f"{r.pages_in / r.cpu:.2f}",
                f"{r.pages_in / r.cpu / base_cpu:.2f}x",
            ]
            for r in group
        ]
    lines = [
        f"Multilingual curation: {len(files)} WARC files, {args.cores} cores, preset {PRESET.name}; "
        "set-up included on both sides",
        "",
        table(
            [
                "run",
                "wall s",
                "pages in",
                "docs kept",
                "pages/s/core",
                "vs dt",
                "CPU s",
                "pages/CPU-s",
                "vs dt",
            ],
            run_rows,
        ),
        "  Set-up is in every row on both sides: datatrove builds its blocks, word tokenizers (a spaCy "
        "language class is 1-2 s to load) and LID model in every task, ours once per worker process and "
        "language. The large-file rows (--large-mb) show the rates where set-up is a small share.",
        "",
        f"Kept-set agreement per language (>= {args.min_pages} pages as labelled by datatrove's LID; "
        "both / either, by WARC record id, over the pages both readers take)",
        table(
            ["lang", "pages", "kept by both", "ours only", "datatrove only", "agreement"],
            [
                [
                    r["lang"],
                    str(r["pages"]),
                    str(r["both"]),
                    str(r["ours_only"]),
                    str(r["datatrove_only"]),
                    "-" if r["agreement"] is None else f"{100 * r['agreement']:.1f}%",
                ]
                for r in rows
            ],
        ),
    ]
    for group in groups:
        lines.append(ceiling_line(group[0], group[-1]))
    for r in (r for g in groups for r in g):
        lines.extend(f"  FAILED in {r.name}: {f}" for f in r.failed)
    return "\n".join(lines)


def ceiling(dt: Run, ours: Run) -> float | None:
    """The ratio ours would reach if trafilatura were its only cost: every page both sides read is
    extracted on both (the preset keeps every language, so nothing can be skipped before
    trafilatura), and datatrove runs the same trafilatura call, so this bounds any speed-up of the
    rest (reading, LID, filters, writing, set-up)."""
    extract = ours.stages.get("extract")
    if extract is None or extract.seconds <= 0:
        return None
    return (ours.pages_in / extract.seconds) / dt.per_core()


def ceiling_line(dt: Run, ours: Run) -> str:
    c = ceiling(dt, ours)
    if c is None:
        return "  ceiling: no extract stage time in our run"
    share = ours.stages["extract"].seconds / (ours.wall * ours.cores)
    return (
        f"  ceiling ({ours.name}): {c:.2f}x datatrove if everything but trafilatura cost nothing; "
        f"trafilatura is {100 * share:.0f}% of its core-seconds"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--input", "--files", dest="files", nargs="+", help="WARCs (default: 5 shared files)")
    ap.add_argument("--cores", type=int, default=2, help="workers on every side (default 2)")
    ap.add_argument("--timeout", type=float, default=5.0, help="per-page extraction timeout, both sides (s)")
    ap.add_argument("--min-pages", type=int, default=20, help="languages listed in the agreement table")
    ap.add_argument("--spark", action="store_true", help="also run our Spark job (startup reported apart)")
    ap.add_argument(
        "--large-mb",
        type=float,
        default=0.0,
        help="also run both sides on <cores> files of this many MB, the inputs concatenated (0: off)",
    )
    ap.add_argument("--keep", action="store_true", help="keep the outputs and logs (path printed)")
    ap.add_argument("--verbose", action="store_true", help="leave stderr (datatrove's logs) on the console")
    args = ap.parse_args(argv)

    files = resolve_files(args.files or list(DEFAULT_FILES))
    cfg = ExtractJobConfig.load(PRESET, [f"extract.timeout_s={args.timeout}"])
    for f in files:  # warm the page cache: time the work, not the disk
        Path(f).read_bytes()
    work = Path(tempfile.mkdtemp(prefix="refinery-multilingual-"))
    log = None if args.verbose else work / "stderr.log"
    print(f"{len(files)} files, cores={args.cores}; work dir {work}", flush=True)
    try:
        with stderr_to(log):
            spark_pids: set[int] = set()
            if args.spark:
                jvm, first_job, spark_pids = start_spark(args.cores)
                print(f"  Spark started: {jvm + first_job:.1f} s (not in the Spark row)", flush=True)
            dt = run_datatrove(
                files,
                cfg,
                args.cores,
                args.timeout,
                work / "dt",
                "parquet",
                spark_pids,
                datatrove_judges(cfg),
            )
            runs = [dt, run_pool(files, cfg, args.cores, work / "pool", spark_pids)]
            if args.spark:
                runs.append(run_spark(files, cfg, args.cores, work / "spark", spark_pids))
            groups = [runs]
            if args.large_mb > 0:  # throughput only: the same pages repeat, so no agreement table
                big = large_inputs(files, args.cores, args.large_mb, work / "large")
                judges = datatrove_judges(cfg)
                large = [
                    run_datatrove(
                        big, cfg, args.cores, args.timeout, work / "large-dt", "parquet", spark_pids, judges
                    ),
                    run_pool(big, cfg, args.cores, work / "large-pool", spark_pids),
                ]
                label = f" on {len(big)} x {args.large_mb:g} MB"
                groups.append([dataclasses.replace(r, name=r.name + label) for r in large])
    except BaseException:
        if log is not None and log.is_file():
            sys.stderr.write("".join(log.read_text(errors="replace").splitlines(True)[-40:]))
            sys.stderr.write(f"\n(full stderr in {log})\n")
        raise
    pages = datatrove_lang_pages(work / "dt" / "logs")
    both_read, one_reader = read_by_both(files, cfg)
    ours_kept, dt_kept = our_kept(work / "pool"), datatrove_kept(work / "dt" / "docs")
    rows = agreement(ours_kept, dt_kept, pages, args.min_pages, both_read)
    kept_one_reader = {
        "ours": sum(k not in both_read for k in ours_kept),
        "datatrove": sum(k not in both_read for k in dt_kept),
    }
    print()
    print(report(groups, rows, args, files))
    print(
        f"  pages one reader alone takes: ours {one_reader['ours']:,}, datatrove {one_reader['datatrove']:,} "
        f"(of these kept: ours {kept_one_reader['ours']:,}, datatrove {kept_one_reader['datatrove']:,}); "
        f"the agreement is over the {len(both_read):,} pages both take"
    )
    if args.keep:
        print(f"\noutputs and logs kept in {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    ours = runs[-1]
    summary = {
        "files": len(files),
        "cores": args.cores,
        "ours": ours.name,
        "ours_pages_per_s_per_core": round(ours.per_core(), 3),
        "datatrove_pages_per_s_per_core": round(dt.per_core(), 3),
        "ratio": round(ours.per_core() / dt.per_core(), 3),
        "ceiling": (c := ceiling(dt, ours)) and round(c, 3),
        "agreement": {r["lang"]: r["agreement"] and round(r["agreement"], 4) for r in rows},
        "pages_both_readers": len(both_read),
        "pages_one_reader": one_reader,
        "kept_one_reader": kept_one_reader,
    }
    if len(groups) > 1:
        l_dt, l_ours = groups[1][0], groups[1][-1]
        summary["large_files"] = {
            "mb_per_file": args.large_mb,
            "ours_pages_per_s_per_core": round(l_ours.per_core(), 3),
            "datatrove_pages_per_s_per_core": round(l_dt.per_core(), 3),
            "ratio": round(l_ours.per_core() / l_dt.per_core(), 3),
            "ceiling": (c := ceiling(l_dt, l_ours)) and round(c, 3),
        }
    print(json.dumps(summary))  # the last line: machine-readable
    return 1 if any(r.failed for g in groups for r in g) else 0


if __name__ == "__main__":
    sys.exit(main())
