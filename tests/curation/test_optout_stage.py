"""The `optout` job (curation/optout/stage.py) and its policies (curation/optout/policy.py, configs/optout/).

One module-scoped run shares the Spark time: the documents are extract's output (annotate mode, so
their page-level signals are columns) over the shared crawl-2024-sample-0000 records rewritten by
tests/curation/test_optout_page.py; the robots.txt snapshot is built from a robots WARC written here
with warcio (real files of the shared robots corpus for two hosts), its hosts/ rows made by the
snapshot's own row builder (`capture_rows`, `decide_host`) without the snapshot's Spark joins, which
tests/curation/test_robots_snapshot.py runs. The policy is apertus-2025-01; the run goes twice, and
both give the same audit rows. The `robots` and `optout` command lines then run the same chain, the
snapshot made by the `robots` job itself, and must give the library run's audit rows and counts.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from core.errors import ConfigError
from curation.optout.policy import Policy, load_policy, training_tier
from curation.optout.robots import parse
from curation.optout.stage import OptoutJobConfig, PageSignalPolicy, decide, run_optout
from testkit.shared_data import shared_data_dir
from tests.curation.test_optout_page import reserved_warc, run_extract
from tests.curation.test_robots_snapshot import real, write_warc

REPO = Path(__file__).resolve().parents[2]
APERTUS = REPO / "configs" / "optout" / "apertus-2025-01.yaml"
TRAIN = REPO / "configs" / "optout" / "ai-robots-txt-train-2026-08.yaml"
GPTBOT_2023 = b"User-agent: GPTBot\nDisallow: /2023/\n\nUser-agent: *\nAllow: /\n"


def captures() -> list[tuple]:
    return [
        ("https://maria-antoniak.github.io/robots.txt", "200 OK", GPTBOT_2023, None),
        ("https://soldaini.net/robots.txt", "200 OK", real("pixabay.com"), None),  # CCBot: Disallow: /
        ("https://talaugust.github.io/robots.txt", "200 OK", real("www.gutenberg.org"), None),  # CCBot too
        ("https://kyleclo.com/robots.txt", "200 OK", b"User-agent: *\nDisallow: /research/\n", None),
        ("https://www.cs.cmu.edu/robots.txt", "200 OK", b"User-agent: Google-Extended\nDisallow: /\n", None),
        ("https://joe.cat/robots.txt", "503 Service Unavailable", b"", None),
        ("https://tomhoper.github.io/robots.txt", "404 Not Found", b"<html>not here</html>", None),
    ]


EXPECTED = {  # exclusive reason (the first that applies) per removed URL
    "https://maria-antoniak.github.io/2023/07/04/notes-on-mastodon.html": "robots:GPTBot",
    "https://maria-antoniak.github.io/2023/04/11/paperpile-to-zotero.html": "robots:GPTBot",
    "https://kyleclo.com/research/": "robots:GPTBot",  # GPTBot has no group: the `*` group applies
    "https://soldaini.net/": "robots:CCBot",
    "https://talaugust.github.io/": "robots:CCBot",
    "https://www.cs.cmu.edu/~anaik/": "robots:Google-Extended",
    "https://joe.cat/": "robots:http_5xx",
    "https://maria-antoniak.github.io/2020/03/25/pip.html": "noai:header",
    "https://tomhoper.github.io/": "noai:meta",
}


# The registered domain of each host the documents come from, under the ICANN suffixes of the Public
# Suffix List (github.io is one registrant's domain: three hosts here, one domain).
DOMAINS = {
    "maria-antoniak.github.io": "github.io", "talaugust.github.io": "github.io", "tomhoper.github.io": "github.io",
    "dwadden.github.io": "github.io", "amyxzhang.wordpress.com": "wordpress.com", "kyleclo.com": "kyleclo.com",
    "soldaini.net": "soldaini.net", "www.cs.cmu.edu": "cmu.edu", "joe.cat": "joe.cat",
    "homes.cs.washington.edu": "washington.edu", "www.cs.washington.edu": "washington.edu",
    "www.jonathanbragg.com": "jonathanbragg.com", "www.semanticscholar.org": "semanticscholar.org",
}  # fmt: skip


def snapshot_folder(warc: Path, out: Path) -> Path:
    """hosts/ + stats.json as `python -m curation robots` writes them, rows by the snapshot's own code."""
    from curation.optout.snapshot import SNAPSHOT_COLUMNS, capture_rows, decide_host

    rows = []
    for c in capture_rows(str(warc), str(warc), 500 * 1024):
        step = {"url": c["url"], "status": c["status"], "location": c["location"]}
        first = {f"first_{k}": c[k] for k in ("url", "fetch_time", "status")}
        chain = {
            "chain": [step],
            "redirect_target": c["location"],
            "replaced_status": None,
            "replaced_fetch_time": None,
        }
        rows.append(decide_host({**c, **first, **chain}, None))
    types = dict.fromkeys(SNAPSHOT_COLUMNS, pa.string()) | {
        "fetch_time": pa.timestamp("us", tz="UTC"),
        **dict.fromkeys(("status", "final_status", "redirects", "replaced_status"), pa.int32()),
        "replaced_fetch_time": pa.timestamp("us", tz="UTC"),
        "truncated": pa.bool_(),
        **dict.fromkeys(("warc_offset", "warc_length"), pa.int64()),
    }
    schema = pa.schema([(c, types[c]) for c in SNAPSHOT_COLUMNS])
    (out / "hosts").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), out / "hosts" / "part-0.parquet")
    (out / "stats.json").write_text(
        json.dumps({"job": "robots", "as_of": "2024-03-01T00:00:00", "hosts": len(rows)})
    )
    return out


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    d = tmp_path_factory.mktemp("optout_stage")
    run_extract(reserved_warc(d / "CC-MAIN-2024-10-reserved.warc.gz"), d / "extract", "optout.mode=annotate")
    robots_warc = d / "CC-MAIN-2024-10-robotstxt-00000.warc.gz"
    write_warc(robots_warc, captures(), "2024-02-20T10:00:00Z")
    return d / "extract", snapshot_folder(robots_warc, d / "snapshot"), robots_warc


