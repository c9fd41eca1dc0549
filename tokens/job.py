"""The `tokenize` job: document Parquet files -> token shards, one shard per input file, on core's runner.

One input Parquet file of documents becomes one shard `shards/<source>/part-NNNNN.{bin,idx}` (format:
tokens/shards.py, Megatron MMIDIDX), plus `part-NNNNN.ids.parquet` (the document `id` of every
shard document, in order: provenance down to the document). `NNNNN` is the file's position in the
sorted input listing (core.files.doc_parquet_files), so a rerun on the same inputs names parts the
same. The source folder is a core `OutputDir` with `stats/` and `done/` only; a part's files are
written under temporary names and committed by `OutputDir.commit_unit`, whose completion marker
`done/part-NNNNN.json` carries the part's hashes, counts and input (what the manifest is made of).
When every part is done, `manifest.json` is written from the markers: it marks a complete source.
An input rewritten under the same name since its part was made is refused naming the file, or its
part is redone under `on_changed_input="restart"` (core.output.guard_inputs); an `--output` that
is the input, lies inside it or holds it is refused before anything is read.

A percentile selector (`quality: "top 30%"`) is resolved over the whole source on the driver before
Spark starts (core.selectors.resolve_percentiles: only the selectors' columns are read), and tasks
get the plain comparison it resolved to (`">= t"`). The output's config, and so its fingerprint and
`manifest.json`, records it as `resolved_select` beside the `select` given (the manifest adds what
each resolution counted, `percentiles`): the folder says which threshold made it, and an input
rewritten since (another threshold) is another config, refused into the same folder.

Documents are kept in input order (determinism: the same input and tokenizer give byte-identical
shards). Rows the recipe's selectors reject, and rows with a null or empty `text`, are counted per
reason in the part's stats, never dropped silently. `tokenize_unit` is what a Spark task runs for
its file (core.runner.run_per_file); `tokenize_file` runs one file without Spark (tests, bench).

Per language: where the input has a `lang` column, each part counts, per `lang` value of the documents
it tokenizes, documents, UTF-8 bytes and tokens (EOD not counted: bytes per token is the tokenizer's
compression of that language's text), in its marker and stats as `languages`; the manifest sums them.
The mapping is bounded (tokens/lang_counts.py: `MAX_LANGUAGE_KEYS` values, the rest under "other"): the column is data, and
a column of ids mistaken for languages must not grow a marker without end. The report's "bytes per
token by language" table reads it.

Encoding uses `tokens.tokenizer.build_encoder`: tiktoken when it gives exactly the HF ids for this
tokenizer.json (~4x faster), else HF with the reason logged; the part's marker records which
(`encoder`). Both give byte-identical shards (tests/tokens/test_tokenizer_fast.py).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from core.errors import InputError
from core.files import doc_parquet_uris, parquet_schema, sha256_file
from core.names import check_file_name
from core.output import OutputDir, check_disjoint, check_layout
from core.removal import check_removal
from core.runner import PerFileJob, RunResult, run_per_file, run_unit
from core.safe_json import loads_checked
from core.selectors import (
    Selector,
    SelectorError,
    parse_selectors,
    resolve_percentiles,
    selection_mask,
    selectors_spec,
)
from core.spark import DEFAULT_SPARK, SparkOptions, check_master
from core.stats import Stats
from core.storage import is_object_store, join, local_input
from tokens.lang_counts import LANGUAGE_COLUMN, count_languages
from tokens.shards import build_manifest, dtype_for_vocab, write_shard_files
from tokens.tokenizer import build_encoder, load_tokenizer

log = logging.getLogger(__name__)

# Documents per encode call: amortises HF's Python<->Rust crossing and bounds the ids held as lists.
BATCH_DOCS = 512
STAGES = ("select", "tokenize")
SUBDIRS = ("stats", "done")
"""A source folder's per-part folders; the shard files themselves sit at its root."""


@dataclass(frozen=True, slots=True)
class TokenizeTask:
    """Everything a task needs, picklable (the tokenizer travels as its JSON text); broadcast once."""

    source: str
    out_dir: str
    """shards/<source> folder."""
    tokenizer_json: str
    tokenizer_sha256: str
    eod_token: str
    selectors: tuple[Selector, ...] = ()
    text_column: str = "text"
    encoder: str = "auto"
    """tokens.tokenizer.ENCODERS: auto (tiktoken when exact, else HF), tiktoken, hf."""


