"""Command line of the curation job: `python -m curation extract ...` (and `index`).

`extract --input ...` reads whole WARCs; `extract --index INDEX --where SQL --warc-base URL` reads
only the records an index query selects (curation/index/job.py); `index WARC... --output X.parquet`
writes such an index of local WARCs (curation/index/ccindex.py). Both take `--config FILE` and `--set
key=value` (core/cli.py): extract's keys are configs/extract.yaml's, index's are `IndexSettings`
below, whose flags (`--root`, `--no-languages`) are aliases.

`robots --input WARC... --output DIR` turns robots.txt WARCs into one row per host as of a date, and
`optout --input EXTRACT_DIR --robots DIR --policy FILE --output DIR` removes from an extract output what a
dated opt-out policy reserves, with an audit row per removal (curation/optout/, docs/optout.md).

`derive-language --lang xxx_Scrp --reference FILE...` measures a language's settings file
(configs/languages/) on reference text; `import-fineweb2 GIT_DIR --out DIR` writes the per-language
files from FineWeb-2's configs; `calibrate-lid --reference-dir DIR --out FILE` measures the LID
thresholds of every language of a folder of reference files with the model that runs (a table of
configs/languages/models/) (curation/languages/). None of them writes into the shipped
configs/ unless `--out` names the file there and `--force` is given (`check_out`).

It also runs under spark-submit (`spark-submit curation/__main__.py extract ...`); the token
jobs (train-tokenizer, tokenize) are `python -m tokens ...`.

Bad input (a config that does not validate, inputs that resolve to nothing, an output folder made
by another config) is reported as `error: ...` with exit status 2 before Spark starts. Exit
status 1 means the job ran but some input files failed unexpectedly (a rerun retries them).
"""

from __future__ import annotations

import argparse

from core.cli import add_config_args, add_spark_args, command_parser, load_settings, print_run, run_subcommand
from core.config import ConfigModel
from core.errors import InputError, OutputConflict
from core.output import OutputDir
from core.spark import SparkOptions
from curation.config import ExtractJobConfig


class IndexSettings(ConfigModel):
    """What `index` reads besides its WARCs and outputs (`--set languages=false` is `--no-languages`)."""

    root: str | None = None
    """Folder warc_filename is relative to (default: the WARCs' common folder)."""
    languages: bool = True
    """Fill content_languages/content_charset (decodes each HTML page and runs lid.176 on it)."""


def build_parser() -> argparse.ArgumentParser:
    parser, sub = command_parser("curation", __doc__)
    _add_extract(sub)
    _add_index(sub)
    _add_derive_language(sub)
    _add_calibrate_lid(sub)
    _add_import_fineweb2(sub)
    _add_robots(sub)
    _add_optout(sub)
    return parser


def _add_robots(sub: argparse._SubParsersAction) -> None:
    rb = sub.add_parser("robots", help="robots.txt WARCs -> one row per host as of a date (Parquet) on Spark")
    rb.add_argument(
        "--input", required=True, nargs="+", metavar="PATH_OR_GLOB",
        help="robots.txt WARCs (Common Crawl's robotstxt/ subset), local, s3://, https:// or a warc.paths listing",
    )  # fmt: skip
    rb.add_argument("--output", required=True, metavar="DIR", help="output folder: hosts/ and stats.json")
    add_config_args(rb, "SnapshotConfig in curation/optout/snapshot.py", "as_of=2025-09-30")
    add_spark_args(rb)


def _add_optout(sub: argparse._SubParsersAction) -> None:
    oo = sub.add_parser(
        "optout", help="an extract output minus what an opt-out policy reserves, with an audit row each"
    )
    oo.add_argument("--input", required=True, metavar="DIR", help="an extract output folder (its docs/)")
    oo.add_argument("--robots", required=True, metavar="DIR", help="a `robots` snapshot folder (hosts/)")
    oo.add_argument(
        "--policy", metavar="FILE.yaml", help="the agent list (default configs/optout/apertus-2025-01.yaml)"
    )
    oo.add_argument("--output", required=True, metavar="DIR", help="output folder: docs/, audit/, stats.json")
    add_config_args(oo, "OptoutJobConfig in curation/optout/stage.py", "page.noai=false")
    add_spark_args(oo)


