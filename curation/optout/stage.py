"""The `optout` job: an extract output's documents minus what a dated opt-out policy reserves, with an audit row each.

    python -m curation optout --input EXTRACT_DIR --robots SNAPSHOT_DIR --policy configs/optout/X.yaml --output DIR

    key      each document's host, `scheme://host[:port]` as the snapshot keys it (snapshot.py `host_key`):
             RFC 9309 applies a robots.txt to one scheme, host and port, so no parent domain counts
    join     the documents' (id, url, host, chars, optout_signals) with the snapshot's `hosts/` by host:
             a left join on the executors (Spark chooses sort-merge or broadcast), nothing collected
    decide   per row (`decide`, no Spark): every agent of the policy queried in list order against the
             host's robots.txt, rebuilt once per host per task from its groups JSON; then the page-level
             signals of extract (`optout_signals`, curation/optout/page.py)
    write    docs/ (the kept documents, every column as read: a left anti join on id), audit/ (one row
             per removed document), stats.json last: policy id, date and sha256, the snapshot's as-of
             date, counts per reason (exclusive: the first), per agent and signal (inclusive), each in documents,
             characters, hosts and registered domains with its share of the input's, coverage

Reasons, first match wins, in this order:
    robots:<agent>        a listed agent is disallowed by a rule (the agent's label, `robots:*` for `*`)
    robots:<status>       the capture's status disallows everything (`http_5xx`, `http_429`, `unreachable`,
                          `http_401_403` when the snapshot was built with `http_401_403: disallow`)
    tdm:header|meta       TDMRep `tdm-reservation: 1`
    noai:header|meta      `noai`
A document every agent may fetch and with no honoured signal is kept. A host without a capture is
allowed (nothing says no) and counted under coverage, as are the status classes of those with one.

The audit row has what a third party needs to re-check a removal: the URL, the agent, the deciding
rule line (number and text) and user-agent line, and the robots.txt capture's URL, WARC file, offset,
length, body sha256 and fetch time, plus the policy's id and sha256. The rows depend only on the
inputs and the policy, so a rerun gives the same rows (a test checks it).
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import Field

from core.config import ConfigModel
from core.errors import InputError
from core.output import atomic_write_json
from curation.filters.urls import registered_domain
from curation.optout.policy import Policy, load_policy
from curation.optout.robots import RobotsTxt
from curation.optout.snapshot import host_key

__all__ = ["AUDIT_COLUMNS", "Decision", "OptoutJobConfig", "decide", "prepare", "run_optout"]

AUDIT_COLUMNS = (
    "id", "url", "host", "reason", "reasons", "agent", "robots_reason", "rule_line", "rule", "group_line",
    "group", "signals", "coverage", "robots_url", "robots_warc_file", "robots_warc_offset",
    "robots_warc_length", "robots_sha256", "robots_fetch_time", "policy_id", "policy_sha256",
)  # fmt: skip
HOST_CACHE = 4096
"""Parsed robots.txt kept per task: the join brings a host's rows together, so few are parsed twice."""


class PageSignalPolicy(ConfigModel):
    """Which page-level signals of extract's `optout_signals` column remove a document here."""

    tdm_reservation: bool = True
    noai: bool = True


class OptoutJobConfig(ConfigModel):
    """The `optout` job's settings (`--config FILE`, `--set key=value`; `--policy` sets `policy`)."""

    policy: str = "configs/optout/apertus-2025-01.yaml"
    """The agent list (curation/optout/policy.py), a file of configs/optout/ or the lab's own."""
    page: PageSignalPolicy = Field(default_factory=PageSignalPolicy)
    allow_remove_all: bool = False
    """Publish a result that removed >= 99% of >= 100 documents (core/removal.py refuses it otherwise)."""


@dataclass(frozen=True, slots=True)
class Decision:
    """One document's verdict: `reason` None when kept; `reasons` every reason that applies."""

    reason: str | None
    reasons: tuple[str, ...] = ()
    agent: str | None = None
    robots_reason: str | None = None
    rule_line: int | None = None
    rule: str | None = None
    group_line: int | None = None
    group: str | None = None


