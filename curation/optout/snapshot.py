"""`robots` snapshots: robots.txt WARCs (Common Crawl's `robotstxt/` subset) into one row per host, as of a date.

    inputs   WARC paths, local or remote (s3://, https://) or a `warc.paths` listing (curation/inputs.py),
             resolved on the driver to a list of names; one Spark task per file
    read     each task reads its file's response records (warcio): URL, status, absolute Location,
             fetch time, the body's first `max_bytes` (500 KiB) and its sha256, WARC file, offset, length
    as of    captures fetched after `as_of` are dropped; of the rest, the newest per URL is kept (ties:
             WARC file, offset), across every crawl given: about half of the top hosts have no capture in
             any single crawl (research §3.2). When that newest one is unreachable (5xx, no HTTP
             response, or 429 read as unreachable), the newest earlier 2xx capture of the URL stands in
             for it, and the row names the status and time it replaced (`replaced_status`,
             `replaced_fetch_time`): RFC 9309 §2.3.1.4 lets a crawler keep using a cached copy of a
             file it cannot reach, as Google does, so an outage on the day of the crawl does not
             block a site that said yes (or no) before. With no earlier 2xx, or
             `on_unreachable: disallow`, the unreachable capture decides: disallow all
    chain    each host's `/robots.txt` capture follows its Location through the kept captures, one join
             per hop, up to `max_redirects` + 1 hops (so a sixth redirect is seen and read as RFC 9309's
             "unavailable"); a target that was not captured leaves the chain unresolved
    decide   per host, curation/optout/capture.py `resolve` gives the status class or the parsed file
             (its groups serialised by `RobotsTxt.to_json`, rebuilt by `from_json`)
    write    `hosts/` Parquet (Spark's writer: its _temporary and _SUCCESS commit), then stats.json:
             hosts and hosts per reason

Nothing large passes through the driver: bodies stay in the executors' rows and the shuffle; the driver
holds the file list and the per-reason counts. The host key is `scheme://host[:port]` (default port
dropped; host as curation/filters/urls.py normalises it): RFC 9309 applies a file to one scheme, host
and port, so `www.` and the apex, or http and https, are different keys.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, Literal
from urllib.parse import urljoin, urlsplit

from core.config import ConfigModel
from core.output import atomic_write_json
from curation.filters.urls import normalize_host
from curation.optout.capture import Fetch, RobotsConfig, resolve

SNAPSHOT_COLUMNS = (
    "host", "url", "fetch_time", "status", "redirect_target", "final_url", "final_status", "redirects",
    "reason", "body_sha256", "groups", "truncated", "warc_file", "warc_offset", "warc_length", "crawl",
    "replaced_status", "replaced_fetch_time",
)  # fmt: skip
_DEFAULT_PORTS = {"http": 80, "https": 443}


class SnapshotConfig(ConfigModel):
    """What the snapshot keeps: the date it is as of, and how statuses and redirects are read."""

    as_of: datetime | None = None
    """Keep the newest capture fetched at or before this time (UTC if no zone); None: the newest."""
    robots: RobotsConfig = RobotsConfig()
    on_unreachable: Literal["last_good", "disallow"] = "last_good"
    """A newest capture that is unreachable (5xx, no response, 429 unless `robots.http_429: allow`):
    `last_good` reads the newest earlier 2xx capture of the URL instead, where there is one (RFC 9309
    §2.3.1.4's cached copy; research §3.4); `disallow`: the unreachable capture decides."""


def host_key(url: str) -> str | None:
    """`scheme://host[:port]` of a URL, the unit a robots.txt governs; None for a URL without a host."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    host = normalize_host(url) if parts.netloc else None
    if not host or parts.scheme not in _DEFAULT_PORTS:
        return None
    host = f"[{host}]" if ":" in host else host
    tail = f":{port}" if port is not None and port != _DEFAULT_PORTS[parts.scheme] else ""
    return f"{parts.scheme}://{host}{tail}"


def is_robots_url(url: str) -> bool:
    parts = urlsplit(url)
    return parts.path == "/robots.txt" and not parts.query


def capture_rows(path: str, warc_file: str, max_bytes: int) -> Iterator[dict[str, Any]]:
    """One row per response record of a robots.txt WARC (local `path`, named `warc_file`)."""
    from warcio.archiveiterator import ArchiveIterator

    from curation.warc.warcio_reader import crawl_from_name, parse_warc_date

    crawl = crawl_from_name(os.path.basename(warc_file))
    with open(path, "rb") as f:
        it = ArchiveIterator(f, check_digests=False)
        for rec in it:
            if rec.rec_type != "response":
                continue
            url = rec.rec_headers.get_header("WARC-Target-URI") or ""
            status = location = None
            if rec.http_headers is not None:
                with contextlib.suppress(ValueError, TypeError):
                    status = int(rec.http_headers.get_statuscode())
                loc = rec.http_headers.get_header("Location")
                location = urljoin(url, loc) if loc and status and 300 <= status < 400 else None
            body, sha, size = _read_body(rec.content_stream(), max_bytes)
            when = parse_warc_date(rec.rec_headers.get_header("WARC-Date"))
            yield {
                "url": url,
                "host": host_key(url),
                "is_robots": is_robots_url(url),
                "status": status,
                "location": location,
                "fetch_time": when.astimezone(UTC) if when else None,
                "body": body,
                "body_sha256": sha,
                "body_bytes": size,
                "warc_file": warc_file,
                "warc_offset": it.get_record_offset(),
                "warc_length": it.get_record_length(),
                "crawl": crawl,
            }


def _read_body(stream, max_bytes: int) -> tuple[bytes, str, int]:
    """The first `max_bytes` + 1 bytes (the parser sees that it was cut) and the sha256 and size of all."""
    h, kept, size = hashlib.sha256(), bytearray(), 0
    while chunk := stream.read(1 << 16):
        h.update(chunk)
        size += len(chunk)
        if len(kept) <= max_bytes:
            kept += chunk[: max_bytes + 1 - len(kept)]
    return bytes(kept), h.hexdigest(), size


def _file_captures(uri: str, max_bytes: int) -> Iterator[dict[str, Any]]:
    """A task: the rows of one WARC, downloaded first when remote (executors read inputs themselves)."""
    from core.storage import local_input

    with local_input(uri, retries=3) as path:
        yield from capture_rows(path, uri, max_bytes)


def decide_host(row: Any, config: RobotsConfig) -> dict[str, Any]:
    """A snapshot row from a host's resolved chain (Spark Row or dict with `chain`, the last capture's
    `body`, and the first capture's fields): the verdict class and the parsed groups."""
    chain = [Fetch(c["url"], c["status"], location=c["location"]) for c in row["chain"]]
    last = chain[-1]
    chain[-1] = Fetch(last.url, last.status, bytes(row["body"] or b""), last.location)
    robots = resolve(chain, config)
    return {
        "host": row["host"],
        "url": row["first_url"],
        "fetch_time": row["first_fetch_time"],
        "status": row["first_status"],
        "redirect_target": row["redirect_target"],
        "final_url": last.url,
        "final_status": last.status,
        "redirects": robots.counts.get("redirects", 0),
        "reason": robots.status_reason or "rules",
        "body_sha256": row["body_sha256"],
        "groups": robots.to_json(),
        "truncated": bool(robots.counts.get("truncated")),
        "warc_file": row["warc_file"],
        "warc_offset": row["warc_offset"],
        "warc_length": row["warc_length"],
        "crawl": row["crawl"],
        "replaced_status": row["replaced_status"],
        "replaced_fetch_time": row["replaced_fetch_time"],
    }


def capture_schema():
    from pyspark.sql import types as T

    return T.StructType(
        [
            T.StructField("url", T.StringType()),
            T.StructField("host", T.StringType()),
            T.StructField("is_robots", T.BooleanType()),
            T.StructField("status", T.IntegerType()),
            T.StructField("location", T.StringType()),
            T.StructField("fetch_time", T.TimestampType()),
            T.StructField("body", T.BinaryType()),
            T.StructField("body_sha256", T.StringType()),
            T.StructField("body_bytes", T.LongType()),
            T.StructField("warc_file", T.StringType()),
            T.StructField("warc_offset", T.LongType()),
            T.StructField("warc_length", T.LongType()),
            T.StructField("crawl", T.StringType()),
        ]
    )


def latest_captures(spark, inputs: list[str], config: SnapshotConfig):
    """The newest capture per URL fetched at or before `as_of`, read by one task per WARC file."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    max_bytes = config.robots.max_bytes
    rdd = spark.sparkContext.parallelize(inputs, numSlices=max(1, len(inputs)))
    schema = capture_schema()
    rows = rdd.flatMap(
        lambda uri: ([r[f.name] for f in schema.fields] for r in _file_captures(uri, max_bytes))
    )
    captures = spark.createDataFrame(rows, schema)
    if config.as_of is not None:
        as_of = config.as_of if config.as_of.tzinfo else config.as_of.replace(tzinfo=UTC)
        captures = captures.filter(F.col("fetch_time") <= F.lit(as_of))
    order = [F.desc("fetch_time"), "warc_file", "warc_offset"]
    by_url = Window.partitionBy("url")
    newest_first = by_url.orderBy(*order)
    ranked = captures.withColumn("_n", F.row_number().over(newest_first))
    no_replacement = F.lit(None).cast("int"), F.lit(None).cast("timestamp")
    if config.on_unreachable == "disallow":
        kept = ranked.filter("_n = 1")
        return (
            kept.withColumn("replaced_status", no_replacement[0])
            .withColumn("replaced_fetch_time", no_replacement[1])
            .drop("_n")
        )
    status = F.col("status")
    unreachable = status.isNull() | status.between(500, 599)
    if config.robots.http_429 == "disallow":
        unreachable = unreachable | (status == 429)
    ranked = (
        ranked.withColumn("_good", status.between(200, 299))
        .withColumn("_g", F.row_number().over(Window.partitionBy("url", "_good").orderBy(*order)))
        .withColumn("_newest_status", F.first("status").over(newest_first))
        .withColumn("_newest_time", F.first("fetch_time").over(newest_first))
        .withColumn("_newest_unreachable", F.first(unreachable).over(newest_first))
        .withColumn("_has_good", F.max(F.col("_good").cast("int")).over(by_url) == 1)
    )
    fallback = F.col("_newest_unreachable") & F.col("_has_good")
    kept = ranked.filter(F.when(fallback, F.col("_good") & (F.col("_g") == 1)).otherwise(F.col("_n") == 1))
    return kept.select(
        *capture_schema().fieldNames(),
        F.when(fallback, F.col("_newest_status")).otherwise(no_replacement[0]).alias("replaced_status"),
        F.when(fallback, F.col("_newest_time")).otherwise(no_replacement[1]).alias("replaced_fetch_time"),
    )


_LAST = (
    "url",
    "status",
    "location",
    "body",
    "body_sha256",
    "warc_file",
    "warc_offset",
    "warc_length",
    "crawl",
)


def resolved_chains(latest, max_redirects: int):
    """One row per host's robots.txt capture, its redirects followed through `latest`, one join a hop."""
    from pyspark.sql import functions as F

    step = F.struct("url", "status", "location")
    cur = latest.filter("is_robots AND host IS NOT NULL").select(
        "host",
        F.col("url").alias("first_url"),
        F.col("fetch_time").alias("first_fetch_time"),
        F.col("status").alias("first_status"),
        F.col("location").alias("redirect_target"),
        "replaced_status",
        "replaced_fetch_time",
        F.array(step).alias("chain"),
        *_LAST,
    )
    targets = latest.select(*[F.col(c).alias("n_" + c) for c in _LAST])
    for _ in range(max_redirects + 1):
        hop = F.col("status").between(300, 399) & (F.col("location") == F.col("n_url"))
        cur = cur.join(targets, hop, "left")
        found = F.col("n_url").isNotNull()
        cur = cur.withColumn(
            "chain",
            F.when(found, F.concat("chain", F.array(F.struct(*[F.col("n_" + c).alias(c) for c in ("url", "status", "location")])))).otherwise(F.col("chain")),
        )  # fmt: skip
        for c in _LAST:
            cur = cur.withColumn(c, F.when(found, F.col("n_" + c)).otherwise(F.col(c)))
        cur = cur.drop(*["n_" + c for c in _LAST])
    return cur


def run_robots_snapshot(inputs: list[str], output: str, config: SnapshotConfig, spark=None) -> dict[str, Any]:
    """Build the snapshot of `inputs` (WARC URIs or listings) into `output` (Parquet + stats.json)."""
    from pyspark.sql import types as T

    from core.spark import get_spark
    from core.storage import join
    from curation.inputs import resolve_inputs

    files = resolve_inputs(inputs)
    spark = spark or get_spark(None, "refinery-robots")
    # Every hop joins against the kept captures: persisted, or each join would read the WARCs again.
    latest = latest_captures(spark, files, config).persist()
    chains = resolved_chains(latest, config.robots.max_redirects)
    robots_cfg = config.robots
    types = _types()
    schema = T.StructType([T.StructField(name, types[name]()) for name in SNAPSHOT_COLUMNS])
    decided = chains.rdd.map(lambda row: [decide_host(row, robots_cfg)[c] for c in SNAPSHOT_COLUMNS])
    table = spark.createDataFrame(decided, schema)
    hosts = join(output, "hosts")
    table.write.mode("overwrite").parquet(hosts)
    latest.unpersist()
    written = spark.read.parquet(hosts)
    reasons = {r["reason"]: r["count"] for r in written.groupBy("reason").count().collect()}
    stats = {
        "job": "robots",
        "as_of": config.as_of.isoformat() if config.as_of else None,
        "inputs": len(files),
        "hosts": sum(reasons.values()),
        "reasons": dict(sorted(reasons.items())),
        "config": config.model_dump(mode="json"),
    }
    atomic_write_json(join(output, "stats.json"), stats)
    return stats


def _types() -> dict[str, Any]:
    from pyspark.sql import types as T

    return {
        **dict.fromkeys(
            ("host", "url", "redirect_target", "final_url", "reason", "body_sha256", "groups"), T.StringType
        ),
        **dict.fromkeys(("warc_file", "crawl"), T.StringType),
        "fetch_time": T.TimestampType,
        **dict.fromkeys(("status", "final_status", "redirects", "replaced_status"), T.IntegerType),
        "replaced_fetch_time": T.TimestampType,
        "truncated": T.BooleanType,
        **dict.fromkeys(("warc_offset", "warc_length"), T.LongType),
    }