@pytest.fixture(scope="module")
def runs(inputs, spark, tmp_path_factory):
    extract, snapshot, _ = inputs
    out = tmp_path_factory.mktemp("optout_runs")
    cfg = OptoutJobConfig(policy=str(APERTUS))
    first = run_optout(str(extract), str(snapshot), str(out / "a"), cfg, spark)
    again = run_optout(str(extract), str(snapshot), str(out / "b"), cfg, spark)
    return out, first, again


def _table(folder: Path) -> list[dict]:
    return sorted(pq.read_table(folder).to_pylist(), key=lambda r: r["id"])


@pytest.mark.spark
def test_the_stage_removes_what_the_policy_reserves_and_counts_it(runs, inputs):
    out, stats, _ = runs
    extract = inputs[0]
    given = pq.read_table(extract / "docs").to_pylist()
    assert stats["docs_in"] == len(given) == 15
    audit = _table(out / "a" / "audit")
    assert {r["url"]: r["reason"] for r in audit} == EXPECTED
    kept = pq.read_table(out / "a" / "docs")
    assert sorted(kept.column("url").to_pylist()) == sorted(
        d["url"] for d in given if d["url"] not in EXPECTED
    )
    assert set(pq.read_table(extract / "docs").schema.names) == set(kept.schema.names)  # no column lost
    assert stats["docs_removed"] == 9 and stats["docs_out"] == 6
    assert {k: v["docs"] for k, v in stats["removed_by_reason"].items()} == {
        "robots:GPTBot": 3, "robots:CCBot": 2, "robots:Google-Extended": 1, "robots:http_5xx": 1,
        "noai:header": 1, "noai:meta": 1,
    }  # fmt: skip
    inclusive = {k: v["docs"] for k, v in stats["inclusive"].items()}
    # kyleclo's `*` disallow holds for every listed agent (CCBot: 2 + 1); soldaini.net carries tdm:header
    assert (
        inclusive["robots:*"] == 1 and inclusive["robots:PanguBot"] == 1 and inclusive["robots:GPTBot"] == 3
    )
    assert inclusive["tdm:header"] == 1 and inclusive["tdm:meta"] == 1 and inclusive["robots:CCBot"] == 3
    assert stats["coverage"]["hosts"] == {"http_4xx": 1, "http_5xx": 1, "no_capture": 2, "rules": 5}
    assert stats["coverage"]["hosts_without_capture"] == 2 and stats["coverage"]["docs"]["no_capture"] == 2
    assert stats["policy"]["id"] == "apertus-2025-01" and stats["snapshot"]["as_of"] == "2024-03-01T00:00:00"
    assert stats["policy"]["sha256"] == hashlib.sha256(APERTUS.read_bytes()).hexdigest()
    assert json.loads((out / "a" / "stats.json").read_text())["docs_removed"] == 9