def part_name(index: int) -> str:
    return f"part-{index:05d}"


_ENCODERS: dict[tuple[str, str], Any] = {}


def encoder_for(task: TokenizeTask) -> Any:
    """One built encoder per worker process (keyed by tokenizer hash and mode), reused across tasks."""
    key = (task.tokenizer_sha256, task.encoder)
    enc = _ENCODERS.get(key)
    if enc is None:
        enc = _ENCODERS[key] = build_encoder(task.tokenizer_json, task.encoder)
    return enc


def tokenize_file(index: int, path: str, task: TokenizeTask) -> dict[str, Any]:
    """Tokenize one Parquet file into part `index` of `task.out_dir`, without Spark; never raises.

    The summary has `status` "done" (with the marker's fields and the part's `stats`) or "failed"
    (with the error; nothing committed, temporary files removed).
    """
    for sub in SUBDIRS:
        (Path(task.out_dir) / sub).mkdir(parents=True, exist_ok=True)
    return run_unit(tokenize_unit, (str(path), part_name(index)), task, task.out_dir)


def tokenize_unit(path: str, unit: str, task: TokenizeTask, out_root: str) -> dict[str, Any]:
    """The runner's `process`: tokenize one file into part `unit` and commit it; raises on failure."""
    import pyarrow.parquet as pq

    # One Spark task per core: the tokenizer's own Rust thread pool would oversubscribe the cores.
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    t0, cpu0 = time.perf_counter(), time.process_time()
    out = OutputDir(out_root, SUBDIRS)
    stats = Stats()
    with local_input(path) as local:  # an object-store input is downloaded for the task
        schema = pq.read_schema(local)
        needed = [task.text_column, "id", LANGUAGE_COLUMN, *(s.column for s in task.selectors)]
        columns = [c for c in dict.fromkeys(needed) if c in schema.names]
        table = pq.read_table(local, columns=columns)
        input_sha256 = sha256_file(local)
    if task.text_column not in table.column_names:
        raise ValueError(f"{path}: no {task.text_column!r} column; columns: {', '.join(schema.names)}")

    with stats.timed("select"):
        mask, drops = selection_mask(table, task.selectors, source=path)
        sel = table.filter(mask)
        st = stats.stage("select")
        st.docs_in, st.docs_out = table.num_rows, sel.num_rows
        for reason, count in drops.items():
            st.drops[reason] += count

    enc = encoder_for(task)
    dtype = dtype_for_vocab(enc.hf.get_vocab_size())
    kept_ids, arrays, languages = _encode(sel, task.text_column, enc, dtype, stats)
    tmp = {ext: out.tmp_path("", unit, ext) for ext in (".bin", ".idx", ".ids.parquet")}
    info = write_shard_files(tmp[".bin"], tmp[".idx"], arrays, enc.hf.token_to_id(task.eod_token), dtype)
    _write_ids(tmp[".ids.parquet"], kept_ids, arrays)
    seconds, cpu_seconds = time.perf_counter() - t0, time.process_time() - cpu0
    marker = {
        "part": unit,
        "input": str(path),
        "input_sha256": input_sha256,
        "input_metadata": _refinery_metadata(schema),
        "documents": info["documents"],
        "tokens": info["tokens"],
        "bin": f"{unit}.bin",
        "idx": f"{unit}.idx",
        "ids": f"{unit}.ids.parquet",
        "bin_sha256": info["bin_sha256"],
        "idx_sha256": info["idx_sha256"],
        "bin_bytes": info["bin_bytes"],
        "dtype": str(dtype),
        "encoder": enc.backend,
        **({"languages": languages} if languages is not None else {}),
    }
    unit_stats = {
        "input": str(path),
        "unit": unit,
        "docs_written": info["documents"],
        "tokens": info["tokens"],
        "encoder": enc.backend,
        "seconds": round(seconds, 6),
        # CPU time of this process: per-core throughput that a busy, shared machine does not skew.
        "cpu_seconds": round(cpu_seconds, 6),
        "tokenize_seconds": round(stats.stage("tokenize").seconds, 6),
        **({"languages": languages} if languages is not None else {}),
        **stats.to_dict(),
    }
    # .bin, .idx and .ids.parquet are renamed into place, then stats, then the marker (last): a
    # part without its marker is redone from scratch.
    out.commit_unit(unit, list(tmp.values()), unit_stats, marker=marker)
    timing = {k: unit_stats[k] for k in ("seconds", "cpu_seconds", "tokenize_seconds")}
    return {**marker, **timing, "stats": stats.to_dict()}