def _add_extract(sub: argparse._SubParsersAction) -> None:
    ex = sub.add_parser("extract", help="WARC files -> filtered documents (Parquet) on Spark")
    source = ex.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--input",
        nargs="+",
        metavar="PATH_OR_GLOB",
        help="local paths or globs, s3:// or https:// URLs, or a Common Crawl warc.paths(.gz) listing "
        "(a remote listing's lines must lie under cc_base_url; a local one may name any path)",
    )
    source.add_argument(
        "--index",
        metavar="INDEX",
        help="a cc-index table (Parquet file or folder, local or s3://) or a CDXJ file: extract only "
        "the records --where selects, fetched by ranged reads from --warc-base (both required with --index)",
    )
    ex.add_argument(
        "--where",
        metavar="SQL",
        help="required with --index: SQL condition over the index columns, e.g. "
        "\"content_languages = 'eng'\"",
    )
    ex.add_argument(
        "--warc-base",
        metavar="URL_OR_PREFIX",
        help="required with --index: where warc_filename lives: https://data.commoncrawl.org/, s3://commoncrawl/, "
        "an http:// server, or a local folder; a warc_filename that does not resolve under it (.., an "
        "absolute path, another scheme, host or bucket, a link out of the folder) is refused",
    )
    ex.add_argument("--output", required=True, metavar="DIR", help="output folder (created)")
    add_config_args(ex, "configs/extract.yaml")
    add_spark_args(ex)


def _add_index(sub: argparse._SubParsersAction) -> None:
    ix = sub.add_parser("index", help="local WARCs -> a cc-index table (Parquet), optionally CDXJ")
    ix.add_argument("warcs", nargs="+", metavar="WARC", help="local WARC files (per-record gzip or plain)")
    ix.add_argument("--output", required=True, metavar="INDEX.parquet", help="the Parquet file to write")
    ix.add_argument(
        "--root",
        metavar="DIR",
        help="folder warc_filename is relative to: the one to serve or upload as --warc-base "
        "(default: the WARCs' common folder)",
    )
    ix.add_argument("--cdxj", metavar="FILE", help="also write a sorted CDXJ index (cdxj-indexer)")
    ix.add_argument(
        "--no-languages",
        dest="languages",
        action="store_const",
        const=False,
        default=None,
        help="leave content_languages/content_charset null (skips decoding and lid.176 per HTML page)",
    )
    add_config_args(ix, "IndexSettings in curation/cli.py", "languages=false")


def _add_derive_language(sub: argparse._SubParsersAction) -> None:
    dl = sub.add_parser(
        "derive-language",
        help="a language's settings file (configs/languages/) measured on reference text in it",
    )
    dl.add_argument("--lang", required=True, metavar="xxx_Scrp", help="the language, e.g. deu_Latn")
    dl.add_argument(
        "--reference",
        required=True,
        nargs="+",
        metavar="FILE",
        help="UTF-8 text in the language: .jsonl (each record's `text` a document) or plain text "
        "(documents separated by blank lines, or see --lines-per-doc)",
    )
    dl.add_argument(
        "--lines-per-doc",
        type=int,
        metavar="N",
        help="plain text with one sentence a line: every N lines make a document",
    )
    dl.add_argument("--segmenter", metavar="NAME", help="word segmenter (default: the language's own)")
    dl.add_argument(
        "--max-lines",
        type=int,
        default=1_000_000,
        metavar="N",
        help="non-empty reference lines read at most (default 1000000; the rest is not read)",
    )
    dl.add_argument(
        "--out",
        metavar="FILE.yaml",
        help="write here (named after --lang; a settings folder of your own), else print to stdout",
    )
    dl.add_argument("--force", action="store_true", help="allow --out to replace a shipped file of configs/")


