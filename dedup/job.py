"""The `dedup` Spark job: prepare -> ids -> exact -> url -> minhash -> cluster -> lines -> output.

Each stage writes its result under OUTPUT/stages/<stage>/ (Parquet, via a temporary name and a
rename) and then a marker OUTPUT/stages/<stage>.json holding the stage's counts; a rerun skips every
stage that has its marker, so a crashed run resumes at the first unfinished stage (connected
components also resume per round). Only the first stage and the last two read document text; the
others work on narrow rows (row number, hashes, lengths, the keep-policy columns).

Decisions are rows (_row, id, stage, reason, partner_id, _bytes): every removed document has one,
with the id of the document kept in its place where there is one. Nothing is collected to the
driver but per-reason counts.
"""

from __future__ import annotations

import json
import logging
import shutil
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from core.errors import InputError
from core.output import OutputConflict, atomic_write_json, diff_keys
from core.stats import Stats, funnel_table
from dedup.config import DedupJobConfig
from dedup.minhash import MinHashConfig, MinHasher, estimate_jaccard, exact_jaccard, shingle_hashes
from dedup.normalize import hash64, line_hashes, normalize_bytes, normalize_text, normalize_url

log = logging.getLogger(__name__)

STAGES = ("prepare", "ids", "exact", "url", "minhash", "cluster", "lines", "output")
ADDED_COLUMNS = ("dup_cluster", "dup_cluster_size")
_DECISION_COLS = ("_row", "id", "stage", "reason", "partner_id", "_bytes")


@dataclass
class DedupResult:
    output: str
    stats: Stats
    resumed: list[str] = field(default_factory=list)
    docs_in: int = 0
    docs_out: int = 0


# -- input ---------------------------------------------------------------------------------------


def resolve_input(path: str) -> list[str]:
    """Parquet files of a document dataset: a curation output folder (its docs/), a folder, or a file.

    Checks, from the Parquet footers only, that every file has string columns `id` and `text`.
    """
    p = Path(path).expanduser()
    if (p / "docs").is_dir():
        p = p / "docs"
    if p.is_file():
        files = [p]
    elif p.is_dir():
        files = sorted(
            f
            for f in p.rglob("*.parquet")
            if not any(part.startswith((".", "_")) for part in f.relative_to(p).parts)
        )
    else:
        raise InputError(f"input not found: {path}")
    if not files:
        raise InputError(f"no Parquet files under {p}")
    for f in files:
        try:
            schema = pq.read_schema(f)
        except (pa.ArrowInvalid, OSError) as e:
            raise InputError(f"{f}: not a readable Parquet file ({e})") from None
        for col in ("id", "text"):
            if col not in schema.names:
                raise InputError(f"{f}: no `{col}` column (columns: {', '.join(schema.names)})")
            if not pa.types.is_string(schema.field(col).type) and not pa.types.is_large_string(
                schema.field(col).type
            ):
                raise InputError(f"{f}: column `{col}` is {schema.field(col).type}, expected string")
    return [str(f.resolve()) for f in files]


# -- per-batch Python work (runs on executors) -----------------------------------------------------


def _features_fn(mh_config: MinHashConfig, keep_sig: bool):
    """mapInArrow function: the input columns plus the hashes every later stage works on."""

    def run(batches):
        hasher = MinHasher(mh_config)
        for batch in batches:
            texts = batch.column("text").to_pylist()
            urls = batch.column("url").to_pylist() if "url" in batch.schema.names else [None] * len(texts)
            reason, thash, unorm, nbytes, norms = [], [], [], [], []
            for text, url in zip(texts, urls):
                unorm.append(normalize_url(url))
                nbytes.append(len(text.encode("utf-8", "surrogatepass")) if text else 0)
                norm = normalize_bytes(text) if text and not text.isspace() else None
                if norm is None:
                    reason.append("empty_text")
                elif not norm:
                    reason.append("no_words")  # only punctuation/symbols: nothing to compare
                else:
                    reason.append(None)
                thash.append(hash64(norm) if norm else None)
                norms.append(norm or b"")
            # One compiled call per batch; a text with no shingle (count 0) gets no bands.
            sig_mat, counts = hasher.sign_batch(norms)
            keys = hasher.band_keys_batch(sig_mat)
            has = counts > 0
            nsh = counts.tolist()
            bands = [k if ok else None for k, ok in zip(keys.tolist(), has.tolist())]
            sigs = [s.tobytes() if ok and keep_sig else None for s, ok in zip(sig_mat, has.tolist())]
            cols = dict(zip(batch.schema.names, batch.columns))
            cols.update(
                _reason=pa.array(reason, pa.string()),
                _text_hash=pa.array(thash, pa.int64()),
                _url_norm=pa.array(unorm, pa.string()),
                _n_shingles=pa.array(nsh, pa.int32()),
                _bands=pa.array(bands, pa.list_(pa.int64())),
                _sig=pa.array(sigs, pa.binary()),
                _bytes=pa.array(nbytes, pa.int64()),
            )
            yield pa.RecordBatch.from_pydict(cols)

    return run