def _encode(
    sel: Any, text_column: str, enc: Any, dtype: np.dtype, stats: Stats
) -> tuple[list[Any], list[np.ndarray], dict[str, dict[str, int]] | None]:
    """(document ids, token arrays without EOD, per-language counts or None without a `lang` column)
    of the selected rows that have text, in order."""
    texts = sel.column(text_column).to_pylist()
    ids = sel.column("id").to_pylist() if "id" in sel.column_names else [None] * len(texts)
    has_lang = LANGUAGE_COLUMN in sel.column_names
    langs = sel.column(LANGUAGE_COLUMN).to_pylist() if has_lang else [None] * len(texts)
    kept_langs: list[Any] = []
    kept_ids: list[Any] = []
    arrays: list[np.ndarray] = []
    with stats.timed("tokenize"):
        st = stats.stage("tokenize")
        good: list[str] = []
        for doc_id, text, lang in zip(ids, texts, langs, strict=True):
            st.docs_in += 1
            if not isinstance(text, str):
                st.drops["null_text"] += 1
            elif not text:
                st.drops["empty_text"] += 1
            else:
                nbytes = len(text.encode("utf-8"))
                st.bytes_in += nbytes
                st.bytes_out += nbytes
                st.docs_out += 1
                good.append(text)
                kept_ids.append(doc_id)
                kept_langs.append(lang)
        for i in range(0, len(good), BATCH_DOCS):
            arrays += [np.asarray(a, dtype=dtype) for a in enc.encode_batch(good[i : i + BATCH_DOCS])]
    languages = count_languages(kept_langs, good, arrays) if has_lang else None
    return kept_ids, arrays, languages


def _write_ids(path: Path, kept_ids: list[Any], arrays: list[np.ndarray]) -> None:
    """part-NNNNN.ids.parquet: each shard document's `id` and its token count (EOD included)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"id": pa.array(kept_ids, type=pa.string()), "tokens": [len(a) + 1 for a in arrays]})
    pq.write_table(table, path, compression="zstd")


def _refinery_metadata(schema: Any) -> Any:
    """The `refinery` schema metadata an earlier stage left (config fingerprint, input WARC)."""
    raw = (schema.metadata or {}).get(b"refinery")
    if raw is None:
        return None
    try:  # the checked reader: an input file's metadata is outside data
        return loads_checked(raw, "the `refinery` schema metadata")
    except ValueError:  # JSONFileError too: shown as text, as before
        return raw.decode("utf-8", "replace")


# -- the job -------------------------------------------------------------------------------------


@dataclass
class TokenizeResult(RunResult):
    """The runner's result for one source (`output` is the shards/<source> folder), plus its manifest."""

    manifest: dict[str, Any] | None = None
    """manifest.json, once every part is done; None while some part is missing."""
    encoder: str = ""
    """Encoder the driver chose ("tiktoken" or "hf (reason)"); each part's marker records its own."""


def list_inputs(input_dir: str, selectors: tuple[Selector, ...]) -> list[str]:
    """The input files (absolute, sorted); InputError/SelectorError for a missing column, before Spark."""

    files = doc_parquet_uris(input_dir)  # absolute local paths, or object-store URIs
    for f in files:
        schema = parquet_schema(f)
        names = schema.names
        if "text" not in names:
            raise InputError(f"{f}: no 'text' column; columns: {', '.join(names)}")
        for s in selectors:
            if s.column not in names:
                raise SelectorError(
                    f"{f}: selector `{s}` needs column {s.column!r}, which is not there; "
                    f"columns: {', '.join(names)}"
                )
        # Applied to no rows of this file's schema: a value the column's type cannot be compared
        # with (`lang_score=~~ 1` on a float) fails here, not in every Spark task. Percentiles are
        # checked when they are resolved (core.selectors.resolve_percentiles).
        plain = tuple(s for s in selectors if not s.is_percentile)
        if plain:
            selection_mask(schema.empty_table(), plain, source=f)
    return files