def _add_calibrate_lid(sub: argparse._SubParsersAction) -> None:
    cl = sub.add_parser(
        "calibrate-lid",
        help="LID thresholds measured with the model that runs (configs/languages/models/<scheme>.yaml)",
    )
    cl.add_argument(
        "--reference-dir",
        required=True,
        metavar="DIR",
        help="one UTF-8 file per language, named by its code (de.txt, deu.txt or deu_Latn.txt), one "
        "sentence or paragraph a line",
    )
    cl.add_argument("--max-lines", type=int, default=1000, help="lines read per file (default 1000)")
    cl.add_argument("--model", metavar="PATH", help="a fastText LID model (default: lid.176)")
    cl.add_argument("--source", default=None, help="what the reference text is (written in the table)")
    cl.add_argument(
        "--out",
        required=True,
        metavar="FILE.yaml",
        help="the table to write, named <scheme>.yaml (lid176.yaml), e.g. MY_SETTINGS/models/lid176.yaml",
    )
    cl.add_argument(
        "--force",
        action="store_true",
        help="allow --out to replace the shipped configs/languages/models table",
    )


def _add_import_fineweb2(sub: argparse._SubParsersAction) -> None:
    fw = sub.add_parser(
        "import-fineweb2",
        help="rewrite configs/languages/ from FineWeb-2's per-language configs (a git clone of it)",
    )
    fw.add_argument("fineweb2", metavar="GIT_DIR", help="a clone of huggingface/fineweb-2 (or its .git)")
    fw.add_argument("--rev", default="HEAD", help="the commit to read (default HEAD)")
    fw.add_argument("--top", type=int, default=50, help="how many of its largest languages (default 50)")
    fw.add_argument(
        "--out", required=True, metavar="DIR", help="the folder to write (configs/languages/ needs --force)"
    )
    fw.add_argument(
        "--force", action="store_true", help="allow --out to replace the shipped configs/languages/"
    )


def main(argv: list[str] | None = None) -> int:
    bodies = {
        "extract": _extract,
        "index": _index,
        "derive-language": _derive_language,
        "import-fineweb2": _import_fineweb2,
        "calibrate-lid": _calibrate_lid,
        "robots": _robots,
        "optout": _optout,
    }
    return run_subcommand(build_parser(), bodies, argv)


def _extract(args: argparse.Namespace) -> int:
    from curation.job import run_extract

    cfg = ExtractJobConfig.load(args.config, args.overrides)
    if args.index is not None:
        return _extract_index(args, cfg)
    if args.where is not None or args.warc_base is not None:
        raise InputError("--where and --warc-base go with --index, not --input")
    result = run_extract(
        args.input,
        args.output,
        cfg,
        spark=SparkOptions.from_args(args),
    )
    return print_run(
        "extract", result, f"config {cfg.fingerprint()}" + _ranges_note(result.output, result.inputs)
    )


def _ranges_note(output: str, units: int) -> str:
    """What extract's `inputs:` count when large WARCs were cut into byte ranges, from the folder's record.

    The runner counts units, and a WARC larger than the planned range size is several units
    (curation/warc/ranges.py), so "inputs: 9" for 4 files needs saying. The size is planned per run
    (`unit_bytes`: at most reader.split_bytes, smaller so each core gets reader.units_per_core ranges).
    """
    try:
        record = OutputDir(output).read_json("_config.json") or {}
    except (OSError, ValueError, OutputConflict):  # the run's own lines report a damaged folder
        return ""
    files, unit_bytes = len(record.get("inputs") or ()), record.get("unit_bytes") or record.get("split_bytes")
    if not files or files == units or not unit_bytes:
        return ""
    return (
        f"; inputs are byte ranges: {units} of {files} files, each up to {unit_bytes / 2**20:.1f} MiB "
        f"(reader.split_bytes caps it, reader.units_per_core plans it)"
    )


def _extract_index(args: argparse.Namespace, cfg: ExtractJobConfig) -> int:
    from curation.index.job import run_index_extract

    if args.where is None or args.warc_base is None:
        raise InputError("--index needs --where (the SQL condition) and --warc-base (where the WARCs are)")
    result = run_index_extract(
        args.index,
        args.where,
        args.warc_base,
        args.output,
        cfg,
        spark=SparkOptions.from_args(args),
    )
    from curation.job import check_extract_removal

    check_extract_removal(result, cfg)  # the guard run_extract applies, for the index's records too
    fetched = {k: v for k, v in result.stats.counters.items() if k.startswith("fetch_")}
    detail = f"config {cfg.fingerprint()}; " + ", ".join(f"{k} {v}" for k, v in sorted(fetched.items()))
    return print_run("extract", result, detail)