def _verify_fn(mh_config: MinHashConfig):
    """mapInArrow over candidate edges with both ends' signature or text: keep pairs >= threshold."""

    def run(batches):
        for batch in batches:
            d = batch.to_pydict()
            keep = []
            for i in range(batch.num_rows):
                if mh_config.verify == "signature":
                    a = _u32(d["sig_a"][i])
                    b = _u32(d["sig_b"][i])
                    sim = estimate_jaccard(a, b)
                else:
                    ha = shingle_hashes(normalize_text(d["text_a"][i]), mh_config.ngram)
                    hb = shingle_hashes(normalize_text(d["text_b"][i]), mh_config.ngram)
                    sim = exact_jaccard(ha, hb)
                keep.append(sim >= mh_config.threshold)
            yield pa.RecordBatch.from_pydict(
                {
                    "a": pa.array([x for x, k in zip(d["a"], keep) if k], pa.int64()),
                    "b": pa.array([x for x, k in zip(d["b"], keep) if k], pa.int64()),
                }
            )

    return run


def _u32(b: bytes):
    import numpy as np

    return np.frombuffer(b, dtype=np.uint32)


def _lines_fn(batches):
    """(_row, text) -> one row per non-empty line: (_row, pos, h)."""
    for batch in batches:
        rows, pos, hs = [], [], []
        for r, text in zip(batch.column("_row").to_pylist(), batch.column("text").to_pylist()):
            for i, h in enumerate(line_hashes(text or "")):
                if h is not None:
                    rows.append(r), pos.append(i), hs.append(h)
        yield pa.RecordBatch.from_pydict(
            {
                "_row": pa.array(rows, pa.int64()),
                "pos": pa.array(pos, pa.int32()),
                "h": pa.array(hs, pa.int64()),
            }
        )


def _apply_lines_fn(min_words: int):
    """Remove the listed lines; a document left with < min_words words gets _reason lines_too_short."""

    def run(batches):
        for batch in batches:
            texts = batch.column("text").to_pylist()
            drops = batch.column("_drop_lines").to_pylist()
            out_text, reason, removed = [], [], []
            for text, dl in zip(texts, drops):
                if not dl:
                    out_text.append(text), reason.append(None), removed.append(0)
                    continue
                gone = set(dl)
                lines = text.split("\n")
                kept = "\n".join(line for i, line in enumerate(lines) if i not in gone).strip("\n")
                out_text.append(kept)
                removed.append(len(gone))
                reason.append("lines_too_short" if len(kept.split()) < min_words else None)
            cols = dict(zip(batch.schema.names, batch.columns))
            cols["text"] = pa.array(out_text, pa.string())
            cols["_reason"] = pa.array(reason, pa.string())
            cols["_lines_removed"] = pa.array(removed, pa.int32())
            yield pa.RecordBatch.from_pydict(cols)

    return run


# -- the job -------------------------------------------------------------------------------------