def tokenize_config(
    source: str,
    selectors: tuple[Selector, ...],
    tok: Any,
    files: list[str],
    resolved: tuple[Selector, ...] | None = None,
) -> dict:
    """What decides a source's shards; recorded in `_config.json` and fingerprinted. `resolved`: the
    selectors with their percentiles resolved, recorded (`resolved_select`) only where there were any,
    so a selection without percentiles names its folder as it always did."""
    config = {
        "source": source,
        "select": selectors_spec(selectors),
        "tokenizer_sha256": tok.sha256,
        "eod_token": tok.eod_token,
        # The input list is part of the config: another list into the same source is refused.
        "inputs": files,
    }
    if resolved is not None and resolved != selectors:
        config["resolved_select"] = selectors_spec(resolved)
    return config


def config_fingerprint(config: dict[str, Any]) -> str:
    # json.dumps' default separators (not core.config.fingerprint_of's compact ones): this is the
    # formula every existing source folder and manifest was named with.
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:12]


def _load_tokenizer(tokenizer: str, eod_token: str | None, encoder: str):
    """(tokenizer, its JSON, the encoder used and why), or InputError before Spark starts."""
    try:
        tok = load_tokenizer(tokenizer, eod_token)  # a local file or an object-store URI
        tokenizer_json = tok.tokenizer_json
        # Chosen here once so the log says which encoder and why, and encoder=tiktoken on a
        # tokenizer it cannot express fails before Spark starts; workers repeat the same choice.
        enc = build_encoder(tokenizer_json, encoder)
    except ValueError as e:
        raise InputError(str(e)) from None
    encoder_used = enc.backend + (f" ({enc.reason})" if enc.reason else "")
    log.info("tokenize: encoder %s", encoder_used)
    return tok, tokenizer_json, encoder_used


def _resolve(
    selectors: tuple[Selector, ...], files: list[str], source: str
) -> tuple[tuple[Selector, ...], dict[str, dict[str, Any]]]:
    """The selectors with their percentiles resolved over the source's files, and what each counted."""
    resolved, percentiles = resolve_percentiles(selectors, files, source=f"source {source!r}")
    for column, c in percentiles.items():
        log.info(
            "tokenize %s: %s: %s -> %s (%d of %d ranked values selected, %d by ties; %d null, %d NaN)",
            *(source, column, c["percentile"], c["resolved"], c["selected"], c["ranked"], c["ties"]),
            *(c["null"], c["nan"]),
        )
    return resolved, percentiles


def check_selected(stats: Stats, selectors: tuple[Selector, ...], where: str, allowed: bool) -> None:
    """Refuse a selection that kept no document of a non-empty source (core/removal.py), naming each
    selector and column that dropped documents, with how many.

    parse_selectors refuses a condition no value can pass, and a percentile refuses a column with
    nothing to rank; a plain threshold over a column that is null or NaN everywhere (NaN fails every
    comparison) passes both and is only seen here, once every part has counted its drops. Only an
    empty selection is refused, not a share: `top 0.5%` keeps 0.5% on purpose."""
    st = stats.stages.get("select")
    if not selectors or st is None:
        return
    why = []
    for reason, n in st.drops.most_common():
        kind, _, what = reason.partition(":")
        if kind == "select":
            why.append(f"`{what}` failed on {n:,}")
        elif kind == "null":
            why.append(f"column {what!r} is null on {n:,}")
    check_removal(
        "tokenize's selection",
        st.docs_in - st.docs_out,
        st.docs_in,
        "the selectors (select / --select): "
        + "; ".join(why)
        + (" (a NaN value fails every comparison)" if any(w.startswith("`") for w in why) else ""),
        "allow_remove_all",
        allowed,
        share=1.0,
        min_total=1,
        left=f"Its parts are in {where}, empty and without manifest.json, so nothing reads this source.",
    )