@pytest.mark.spark
def test_hosts_and_registered_domains_are_counted_per_reason_with_shares(runs, inputs):
    """Per exclusive reason, the distinct hosts and registered domains of its documents; in all, the
    removed ones among every host and domain of the input, and each count as a share of the run's."""
    _, stats, _ = runs
    given = pq.read_table(inputs[0] / "docs").to_pylist()
    host = lambda url: urlsplit(url).hostname  # noqa: E731
    assert {host(d["url"]) for d in given} <= set(DOMAINS)  # every host's domain is written above
    by_reason: dict[str, set[str]] = {}
    for url, reason in EXPECTED.items():
        by_reason.setdefault(reason, set()).add(host(url))
    for reason, hosts in by_reason.items():
        row = stats["removed_by_reason"][reason]
        assert (row["hosts"], row["domains"]) == (len(hosts), len({DOMAINS[h] for h in hosts})), reason
    removed_hosts = {host(u) for u in EXPECTED}
    all_hosts = {host(d["url"]) for d in given}
    assert stats["hosts_removed"] == len(removed_hosts) == 7 and stats["hosts_in"] == len(all_hosts)
    assert stats["domains_removed"] == len({DOMAINS[h] for h in removed_hosts}) == 5
    assert stats["domains_in"] == len({DOMAINS[h] for h in all_hosts})
    share = stats["share_removed"]
    assert share["docs"] == round(9 / 15, 6) and share["hosts"] == round(7 / len(all_hosts), 6)
    gpt = stats["removed_by_reason"]["robots:GPTBot"]
    assert gpt["share"]["chars"] == round(gpt["chars"] / stats["chars_in"], 6) and gpt["chars"] > 0
    # inclusive: the `*` disallow of kyleclo.com's /research/ holds for every agent, so CCBot's hosts
    # are its own two and kyleclo.com
    ccbot = stats["inclusive"]["robots:CCBot"]
    assert (ccbot["hosts"], ccbot["domains"]) == (3, 3)


@pytest.mark.spark
def test_every_removal_has_its_evidence_and_a_rerun_gives_the_same_rows(runs):
    out, first, again = runs
    audit = _table(out / "a" / "audit")
    assert audit == _table(out / "b" / "audit")
    assert {k: v for k, v in first.items() if k != "seconds"} == {
        k: v for k, v in again.items() if k != "seconds"
    }
    by_url = {r["url"]: r for r in audit}
    row = by_url["https://kyleclo.com/research/"]
    assert (row["agent"], row["rule_line"], row["rule"], row["group"]) == (
        "GPTBot", 2, "Disallow: /research/", "User-agent: *",
    )  # fmt: skip
    assert row["signals"] == ["tdm:meta"] and "tdm:meta" in row["reasons"]
    assert row["robots_url"] == "https://kyleclo.com/robots.txt" and row["robots_warc_offset"] >= 0
    assert (
        by_url["https://joe.cat/"]["robots_reason"] == "http_5xx"
        and by_url["https://joe.cat/"]["rule"] is None
    )
    page = by_url["https://tomhoper.github.io/"]
    assert page["agent"] is None and page["coverage"] == "http_4xx" and page["policy_id"] == "apertus-2025-01"