class _Stages:
    """OUTPUT/stages/<name>/ + <name>.json markers; a stage with its marker is never redone."""

    def __init__(self, root: Path) -> None:
        self.dir = root / "stages"
        self.dir.mkdir(parents=True, exist_ok=True)
        for stale in self.dir.glob(".*.tmp-*"):
            shutil.rmtree(stale, ignore_errors=True)

    def path(self, name: str) -> Path:
        return self.dir / name

    def marker(self, name: str) -> dict[str, Any] | None:
        p = self.dir / f"{name}.json"
        return json.loads(p.read_text()) if p.exists() else None

    def finish(self, name: str, info: dict[str, Any]) -> None:
        atomic_write_json(self.dir / f"{name}.json", info)

    def write(self, df, name: str, partitions: int | None = None) -> str:
        """Write df to stages/<name>/ atomically (temp folder + rename); returns the path."""
        final = self.dir / name
        if final.exists():  # left by a crash between rename and marker: redo it
            shutil.rmtree(final)
        tmp = self.dir / f".{name.replace('/', '_')}.tmp-{uuid.uuid4().hex[:8]}"
        (df.repartition(partitions) if partitions else df).write.parquet(str(tmp))
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp.rename(final)
        return str(final)


def _keep_order(policy: str, columns: set[str]):
    """Sort expressions: the first row of a group under this policy is the one kept."""
    from pyspark.sql import functions as F

    time_cols = [c for c in ("fetch_time", "crawl") if c in columns]
    if policy == "best":
        order = [F.col("quality").desc_nulls_last()] if "quality" in columns else []
        order += [F.col("_bytes").desc()] + [F.col(c).asc_nulls_last() for c in time_cols]
    elif policy == "first":
        order = [F.col(c).asc_nulls_last() for c in time_cols]
    else:  # last
        order = [F.col(c).desc_nulls_last() for c in time_cols]
    return [*order, F.col("id").asc(), F.col("_row").asc()]


def _reason_counts(decisions) -> dict[str, dict[str, int]]:
    from pyspark.sql import functions as F

    rows = decisions.groupBy("reason").agg(F.count(F.lit(1)).alias("n"), F.sum("_bytes").alias("b")).collect()
    return {r["reason"]: {"docs": int(r["n"]), "bytes": int(r["b"] or 0)} for r in rows}


def _decisions(df, stage: str, reason, partner=None):
    """Decision rows (_DECISION_COLS) from `df`: `reason` and `partner` are Spark columns (or None)."""
    from pyspark.sql import functions as F

    return df.select(
        "_row",
        "id",
        F.lit(stage).alias("stage"),
        reason.alias("reason"),
        (partner if partner is not None else F.lit(None).cast("string")).alias("partner_id"),
        "_bytes",
    )