def _tokenize_job(
    source, out_uri, tok, tokenizer_json, resolved, encoder, config, fingerprint, on_changed_input
):
    """The per-file job of one tokenize run: each unit a Parquet file, tokenized by `tokenize_unit`."""
    task = TokenizeTask(
        source=source,
        out_dir=out_uri,
        tokenizer_json=tokenizer_json,
        tokenizer_sha256=tok.sha256,
        eod_token=tok.eod_token,
        selectors=resolved,  # tasks see plain comparisons only
        encoder=encoder,
    )
    return PerFileJob(
        "tokenize",
        config,
        fingerprint,
        tokenize_unit,
        payload=task,
        stage_order=STAGES,
        subdirs=SUBDIRS,
        guard_inputs=False,  # the input list is part of `config` (and of the fingerprint) already
        on_changed_input=on_changed_input,
        inputs_guarded=True,  # checked before the run: overlap and content (before the manifest is judged)
    )


def _finish(out, units, res, manifest_args, resolved, allow_remove_all) -> dict | None:
    """The source's manifest.json once every part is done (None while some are not), after the removal
    guard on a first completion."""
    markers = [m for _, u in units if (m := out.read_marker(u)) is not None]
    if len(markers) != len(units):
        return None
    # a manifest there already: an earlier run finished this folder (with the opt-in, if it was empty)
    if not out.store.exists(out.path("manifest.json")):
        check_selected(res.stats, resolved, out.uri, allow_remove_all)
    source, config, fingerprint, tok, percentiles = manifest_args
    manifest = build_manifest(source, config, fingerprint, tok, markers, percentiles)
    out.write_json("manifest.json", manifest)
    return manifest


def run_tokenize(
    input_dir: str,
    tokenizer: str,
    output: str,
    source: str = "default",
    select: dict[str, Any] | None = None,
    eod_token: str | None = None,
    encoder: str = "auto",
    on_changed_input: str | None = None,
    *,
    spark: SparkOptions = DEFAULT_SPARK,
    allow_remove_all: bool = False,
) -> TokenizeResult:
    """Tokenize every Parquet file of `input_dir` into `output/shards/<source>/` on Spark.

    Bad input (no documents, a missing `text` or selector column, a tokenizer without an EOD token,
    an output folder made by another tokenizer/selection/input list) raises before Spark starts.
    `encoder` (tokens.tokenizer.ENCODERS) is not part of the output's config: every encoder gives
    the same bytes, so a rerun with another one resumes the same folder. `on_changed_input`: an
    input whose content changed since its part was made is refused ("refuse", the default unless
    $REFINERY_ON_CHANGED_INPUT says otherwise) or its part redone ("restart"). A selection that
    keeps no document of a non-empty source is refused before the manifest is written (`check_selected`)
    unless `allow_remove_all`.
    """
    try:  # a folder under shards/: one plain component, by the rule every name from a file follows
        check_file_name(source)
    except ValueError as e:
        raise InputError(f"--source: {e}") from None
    selectors = parse_selectors(select or {}, where="--select")
    check_disjoint(output, [input_dir])  # before listing: our own shards would be listed as input
    files = list_inputs(input_dir, selectors)
    check_disjoint(output, files=files)
    tok, tokenizer_json, encoder_used = _load_tokenizer(tokenizer, eod_token, encoder)
    resolved, percentiles = _resolve(selectors, files, source)
    base = str(output) if is_object_store(output) else Path(output).expanduser()
    out = OutputDir(join(base, "shards", source), SUBDIRS)
    config = tokenize_config(source, selectors, tok, files, resolved)
    fingerprint = config_fingerprint(config)
    units = [(f, part_name(i)) for i, f in enumerate(files)]
    check_master(spark.master)  # before the folder below is made
    # Guarded here as well as in the runner: the manifest below is removed only from our own folder.
    check_layout(out.root, files=("manifest.json",))
    created = out.prepare("tokenize", config, fingerprint)
    # Before the manifest is judged: parts of a changed input are refused, or forgotten (restart).
    out.guard_inputs(units, on_changed_input)
    if not all(out.is_done(u) for _, u in units):
        out.delete("manifest.json")  # it marks a complete source; rewritten below
    job = _tokenize_job(
        source, out.uri, tok, tokenizer_json, resolved, encoder, config, fingerprint, on_changed_input
    )
    try:
        res = run_per_file(job, units, out.uri, spark)
    except BaseException:
        if created:  # Spark did not start: no empty folder claims this source for this config
            out.discard()
        raise
    manifest = _finish(
        out, units, res, (source, config, fingerprint, tok, percentiles), resolved, allow_remove_all
    )
    return TokenizeResult(**vars(res), manifest=manifest, encoder=encoder_used)