def _index(args: argparse.Namespace) -> int:
    from pathlib import Path

    from curation.index.ccindex import build_index

    cfg = load_settings(IndexSettings, args, {"root": args.root, "languages": args.languages})
    missing = [w for w in args.warcs if not Path(w).is_file()]
    if missing:
        raise InputError(f"not a file: {', '.join(missing[:5])}")
    report = build_index(args.warcs, args.output, cfg.root, args.cdxj, languages=cfg.languages)
    print(f"Refinery index -> {args.output}: {report.rows} records of {len(report.files)} WARCs")
    for name, n in report.files.items():
        err = report.errors.get(name)
        print(f"  {name}: {n} records" + (f"  (stopped early: {err})" if err else ""))
    return 1 if report.errors else 0


def _derive_language(args: argparse.Namespace) -> int:
    from pathlib import Path

    from curation.languages.derive import derive_from_files
    from curation.languages.files import check_out, dump, is_regular, write_settings
    from curation.languages.schema import check_language, check_segmenter

    # every input checked before the LID model and the segmenter load
    check_language("--lang", args.lang)
    missing = [f for f in args.reference if not is_regular(Path(f))]
    if missing:
        raise InputError(f"--reference: not a regular file: {', '.join(missing[:5])}")
    if args.lines_per_doc is not None and not 1 <= args.lines_per_doc <= 100_000:
        raise InputError(f"--lines-per-doc must be in [1, 100000], got {args.lines_per_doc}")
    if not 1 <= args.max_lines <= 100_000_000:
        raise InputError(f"--max-lines must be in [1, 100000000], got {args.max_lines}")
    if args.segmenter is not None:
        check_segmenter(args.segmenter)
    out = Path(args.out) if args.out else None
    if out is not None:
        if out.name != f"{args.lang}.yaml":
            raise InputError(f"--out must be named {args.lang}.yaml (the loader finds a language by name)")
        check_out(out, args.force)
    from curation.config import LangIdConfig
    from curation.filters.langid import LanguageIdentifier

    lid = LanguageIdentifier(LangIdConfig(languages=()))
    settings = derive_from_files(
        args.lang, args.reference, args.lines_per_doc, args.segmenter, lid=lid, max_lines=args.max_lines
    )
    how = "Made by `python -m curation derive-language` (curation/languages/derive.py: derive_settings)."
    if out is None:
        print(dump(settings, how), end="")
        return 0
    write_settings(settings, out, how)  # validated (read back) before the temporary file is renamed
    q = settings.gopher_quality
    print(
        f"Refinery derive-language {args.lang} -> {out}: lid_threshold {settings.lid_threshold}, "
        f"{len(q.stop_words)} stop words ({', '.join(q.stop_words[:10])}), "
        f"word length {q.min_avg_word_length}-{q.max_avg_word_length}, segmenter {settings.segmenter}"
    )
    return 0


def _import_fineweb2(args: argparse.Namespace) -> int:
    from pathlib import Path

    from curation.languages.files import check_out
    from curation.languages.fineweb2 import write_fineweb2

    if not Path(args.fineweb2).is_dir():
        raise InputError(f"not a folder: {args.fineweb2}")
    if not 1 <= args.top <= 2000:
        raise InputError(f"--top must be in [1, 2000], got {args.top}")
    out = Path(args.out)
    check_out(out, args.force, parent=False)  # the folder the files go in (made if missing)
    written = write_fineweb2(args.fineweb2, out, args.top, args.rev)
    print(f"Refinery import-fineweb2 -> {written[0].parent}: {len(written)} files")
    return 0