def _rank_groups(alive, key: str, policy: str, columns: set[str], stage: str, reason: str):
    """Within each group of equal `key`: the first row by policy is kept, the rest are decisions."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    w = Window.partitionBy(key).orderBy(*_keep_order(policy, columns))
    ranked = alive.withColumn("_rn", F.row_number().over(w)).withColumn("_keep_id", F.first("id").over(w))
    # copies: how many input documents this kept row now stands for (earlier merges included).
    ranked = ranked.withColumn("_group_copies", F.sum("_copies").over(Window.partitionBy(key)))
    removed = _decisions(ranked.where(F.col("_rn") > 1), stage, F.lit(reason), F.col("_keep_id"))
    copies = ranked.where((F.col("_rn") == 1) & (F.col("_group_copies") > 1)).select(
        "_row", F.col("_group_copies").alias("copies")
    )
    return removed, copies


def run_dedup(
    input_path: str,
    output: str,
    cfg: DedupJobConfig,
    master: str | None = None,
    spark_conf: dict[str, str] | None = None,
    progress: bool = True,
) -> DedupResult:
    """Run (or resume) the whole job; raises InputError / OutputConflict before Spark starts."""
    files = resolve_input(input_path)
    root = Path(output).expanduser().resolve()
    _prepare_output(root, cfg, files)
    stages = _Stages(root)
    say = (
        (lambda msg: print(f"[dedup] {msg}", file=sys.stderr, flush=True)) if progress else (lambda msg: None)
    )

    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from core.spark import get_spark

    spark = get_spark(master, "refinery-dedup", spark_conf)
    partitions = cfg.output.partitions or max(2, 2 * spark.sparkContext.defaultParallelism)
    spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
    mh = cfg.minhash
    resumed: list[str] = []
    infos: dict[str, dict[str, Any]] = {}

    def stage(name: str, fn) -> dict[str, Any]:
        info = stages.marker(name)
        if info is not None:
            resumed.append(name)
            say(f"{name}: done in an earlier run, skipped")
        else:
            t0 = time.perf_counter()
            info = fn()
            info["seconds"] = round(time.perf_counter() - t0, 3)
            stages.finish(name, info)
            say(f"{name}: {info['seconds']:.1f} s  {_summary(info)}")
        infos[name] = info
        return info

    # 1. prepare: the input with a row number and every hash (the only pass over text until lines).
    def do_prepare():
        df = spark.read.parquet(*files)
        # A rerun over dedup output replaces its cluster columns; private (_) columns are ours.
        df = df.drop(*[c for c in df.columns if c in ADDED_COLUMNS or c.startswith("_")])
        input_columns = df.columns
        df = df.withColumn("_row", F.monotonically_increasing_id())
        feat_schema = _with_fields(
            df.schema,
            "_reason string, _text_hash long, _url_norm string, _n_shingles int, "
            "_bands array<long>, _sig binary, _bytes long",
        )
        out = df.mapInArrow(_features_fn(mh, keep_sig=mh.verify == "signature"), feat_schema)
        stages.write(out, "prepare")
        p = spark.read.parquet(str(stages.path("prepare")))
        agg = p.agg(
            F.count(F.lit(1)).alias("docs"),
            F.sum("_bytes").alias("bytes"),
            F.sum(F.when(F.col("_reason").isNull() & F.col("_bands").isNull(), 1).otherwise(0)).alias(
                "short"
            ),
        ).first()
        return {
            "docs": int(agg["docs"]),
            "bytes": int(agg["bytes"] or 0),
            "minhash_too_short": int(agg["short"] or 0),
            "columns": input_columns,
        }

    prep_info = stage("prepare", do_prepare)
    prep = spark.read.parquet(str(stages.path("prepare")))
    columns = set(prep.columns)
    decision_paths: list[str] = []

    def decisions(names: list[str]):
        paths = [str(stages.path(f"{n}/removed")) for n in names]
        return spark.read.parquet(*paths) if paths else None

    def alive(done: list[str], cols: list[str]):
        narrow = prep.select(*cols)
        dec = decisions(done)
        return narrow.join(dec.select("_row"), "_row", "left_anti") if dec is not None else narrow

    # 2. ids: unusable text, and duplicate ids (the longest text under an id stays).
    def do_ids():
        from pyspark.sql import Window

        bad = _decisions(prep.where(F.col("_reason").isNotNull()), "ids", F.col("_reason"))
        w = Window.partitionBy("id").orderBy(F.col("_bytes").desc(), F.col("_text_hash"), F.col("_row"))
        dup = (
            prep.where(F.col("_reason").isNull())
            .select("_row", "id", "_bytes", "_text_hash")
            .withColumn("_rn", F.row_number().over(w))
            .where(F.col("_rn") > 1)
        )
        dup = _decisions(dup, "ids", F.lit("duplicate_id"), F.col("id"))
        stages.write(bad.unionByName(dup), "ids/removed")
        return {"removed": _reason_counts(decisions(["ids"]))}

    stage("ids", do_ids)
    decision_paths.append("ids")
    keep_cols = ["_row", "id", "_bytes"] + [c for c in ("quality", "fetch_time", "crawl") if c in columns]

    def copies_of(done: list[str]):
        """Alive rows with their `_copies` (1 + documents merged into them by exact/url)."""
        base = alive(done, [*keep_cols, "_text_hash", "_url_norm"])
        for n in ("url", "exact"):  # the latest stage's count wins
            cp = stages.path(f"{n}/copies")
            if n in done and cp.exists():
                c = spark.read.parquet(str(cp)).withColumnRenamed("copies", f"_c_{n}")
                base = base.join(c, "_row", "left")
        parts = [F.col(f"_c_{n}") for n in ("url", "exact") if f"_c_{n}" in base.columns]
        return base.withColumn("_copies", F.coalesce(*parts, F.lit(1)).cast("long")).drop(
            *[f"_c_{n}" for n in ("url", "exact")]
        )

    # 3. exact and 4. url dedup.
    def group_stage(name: str, key: str, policy: str, reason: str):
        def run():
            base = copies_of(list(decision_paths))
            if key == "_url_norm":
                base = base.where(F.col("_url_norm").isNotNull())
            removed, copies = _rank_groups(base, key, policy, columns, name, reason)
            stages.write(removed, f"{name}/removed")
            stages.write(copies, f"{name}/copies")
            return {"removed": _reason_counts(decisions([name]))}

        return run

    if cfg.exact.enabled:
        stage("exact", group_stage("exact", "_text_hash", cfg.exact.keep, "exact_duplicate"))
        decision_paths.append("exact")
    if cfg.url.enabled:
        stage("url", group_stage("url", "_url_norm", cfg.url.keep, "url_duplicate"))
        decision_paths.append("url")

    # 5. minhash: band collisions -> star edges per bucket -> connected components.
    mh_dir = f"minhash/{mh}"

    def verify_pairs(pairs, side, path: str):
        """The (a, b) rows of `pairs` whose documents reach the threshold by `minhash.verify`.

        side: (k, v) with v the signature or the text of the document keyed k (a and b are keys).
        """
        sfx = "sig" if mh.verify == "signature" else "text"
        eab = pairs.join(side.withColumnsRenamed({"k": "a", "v": f"{sfx}_a"}), "a").join(
            side.withColumnsRenamed({"k": "b", "v": f"{sfx}_b"}), "b"
        )
        ok = eab.select("a", "b", f"{sfx}_a", f"{sfx}_b").mapInArrow(_verify_fn(mh), "a long, b long")
        stages.write(ok, path)
        return spark.read.parquet(str(stages.path(path)))

    def do_minhash():
        nodes = alive(list(decision_paths), ["_row", "id", "_bands", "_sig"]).where(
            F.col("_bands").isNotNull()
        )
        nodes = nodes.withColumn("node", F.xxhash64("id"))
        bands = nodes.select("node", F.posexplode("_bands").alias("band", "key"))
        # Every member of a bucket is linked to the bucket's smallest node: n-1 edges per bucket,
        # never n^2, so one giant cluster costs no more than its size.
        buckets = bands.groupBy("band", "key").agg(F.min("node").alias("m"), F.count(F.lit(1)).alias("n"))
        buckets = buckets.where(F.col("n") > 1)
        edges = (
            bands.join(buckets, ["band", "key"])
            .where(F.col("node") != F.col("m"))
            .select(F.col("node").alias("a"), F.col("m").alias("b"))
            .distinct()
        )
        stages.write(edges, f"{mh_dir}/candidates")
        edges = spark.read.parquet(str(stages.path(f"{mh_dir}/candidates")))
        n_candidates = edges.count()
        if mh.verify != "none":
            if mh.verify == "signature":
                side = nodes.select(F.col("node").alias("k"), F.col("_sig").alias("v"))
            else:
                side = prep.select(F.xxhash64("id").alias("k"), F.col("text").alias("v"))
                side = side.join(nodes.select(F.col("node").alias("k")), "k")
            edges = verify_pairs(edges, side, f"{mh_dir}/verified")
        n_edges = edges.count()
        from dedup.components import connected_components

        rounds: list[int] = []
        comp = connected_components(
            spark,
            edges,
            stages.path(f"{mh_dir}/cc"),
            partitions,
            cfg.cluster.max_iterations,
            on_round=lambda r, n: (rounds.append(r), say(f"minhash: components round {r}: {n} edges")),
        )
        stages.write(comp, f"{mh_dir}/components")
        n_nodes = nodes.count()
        distinct_nodes = nodes.select("node").distinct().count()
        buckets_info = buckets.agg(F.count(F.lit(1)).alias("b"), F.max("n").alias("mx")).first()
        return {
            "nodes": n_nodes,
            "node_hash_collisions": n_nodes - distinct_nodes,
            "shared_buckets": int(buckets_info["b"] or 0),
            "largest_bucket": int(buckets_info["mx"] or 0),
            "candidate_edges": n_candidates,
            "edges": n_edges,
            "cc_rounds": len(rounds),
            "bands": mh.band_rows[0],
            "rows": mh.band_rows[1],
        }

    if cfg.cluster.enabled:
        stage("minhash", do_minhash)

        # 6. cluster: keep policy per component; cluster id = id of the component's smallest node.
        def do_cluster():
            from pyspark.sql import Window

            comp = spark.read.parquet(str(stages.path(f"{mh_dir}/components")))
            base = copies_of(list(decision_paths)).withColumn("node", F.xxhash64("id"))
            members = base.join(comp, "node")
            wc = Window.partitionBy("root")
            members = (
                members.withColumn("dup_cluster_size", F.sum("_copies").over(wc))
                .withColumn("_members", F.count(F.lit(1)).over(wc))
                .withColumn("dup_cluster", F.first("id").over(wc.orderBy("node")))
            )
            info_cols = ["_row", "dup_cluster", "dup_cluster_size"]
            if cfg.cluster.keep == "drop_cluster":
                removed = _decisions(
                    members, "cluster", F.lit("near_duplicate_cluster"), F.col("dup_cluster")
                )
                kept_info = members.where(F.lit(False)).select(*info_cols)
            else:
                w = wc.orderBy(*_keep_order(cfg.cluster.keep, columns))
                ranked = (
                    members.withColumn("_rn", F.row_number().over(w))
                    .withColumn("_keep_id", F.first("id").over(w))
                    .withColumn("_keep_row", F.first("_row").over(w))
                )
                losers = ranked.where(F.col("_rn") > 1)
                if mh.verify != "none":
                    # Components are transitive: a member can be in a cluster only through others
                    # and be far from the document kept. With verification on, a member is removed
                    # only if it reaches the threshold against the kept document itself; the others
                    # are kept as clusters of their own ("detached"), so every removal is checked.
                    col = "_sig" if mh.verify == "signature" else "text"
                    side = prep.select(F.col("_row").alias("k"), F.col(col).alias("v"))
                    pairs = losers.select(F.col("_row").alias("a"), F.col("_keep_row").alias("b"))
                    ok = verify_pairs(pairs, side, "cluster/confirmed").select(F.col("a").alias("_row"))
                    losers = losers.join(ok, "_row", "left_semi")
                    # recount each kept document's cluster: itself plus the members it really replaces
                    sizes = losers.groupBy(F.col("_keep_row").alias("_row")).agg(
                        F.sum("_copies").alias("_removed_copies")
                    )
                    winners = ranked.where(F.col("_rn") == 1).join(sizes, "_row", "left")
                    winners = winners.withColumn(
                        "dup_cluster_size", F.col("_copies") + F.coalesce("_removed_copies", F.lit(0))
                    )
                else:
                    winners = ranked.where(F.col("_rn") == 1)
                removed = _decisions(losers, "cluster", F.lit("near_duplicate"), F.col("_keep_id"))
                kept_info = winners.select(*info_cols)
            stages.write(removed, "cluster/removed")
            stages.write(kept_info, "cluster/info")
            ci = spark.read.parquet(str(stages.path("cluster/info")))
            sizes = members.select("root", "_members", "dup_cluster_size").distinct()
            agg = sizes.agg(
                F.count(F.lit(1)).alias("clusters"),
                F.max("_members").alias("largest"),
                F.max("dup_cluster_size").alias("largest_copies"),
            ).first()
            hist = {
                str(r["_members"]): int(r["n"])
                for r in sizes.groupBy("_members").agg(F.count(F.lit(1)).alias("n")).collect()
            }
            # members of 2+ clusters neither kept nor removed failed the check against the kept one
            in_clusters = sum(int(size) * n for size, n in hist.items() if int(size) > 1)
            n_removed = spark.read.parquet(str(stages.path("cluster/removed"))).count()
            n_kept = ci.count()
            return {
                "removed": _reason_counts(decisions(["cluster"])),
                "detached": in_clusters - n_removed - n_kept,
                "clusters": int(agg["clusters"] or 0),
                "largest_cluster": int(agg["largest"] or 0),
                "largest_cluster_copies": int(agg["largest_copies"] or 0),
                "cluster_size_histogram": dict(sorted(hist.items(), key=lambda kv: int(kv[0]))),
                "kept_in_clusters": n_kept,
            }

        stage("cluster", do_cluster)
        decision_paths.append("cluster")

    # 7. lines: hashes of lines in more than K surviving documents.
    def do_lines():
        texts = alive(list(decision_paths), ["_row", "text"])
        exploded = texts.mapInArrow(_lines_fn, "_row long, pos int, h long")
        stages.write(exploded, "lines/exploded")
        ex = spark.read.parquet(str(stages.path("lines/exploded")))
        limit = cfg.lines.max_docs
        if cfg.lines.max_fraction is not None:
            limit = max(limit, int(cfg.lines.max_fraction * texts.count()))
        freq = (ex.select("_row", "h").distinct().groupBy("h").agg(F.count(F.lit(1)).alias("docs"))).where(
            F.col("docs") > limit
        )
        stages.write(freq, "lines/frequent")
        fr = spark.read.parquet(str(stages.path("lines/frequent")))
        drops = ex.join(fr.select("h"), "h").groupBy("_row").agg(F.collect_list("pos").alias("_drop_lines"))
        stages.write(drops, "lines/drops")
        dr = spark.read.parquet(str(stages.path("lines/drops")))
        agg = dr.agg(F.count(F.lit(1)).alias("docs"), F.sum(F.size("_drop_lines")).alias("lines")).first()
        return {
            "max_docs": limit,
            "frequent_lines": fr.count(),
            "docs_touched": int(agg["docs"] or 0),
            "lines_removed": int(agg["lines"] or 0),
        }

    if cfg.lines.enabled:
        stage("lines", do_lines)

    # 8. output: surviving documents with their cluster columns (and lines removed).
    input_cols = prep_info["columns"]

    def do_output():
        base = alive(list(decision_paths), [*input_cols, "_row", "_bytes"])
        cp = copies_of(list(decision_paths)).select("_row", "_copies")
        base = base.join(cp, "_row", "left")
        if cfg.cluster.enabled:
            ci = spark.read.parquet(str(stages.path("cluster/info")))
            base = base.join(ci, "_row", "left")
        else:
            base = base.withColumn("dup_cluster", F.lit(None).cast("string")).withColumn(
                "dup_cluster_size", F.lit(None).cast("long")
            )
        base = base.withColumn("dup_cluster", F.coalesce("dup_cluster", "id")).withColumn(
            "dup_cluster_size", F.coalesce("dup_cluster_size", "_copies", F.lit(1)).cast("long")
        )
        if cfg.lines.enabled:
            dr = spark.read.parquet(str(stages.path("lines/drops")))
            base = base.join(dr, "_row", "left")
        else:
            base = base.withColumn("_drop_lines", F.lit(None).cast("array<int>"))
        schema = _with_fields(base.schema, "_reason string, _lines_removed int")
        final = base.mapInArrow(_apply_lines_fn(cfg.lines.min_words), schema)
        final = final.withColumn("_out_bytes", F.octet_length("text")).persist(StorageLevel.DISK_ONLY)
        try:
            short = _decisions(final.where(F.col("_reason").isNotNull()), "lines", F.col("_reason"))
            stages.write(short, "output/removed")
            docs = (
                final.where(F.col("_reason").isNull())
                .repartition(partitions, "id")
                .sortWithinPartitions("id", "_row")
            )
            agg = docs.agg(F.count(F.lit(1)).alias("n"), F.sum("_out_bytes").alias("b")).first()
            _write_docs(docs.select(*input_cols, *ADDED_COLUMNS), root / "docs")
        finally:
            final.unpersist()
        return {
            "removed": _reason_counts(decisions(["output"])),
            "docs": int(agg["n"]),
            "bytes": int(agg["b"] or 0),
        }

    out_info = stage("output", do_output)
    all_stages = [*decision_paths, "output"]
    _write_removed(spark, prep, decisions(all_stages), root, cfg.output.removed_sample_per_reason)
    stats = _stats(infos, prep_info, out_info)
    atomic_write_json(
        root / "stats.json",
        {
            "job": "dedup",
            "config_fingerprint": cfg.fingerprint(),
            "inputs": files,
            "docs_in": prep_info["docs"],
            "docs_out": out_info["docs"],
            "minhash": str(mh),
            "stage_info": infos,
            **stats.to_dict(),
        },
    )
    (root / "_SUCCESS").write_text("")
    return DedupResult(str(root), stats, resumed, prep_info["docs"], out_info["docs"])


def _with_fields(schema, ddl: str):
    """A new StructType: `schema` plus the fields of a DDL string (DataFrame.schema is not copied)."""
    from pyspark.sql.types import StructType

    return StructType(schema.fields + StructType.fromDDL(ddl).fields)


def _summary(info: dict[str, Any]) -> str:
    removed = info.get("removed", {})
    parts = [f"{k}={v['docs']}" for k, v in sorted(removed.items())]
    parts += [f"{k}={v}" for k, v in info.items() if isinstance(v, int) and k != "seconds"]
    return ", ".join(parts)


def _write_docs(df, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex[:8]}")
    df.write.option("compression", "zstd").parquet(str(tmp))
    if path.exists():
        shutil.rmtree(path)
    tmp.rename(path)


def _write_removed(spark, prep, decisions, root: Path, per_reason: int) -> None:
    """removed_ids/: every decision; removed/: a sample per reason with URL and a text snippet."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    dec = decisions.select(*_DECISION_COLS)
    _write_docs(
        dec.drop("_row", "_bytes").repartition(1).sortWithinPartitions("reason", "id"), root / "removed_ids"
    )
    w = Window.partitionBy("reason").orderBy(F.xxhash64("id"), "_row")
    sample = dec.withColumn("_rn", F.row_number().over(w)).where(F.col("_rn") <= per_reason)
    extra = ["url"] if "url" in prep.columns else []
    sample = sample.join(prep.select("_row", *extra, F.substring("text", 1, 500).alias("snippet")), "_row")
    _write_docs(
        sample.select("id", *extra, "stage", "reason", "partner_id", "snippet")
        .repartition(1)
        .sortWithinPartitions("reason", "id"),
        root / "removed",
    )