def decide(
    url: str,
    robots: RobotsTxt | None,
    queries: tuple[tuple[str, str], ...],
    signals: list[str] | None,
    page: PageSignalPolicy,
) -> Decision:
    """The verdict for one document (module doc): `robots` is its host's file (None: no capture),
    `queries` the policy's (token, label) pairs, `signals` its `optout_signals`."""
    reasons: list[str] = []
    first = None
    if robots is not None:
        for token, label in queries:
            v = robots.check(url, token)
            if v.allowed:
                continue
            # no rule line: the capture's status decided every URL, one reason whichever agent asked
            reason = f"robots:{v.reason}" if v.rule is None else f"robots:{label}"
            if reason not in reasons:
                reasons.append(reason)
            if first is None:
                first = Decision(
                    reason,
                    agent=label,
                    robots_reason=v.reason,
                    rule_line=v.rule.number if v.rule else None,
                    rule=v.rule.text if v.rule else None,
                    group_line=v.group.number if v.group else None,
                    group=v.group.text if v.group else None,
                )
    honoured = (("tdm:",) if page.tdm_reservation else ()) + (("noai:",) if page.noai else ())
    for s in signals or ():
        if honoured and s.startswith(honoured):
            reasons.append(s)
            first = first or Decision(s)
    if first is None:
        return Decision(None)
    return Decision(**{**_fields(first), "reasons": tuple(reasons)})


def _fields(d: Decision) -> dict[str, Any]:
    return {name: getattr(d, name) for name in Decision.__slots__}


def prepare(input_dir: str, robots_dir: str, output: str, cfg: OptoutJobConfig) -> dict[str, Any]:
    """Every input checked before Spark starts (InputError/ConfigError: exit 2): the policy loads,
    the extract folder has docs/, the snapshot has hosts/ and stats.json, the output is elsewhere.
    Returns the policy, its sha256 and the snapshot's stats."""
    from core.output import check_disjoint

    policy, sha = load_policy(cfg.policy)
    docs = Path(input_dir) / "docs"
    if not docs.is_dir() or not any(docs.rglob("*.parquet")):
        raise InputError(f"--input {input_dir}: no docs/*.parquet (an extract output folder is expected)")
    snap_stats = Path(robots_dir) / "stats.json"
    if not (Path(robots_dir) / "hosts").is_dir() or not snap_stats.is_file():
        raise InputError(f"--robots {robots_dir}: no hosts/ and stats.json (a `robots` snapshot is expected)")
    try:
        snapshot = json.loads(snap_stats.read_text(encoding="utf-8"))
    except ValueError as e:
        raise InputError(f"--robots {robots_dir}: stats.json is not JSON: {e}") from None
    check_disjoint(output, [input_dir, robots_dir])
    return {"policy": policy, "policy_sha256": sha, "snapshot": snapshot}


def _decide_partition(rows, queries, page: PageSignalPolicy, policy_id: str, policy_sha: str):
    """A task over joined rows: one `DECIDED_COLUMNS` row per document (`reason` null: kept); each
    host's robots.txt parsed once while it stays in the small cache."""
    cache: OrderedDict[str, RobotsTxt] = OrderedDict()
    for r in rows:
        robots = None
        if r["groups"] is not None:
            robots = cache.get(r["host"])
            if robots is None:
                robots = cache[r["host"]] = RobotsTxt.from_json(r["groups"])
                if len(cache) > HOST_CACHE:
                    cache.popitem(last=False)
        d = decide(r["url"] or "", robots, queries, r["optout_signals"], page)
        coverage = "no_capture" if r["groups"] is None else r["robots_status"]
        audit = {
            "id": r["id"], "url": r["url"], "host": r["host"], "signals": r["optout_signals"],
            "coverage": coverage, "robots_url": r["robots_url"], "robots_warc_file": r["warc_file"],
            "robots_warc_offset": r["warc_offset"], "robots_warc_length": r["warc_length"],
            "robots_sha256": r["body_sha256"], "robots_fetch_time": r["fetch_time"],
            "policy_id": policy_id, "policy_sha256": policy_sha, **_fields(d), "reasons": list(d.reasons),
            "chars": r["chars"], "domain": host_domain(r["host"]),
        }  # fmt: skip
        yield [audit[c] for c in DECIDED_COLUMNS]


# the audit row plus what only the counts read: the text's length and the host's registered domain
DECIDED_COLUMNS = (*AUDIT_COLUMNS, "chars", "domain")


def _decided_schema():
    from pyspark.sql import types as T

    s, i, long_ = T.StringType(), T.IntegerType(), T.LongType()
    types = dict.fromkeys(AUDIT_COLUMNS, s) | {
        "reasons": T.ArrayType(s),
        "signals": T.ArrayType(s),
        "rule_line": i,
        "group_line": i,
        "robots_warc_offset": long_,
        "robots_warc_length": long_,
        "robots_fetch_time": T.TimestampType(),
        "chars": long_,
        "domain": s,
    }
    return T.StructType([T.StructField(c, types[c]) for c in DECIDED_COLUMNS])