@pytest.mark.spark
def test_an_audit_row_is_re_checked_from_the_warc_bytes(runs):
    """A third party's check: read the capture at its WARC offset, compare the digest, parse, ask again."""
    from warcio.archiveiterator import ArchiveIterator

    out, _, _ = runs
    rows = [r for r in _table(out / "a" / "audit") if r["rule"] is not None]
    assert len(rows) == 6
    for r in rows:
        with open(r["robots_warc_file"], "rb") as f:
            f.seek(r["robots_warc_offset"])
            rec = next(iter(ArchiveIterator(f)))
            body = rec.content_stream().read()
        assert rec.rec_headers.get_header("WARC-Target-URI") == r["robots_url"]
        assert hashlib.sha256(body).hexdigest() == r["robots_sha256"]
        token = "AI" if r["agent"] == "AI2Bot" else r["agent"]
        v = parse(body).check(r["url"], token)
        assert not v.allowed and (v.rule.number, v.rule.text) == (r["rule_line"], r["rule"])


# -- without Spark -------------------------------------------------------------------------------


def test_decide_names_the_first_reason_and_all_of_them():
    robots = parse(b"User-agent: CCBot\nDisallow: /\n\nUser-agent: GPTBot\nDisallow: /private\n")
    queries = (("GPTBot", "GPTBot"), ("CCBot", "CCBot"), ("*", "*"))
    d = decide(
        "https://h.example/private/x", robots, queries, ["noimageai:meta", "tdm:header"], PageSignalPolicy()
    )
    assert d.reason == "robots:GPTBot" and d.reasons == ("robots:GPTBot", "robots:CCBot", "tdm:header")
    assert (d.rule_line, d.group) == (5, "User-agent: GPTBot")
    assert robots.check("/x", "*").reason == "no_group"  # `*` is queried as itself: no `*` group here
    assert (
        decide("https://h.example/a", robots, (("GPTBot", "GPTBot"),), None, PageSignalPolicy()).reason
        is None
    )
    only_images = decide("https://h.example/a", None, queries, ["noimageai:header"], PageSignalPolicy())
    assert only_images.reason is None  # images only: never a reason to drop text
    assert (
        decide("https://h.example/a", None, queries, ["noai:meta"], PageSignalPolicy(noai=False)).reason
        is None
    )


def test_the_shipped_policies_load_and_the_training_tier_is_its_rule():
    apertus, _ = load_policy(APERTUS)
    assert [a.label for a in apertus.agents] == [
        "GPTBot", "CCBot", "Google-Extended", "ClaudeBot", "Bytespider", "Applebot-Extended", "Diffbot",
        "Meta-ExternalAgent", "AI2Bot", "cohere-training-data-crawler", "PanguBot", "*",
    ]  # fmt: skip
    tier, _ = load_policy(TRAIN)
    derived = training_tier(shared_data_dir() / "robots" / "ai-robots-txt-robots.json")
    assert [a.model_dump(exclude_none=True) for a in tier.agents] == derived
    tokens = {a.token for a in tier.agents}
    assert {"GPTBot", "ClaudeBot", "CCBot", "Google-Extended", "Bytespider", "meta-externalagent"} <= tokens
    # search, assistants and user-triggered fetchers are not training crawlers
    assert not tokens & {"OAI-SearchBot", "ChatGPT-User", "PerplexityBot", "Perplexity-User", "Claude-User"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "id: x\ndate: 2025-01-01\nsource: s\nagents: [{token: CCBot/2.0}]\n",
            r"agents\[0\]\.token",
        ),
        ("id: x\ndate: 2025-01-01\nsource: s\nagents: [{token: GPTBot}, {token: gptbot}]\n", "list it once"),
        ("id: x\ndate: 2025-01-01\nsource: s\nagents: []\n", "empty"),
        ("id: x\ndate: soon\nsource: s\nagents: [{token: GPTBot}]\n", "date"),
        ("id: x\ndate: 2025-01-01\nsource: s\nagents: [{token: GPTBot, nme: x}]\n", "nme"),
        ("id: x\ndate: 2025-01-01\nsource: s\nagents: [{token: AI2Bot}]\n", "product token"),
    ],
)
def test_a_bad_policy_is_refused_naming_the_file_and_key(tmp_path, text, message):
    path = tmp_path / "p.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message) as e:
        load_policy(path)
    assert str(path) in str(e.value)