def _calibrate_lid(args: argparse.Namespace) -> int:
    from pathlib import Path

    from core.languages import LanguageCodeError, check_code
    from curation.config import LangIdConfig
    from curation.filters.langid import LanguageIdentifier
    from curation.languages.files import check_out, is_regular
    from curation.languages.lid_tables import (
        MIN_LID_LINES,
        calibrate_lid,
        reference_lines,
        write_model_thresholds,
    )

    folder = Path(args.reference_dir)
    if not folder.is_dir():
        raise InputError(f"--reference-dir: not a folder: {folder}")
    if not 20 <= args.max_lines <= 1_000_000:
        raise InputError(f"--max-lines must be in [20, 1000000], got {args.max_lines}")
    if args.model is not None and not Path(args.model).is_file():
        raise InputError(f"--model: not a file: {args.model}")
    out = check_out(args.out, args.force, parent=False)  # before the model loads or a line is read
    files: dict[str, Path] = {}
    skipped, irregular = [], []
    for f in sorted(folder.iterdir()):
        try:
            check_code(f.stem)
        except LanguageCodeError:
            skipped.append(f.name)  # not named by a language: not reference text
            continue
        if not is_regular(f):
            irregular.append(f.name)  # a FIFO or device would block the read forever
            continue
        files[f.stem] = f
    if not files:
        raise InputError(f"--reference-dir: no regular file named by a language code in {folder}")
    # the model's file and labels, checked as the config loads (exit 2 on a bad one, before any line)
    lid = LanguageIdentifier(LangIdConfig(languages=(), model_path=args.model))
    if out.name != f"{lid.scheme}.yaml":
        raise InputError(f"--out must be named {lid.scheme}.yaml (the model's label scheme)")
    references = {code: reference_lines(f, args.max_lines) for code, f in files.items()}
    table = calibrate_lid(references, lid)
    if not table:
        raise InputError(
            f"--reference-dir: no language had {MIN_LID_LINES} lines identified as it in {folder}; "
            f"nothing written to {out}"
        )
    source = args.source or f"{folder} ({len(files)} files, up to {args.max_lines} lines each)"
    how = (
        "Made by `python -m curation calibrate-lid`: clip(median - std, 0.3, 0.9) of the judged probability."
    )
    write_model_thresholds(table, lid.scheme, source, out, how)
    notes = [f"not named by a code, skipped: {', '.join(skipped[:5])}"] if skipped else []
    if irregular:
        notes.append(f"not regular files, skipped: {', '.join(irregular[:5])}")
    print(
        f"Refinery calibrate-lid -> {out}: {len(table)} language codes from {len(files)} files"
        + (f" ({'; '.join(notes)})" if notes else "")
    )
    return 0


def _robots(args: argparse.Namespace) -> int:
    from core.output import check_disjoint
    from curation.optout.snapshot import SnapshotConfig, run_robots_snapshot

    cfg = load_settings(SnapshotConfig, args, {})
    check_disjoint(args.output, args.input)
    spark = _session(args, "refinery-robots")
    stats = run_robots_snapshot(args.input, args.output, cfg, spark)
    print(f"Refinery robots -> {args.output}: {stats['hosts']} hosts as of {stats['as_of'] or 'the newest'}")
    for reason, n in stats["reasons"].items():
        print(f"  {reason}: {n}")
    return 0


def _optout(args: argparse.Namespace) -> int:
    from curation.optout.stage import OptoutJobConfig, prepare, run_optout

    cfg = load_settings(OptoutJobConfig, args, {"policy": args.policy})
    prepare(args.input, args.robots, args.output, cfg)  # every input checked before Spark starts
    spark = _session(args, "refinery-optout")
    s = run_optout(args.input, args.robots, args.output, cfg, spark)
    cov = s["coverage"]
    print(
        f"Refinery optout -> {args.output}: policy {s['policy']['id']} (sha256 {s['policy']['sha256'][:12]}), "
        f"snapshot as of {s['snapshot']['as_of'] or 'the newest'}\n"
        f"documents: {s['docs_in']} in, {s['docs_removed']} removed, {s['docs_out']} kept; hosts with a "
        f"robots.txt capture: {cov['hosts_with_capture']}, without: {cov['hosts_without_capture']}"
    )
    for reason, n in s["removed_by_reason"].items():
        print(f"  {reason}: {n['docs']} documents, {n['chars']} characters")
    return 0


def _session(args: argparse.Namespace, name: str):
    """The SparkSession of a job that takes a session (`--master`, `--spark-conf`)."""
    from core.spark import get_spark

    opts = SparkOptions.from_args(args)
    return get_spark(opts.master, name, opts.conf)