def _stats(infos: dict[str, dict[str, Any]], prep: dict[str, Any], out: dict[str, Any]) -> Stats:
    """The funnel: docs and bytes in/out per stage, drops per reason."""
    stats = Stats()
    docs, nbytes = prep["docs"], prep["bytes"]
    for name in ("ids", "exact", "url", "cluster", "output"):
        if name not in infos:
            continue
        st = stats.stage("lines" if name == "output" else name)
        st.docs_in, st.bytes_in = docs, nbytes
        st.seconds = infos[name].get("seconds", 0.0)
        for reason, c in infos[name].get("removed", {}).items():
            st.drops[reason] += c["docs"]
            st.drop_bytes[reason] += c["bytes"]
            docs -= c["docs"]
            nbytes -= c["bytes"]
        st.docs_out, st.bytes_out = docs, nbytes
    if "output" in stats.stages:  # bytes out after lines are gone is measured, not derived
        stats.stage("lines").bytes_out = out["bytes"]
    stats.counters["minhash_too_short"] = prep.get("minhash_too_short", 0)
    for k in ("candidate_edges", "edges", "cc_rounds", "node_hash_collisions", "largest_bucket"):
        if k in infos.get("minhash", {}):
            stats.counters[k] = infos["minhash"][k]
    for k in ("clusters", "largest_cluster", "detached"):
        if k in infos.get("cluster", {}):
            stats.counters[k] = infos["cluster"][k]
    for k in ("frequent_lines", "lines_removed"):
        if k in infos.get("lines", {}):
            stats.counters[k] = infos["lines"][k]
    return stats


def _prepare_output(root: Path, cfg: DedupJobConfig, files: list[str]) -> None:
    """Create the folder, or check that the same config made it (refuse otherwise)."""
    root.mkdir(parents=True, exist_ok=True)
    cfg_path = root / "_config.json"
    record = {"job": "dedup", "fingerprint": cfg.fingerprint(), "config": cfg.to_dict(), "inputs": files}
    if cfg_path.exists():
        old = json.loads(cfg_path.read_text())
        if (
            old.get("job") != "dedup"
            or old.get("fingerprint") != cfg.fingerprint()
            or old.get("inputs") != files
        ):
            diff = diff_keys(old.get("config", {}), cfg.to_dict())
            if old.get("inputs") != files:
                diff.append("inputs")
            raise OutputConflict(
                f"{root} was made by `{old.get('job')}` with config {old.get('fingerprint')}"
                f" (differs in: {', '.join(diff[:10]) or 'job'}). Use another --output, or delete it."
            )
    else:
        atomic_write_json(cfg_path, record)


def print_funnel(result: DedupResult) -> None:
    print(funnel_table(result.stats), file=sys.stderr)