def decided_rows(spark, docs, hosts, policy: Policy, policy_sha: str, page: PageSignalPolicy):
    """The documents' verdicts, one row each (`DECIDED_COLUMNS`), computed on the executors."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    key = F.udf(lambda url: host_key(url) if url else None, T.StringType())
    signals = F.col("optout_signals") if "optout_signals" in docs.columns else F.lit(None)
    small = docs.select(
        "id", "url", key("url").alias("host"), F.length("text").cast("long").alias("chars"),
        signals.cast(T.ArrayType(T.StringType())).alias("optout_signals"),
    )  # fmt: skip
    snap = hosts.select(
        "host", "groups", F.col("reason").alias("robots_status"), F.col("url").alias("robots_url"),
        "warc_file", "warc_offset", "warc_length", "body_sha256", "fetch_time",
    )  # fmt: skip
    joined = small.join(snap, "host", "left")
    queries, pid = policy.queries(), policy.id
    decided = joined.rdd.mapPartitions(lambda rows: _decide_partition(rows, queries, page, pid, policy_sha))
    return spark.createDataFrame(decided, _decided_schema())


def run_optout(
    input_dir: str, robots_dir: str, output: str, cfg: OptoutJobConfig, spark=None
) -> dict[str, Any]:
    """The job (module doc); returns stats.json's content. Refuses, before writing anything, a
    result that removed >= 99% of >= 100 documents unless `allow_remove_all` (core/removal.py)."""
    from core.removal import check_removal
    from core.spark import get_spark
    from core.storage import join

    started = time.time()
    ready = prepare(input_dir, robots_dir, output, cfg)
    policy: Policy = ready["policy"]
    spark = spark or get_spark(None, "refinery-optout")
    docs = spark.read.parquet(join(input_dir, "docs"))
    hosts = spark.read.parquet(join(robots_dir, "hosts"))
    # Used three times (stats, audit, the anti join): persisted, or each would rerun the matcher.
    decided = decided_rows(spark, docs, hosts, policy, ready["policy_sha256"], cfg.page).persist()
    try:
        stats = _counts(decided)
        check_removal(
            "optout",
            stats["docs_removed"],
            stats["docs_in"],
            f"the policy {policy.id} ({cfg.policy}) and the snapshot {robots_dir}",
            "allow_remove_all",
            cfg.allow_remove_all,
            left=f"Nothing was written to {output}.",
        )
        removed = decided.filter("reason IS NOT NULL")
        kept = docs.join(removed.select("id"), "id", "left_anti")
        kept.write.mode("overwrite").parquet(join(output, "docs"))
        removed.select(*AUDIT_COLUMNS).orderBy("id").write.mode("overwrite").parquet(join(output, "audit"))
    finally:
        decided.unpersist()
    stats = {
        "job": "optout",
        "input": input_dir,
        "robots": robots_dir,
        "policy": _policy_record(policy, cfg.policy, ready["policy_sha256"]),
        "snapshot": {k: ready["snapshot"].get(k) for k in ("as_of", "hosts", "inputs", "reasons")},
        "page_signals": {
            "available": "optout_signals" in docs.columns,
            "honoured": [k for k, on in cfg.page.model_dump().items() if on],
        },
        **stats,
        "seconds": round(time.time() - started, 3),
        "config": cfg.model_dump(mode="json"),
    }
    atomic_write_json(join(output, "stats.json"), stats)  # last: a folder with stats.json is a finished run
    return stats


def _policy_record(policy: Policy, path: str, sha: str) -> dict[str, Any]:
    return {
        "id": policy.id,
        "date": policy.date.isoformat(),
        "source": policy.source,
        "file": path,
        "sha256": sha,
        "agents": [a.label for a in policy.agents],
    }


def _counts(decided) -> dict[str, Any]:
    """The run's numbers from the verdict rows in three Spark jobs: per-document counters merged from
    the partitions (their keys are reasons and coverage classes: a few dozen), per-host classes
    through one group by host, and the distinct hosts and registered domains per reason through one
    group by (kind, reason). Only those small tables reach the driver."""
    from pyspark.sql import functions as F

    docs = decided.select("reason", "reasons", "coverage", "chars").rdd.mapPartitions(_doc_counts)
    n, exclusive, inclusive, coverage = docs.fold(([0, 0], {}, {}, {}), _merge)
    per_host = decided.groupBy("host").agg(
        F.first("coverage").alias("coverage"), F.max(F.col("reason").isNotNull().cast("int")).alias("removed")
    )
    hosts = {
        r["coverage"]: (r["hosts"], r["removed"])
        for r in per_host.groupBy("coverage").agg(F.count("*").alias("hosts"), F.sum("removed").alias("removed")).collect()
    }  # fmt: skip
    sites = _sites(decided)
    totals = {"docs": n[0], "chars": n[1], **sites.pop(("in", ""))}
    gone = sites.pop(("removed", ""), {"hosts": 0, "domains": 0})
    removed = sum(v[0] for v in exclusive.values())
    return {
        "docs_in": n[0],
        "docs_out": n[0] - removed,
        "docs_removed": removed,
        "chars_in": n[1],
        "chars_removed": sum(v[1] for v in exclusive.values()),
        "hosts_in": totals["hosts"],
        "hosts_removed": gone["hosts"],
        "domains_in": totals["domains"],
        "domains_removed": gone["domains"],
        "share_removed": _shares(
            {"docs": removed, "chars": sum(v[1] for v in exclusive.values()), **gone}, totals
        ),
        "removed_by_reason": _table(exclusive, sites, "exclusive", totals),
        "inclusive": _table(inclusive, sites, "inclusive", totals),
        "coverage": {
            "docs": {k: v[0] for k, v in sorted(coverage.items())},
            "hosts": {k: v[0] for k, v in sorted(hosts.items())},
            "hosts_with_capture": sum(v[0] for k, v in hosts.items() if k != "no_capture"),
            "hosts_without_capture": hosts.get("no_capture", (0, 0))[0],
        },
    }


def _sites(decided) -> dict[tuple[str, str], dict[str, int]]:
    """Distinct hosts and registered domains {(kind, reason): {hosts, domains}}: kind `exclusive`
    (the deciding reason of a removed document), `inclusive` (every reason that applied to it),
    ("removed", "") for a host or domain with any document removed and ("in", "") for all of them.
    A host counts under a reason when at least one of its documents does."""
    from pyspark.sql import functions as F

    rows = decided.select("host", "domain", "reason", "reasons")
    gone = rows.where(F.col("reason").isNotNull())
    kinds = [
        gone.select(F.lit("exclusive").alias("kind"), "reason", "host", "domain"),
        gone.select(F.lit("inclusive").alias("kind"), F.explode("reasons").alias("reason"), "host", "domain"),
        gone.select(F.lit("removed").alias("kind"), F.lit("").alias("reason"), "host", "domain"),
        rows.select(F.lit("in").alias("kind"), F.lit("").alias("reason"), "host", "domain"),
    ]
    counted = (
        kinds[0].unionByName(kinds[1]).unionByName(kinds[2]).unionByName(kinds[3])
        .groupBy("kind", "reason")
        .agg(F.countDistinct("host").alias("hosts"), F.countDistinct("domain").alias("domains"))
    )  # fmt: skip
    out = {
        (r["kind"], r["reason"]): {"hosts": r["hosts"], "domains": r["domains"]} for r in counted.collect()
    }
    out.setdefault(("in", ""), {"hosts": 0, "domains": 0})  # no document at all
    return out


@lru_cache(maxsize=65536)  # per Python worker: the join brings a host's documents together
def host_domain(key: str | None) -> str | None:
    """The registered domain of a host key (`scheme://host[:port]`), None for an IP or no host."""
    return registered_domain(urlsplit(key).hostname) if key else None


def _shares(counts: dict[str, int], totals: dict[str, int]) -> dict[str, float]:
    """Each count as a fraction of the run's total of its unit (0 where there is none)."""
    return {k: round(v / totals[k], 6) if totals[k] else 0.0 for k, v in counts.items()}