def test_the_cli_refuses_a_bad_policy_before_spark(tmp_path, capsys):
    from curation.cli import main

    bad = tmp_path / "bad.yaml"
    bad.write_text("id: x\ndate: 2025-01-01\nsource: s\nagents: [{token: GPTBot}, {token: GPTBOT}]\n")
    (tmp_path / "in" / "docs").mkdir(parents=True)
    argv = [
        "optout",
        "--input",
        str(tmp_path / "in"),
        "--robots",
        str(tmp_path / "r"),
        "--output",
        str(tmp_path / "o"),
    ]
    assert main([*argv, "--policy", str(bad)]) == 2
    assert "list it once" in capsys.readouterr().err
    assert main([*argv, "--policy", str(APERTUS)]) == 2
    assert "no docs/*.parquet" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_policy_ids_and_tokens_are_checked():
    from core.config import build_config

    with pytest.raises(ConfigError, match="id must"):
        build_config(
            Policy, {"id": "Has Space", "date": "2025-01-01", "source": "s", "agents": [{"token": "*"}]}
        )


@pytest.mark.spark
def test_the_robots_and_optout_commands_give_what_the_library_gives(runs, inputs, spark, tmp_path, capsys):
    """`python -m curation robots` over the robots WARC, then `python -m curation optout` on its
    snapshot, through the command lines' own parsing and printing (in this process: the shared Spark
    session is the one they get, so no JVM is started for them). The snapshot the `robots` job makes
    decides as the row-built one: the same audit rows and counts as the library run."""
    from curation.cli import main

    out, stats, _ = runs
    extract, _, robots_warc = inputs
    snap, cli_out = tmp_path / "snapshot", tmp_path / "optout"
    spark_args = ["--master", "local[2]", "--no-progress"]
    args = ["robots", "--input", str(robots_warc), "--output", str(snap), "--set", "as_of=2024-03-01"]
    assert main([*args, *spark_args]) == 0
    printed = capsys.readouterr().out
    assert f"Refinery robots -> {snap}: {len(captures())} hosts as of 2024-03-01T00:00:00" in printed
    args = ["optout", "--input", str(extract), "--robots", str(snap), "--policy", str(APERTUS)]
    assert main([*args, "--output", str(cli_out), *spark_args]) == 0
    printed = capsys.readouterr().out
    assert "documents: 15 in, 9 removed, 6 kept; hosts with a robots.txt capture: 7, without: 2" in printed
    assert (
        f"  robots:GPTBot: 3 documents, {stats['removed_by_reason']['robots:GPTBot']['chars']} characters"
        in printed
    )
    assert _table(cli_out / "audit") == _table(out / "a" / "audit")
    cli_stats = json.loads((cli_out / "stats.json").read_text())
    for key in (
        "removed_by_reason",
        "inclusive",
        "coverage",
        "share_removed",
        "hosts_removed",
        "domains_removed",
    ):
        assert cli_stats[key] == stats[key], key