def _doc_counts(rows):
    """One partition's ((docs, chars), exclusive, inclusive, coverage): counters of [docs, chars]."""
    total, exclusive, inclusive, coverage = [0, 0], {}, {}, {}
    for reason, reasons, cov, chars in rows:
        chars = chars or 0
        total[0] += 1
        total[1] += chars
        _add(coverage, cov, chars)
        if reason is not None:
            _add(exclusive, reason, chars)
            for r in reasons or ():
                _add(inclusive, r, chars)
    yield total, exclusive, inclusive, coverage


def _add(counter: dict[str, list[int]], key: str, chars: int) -> None:
    _add_n(counter, key, 1, chars)


def _merge(a, b):
    out = [a[0][0] + b[0][0], a[0][1] + b[0][1]], {}, {}, {}
    for i in (1, 2, 3):
        for part in (a[i], b[i]):
            for k, (d, c) in part.items():
                _add_n(out[i], k, d, c)
    return out


def _add_n(counter: dict[str, list[int]], key: str, docs: int, chars: int) -> None:
    c = counter.setdefault(key, [0, 0])
    c[0] += docs
    c[1] += chars


def _table(
    counter: dict[str, list[int]],
    sites: dict[tuple[str, str], dict[str, int]],
    kind: str,
    totals: dict[str, int],
) -> dict[str, dict[str, Any]]:
    """Per reason: documents, characters, hosts and registered domains, and each as a share of the run's."""
    out = {}
    for k, (d, c) in sorted(counter.items()):
        row = {"docs": d, "chars": c, **sites.get((kind, k), {"hosts": 0, "domains": 0})}
        out[k] = {**row, "share": _shares(row, totals)}
    return out
