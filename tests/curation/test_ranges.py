"""Byte-range units (curation/warc/ranges.py): a WARC read as many ranges gives what it gives read whole.

Reader level on every shared WARC (both engines), the pipeline on real files (documents, funnel
counts, rejected samples), edge cases built here from real records (a target offset inside a
record, ranges smaller than one record, a truncated last member, a corrupt member, a gzip'd record
stored verbatim inside another, uncompressed and single-stream files), and the Spark job (ranges
as units: markers, resume, the folder's split_bytes guard).
"""

from __future__ import annotations

import gzip
import io
import itertools
import json
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from core.output import OutputConflict, OutputDir, unit_name
from core.spark import SparkOptions
from core.stats import Stats
from curation.config import ExtractJobConfig, ReaderConfig
from curation.job import run_extract
from curation.pipeline import process_file, process_unit
from curation.warc.ranges import parse_range_unit, plan_ranges, plan_unit_bytes, range_unit, split_units
from curation.warc.records import iter_records

ENGINES = ("warcio", "fastwarc")


def _fields(item) -> dict:
    return {name: getattr(item, name) for name in item.__slots__}


def _whole_and_ranges(path: Path, split: int, engine: str) -> tuple[list[dict], list[dict], int]:
    cfg = ReaderConfig(engine=engine)
    whole = [_fields(i) for i in iter_records(str(path), cfg)]
    spans = plan_ranges(str(path), split)
    parts = [_fields(i) for s, e in spans for i in iter_records(str(path), cfg, None, s, e)]
    return whole, parts, len(spans)


def _shared_files(warc_dir: Path) -> list[Path]:
    return sorted(p for p in warc_dir.rglob("*") if p.is_file())


@pytest.mark.parametrize("engine", ENGINES)
def test_every_shared_file_reads_the_same_in_ranges(warc_dir, engine):
    split_files = 0
    for path in _shared_files(warc_dir):
        for split in (1, 100_000):
            whole, parts, n = _whole_and_ranges(path, split, engine)
            assert parts == whole, f"{path.name}, split {split}: {n} ranges differ from the whole file"
            split_files += n > 1
    # The CC samples, the quirks (truncated, JWAT, ClueWeb 0.18, revisits) and a WET fragment
    # are split; uncompressed and single-stream files stay whole (checked below).
    assert split_files >= 19 + 5


# --- planning --------------------------------------------------------------------------------


def _members(warc_dir: Path, n: int) -> list[bytes]:
    """The first n + 1 gzip members (warcinfo + n records) of a real per-record-gzip WARC."""
    from warcio.archiveiterator import ArchiveIterator

    raw = (warc_dir / "pages-aeb-181.warc.gz").read_bytes()
    members, it = [], ArchiveIterator(io.BytesIO(raw))
    for rec in it:
        rec.content_stream().read()
        off, length = it.get_record_offset(), it.get_record_length()
        members.append(raw[off : off + length])
        if len(members) == n + 1:
            break
    return members


def _offsets(members: list[bytes]) -> list[int]:
    out, at = [], 0
    for m in members:
        out.append(at)
        at += len(m)
    return out


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


def test_boundaries_are_member_starts_after_each_target(tmp_path, warc_dir):
    members = _members(warc_dir, 12)
    path = _write(tmp_path, "a.warc.gz", b"".join(members))
    starts = _offsets(members)
    size = path.stat().st_size
    split = size // 5  # targets fall inside records
    spans = plan_ranges(str(path), split)
    assert spans[0][0] == 0 and spans[-1][1] == size
    assert all(a[1] == b[0] for a, b in itertools.pairwise(spans))  # contiguous
    # Each boundary is the first record at or after its target; a record larger than the split
    # moves the next target past it.
    expected, target = [0], split
    while target < size and (later := [o for o in starts if o >= max(target, expected[-1] + 1)]):
        expected.append(later[0])
        target = max(target + split, later[0] + 1)
    assert [s for s, _ in spans] == expected
    assert len(spans) >= 4 and not set(expected) - set(starts)


def test_ranges_smaller_than_one_record_give_one_record_each(tmp_path, warc_dir):
    members = _members(warc_dir, 6)
    path = _write(tmp_path, "a.warc.gz", b"".join(members))
    assert [s for s, _ in plan_ranges(str(path), 1)] == _offsets(members)
    for engine in ENGINES:
        whole, parts, n = _whole_and_ranges(path, 1, engine)
        assert n == len(members) and parts == whole


@pytest.mark.parametrize("engine", ENGINES)
def test_truncated_last_member(tmp_path, warc_dir, engine):
    members = _members(warc_dir, 5)
    data = b"".join(members)
    path = _write(tmp_path, "cut.warc.gz", data[: len(data) - len(members[-1]) // 2])
    whole, parts, n = _whole_and_ranges(path, 1, engine)
    assert n == len(members) - 1  # the cut member does not verify: it stays in the range before
    assert parts == whole
    reasons = Counter(i["reason"] for i in whole if "reason" in i)
    assert sum(reasons[r] for r in ("truncated_file", "truncated_record", "truncated_gzip")) >= 1


@pytest.mark.parametrize("engine", ENGINES)
def test_corrupt_member_mid_file(tmp_path, warc_dir, engine):
    members = _members(warc_dir, 6)
    bad = bytearray(members[3])
    bad[40:400] = b"\x00" * 360  # the deflate stream of one record destroyed
    path = _write(tmp_path, "damaged.warc.gz", b"".join([*members[:3], bytes(bad), *members[4:]]))
    for split in (1, len(members[0]) + 10, path.stat().st_size // 3):
        whole, parts, n = _whole_and_ranges(path, split, engine)
        assert n > 1 and parts == whole
    assert Counter(i.get("reason") for i in whole)["corrupt_region"] == 1


def test_uncompressed_and_single_stream_files_stay_whole(tmp_path, warc_dir):
    plain = b"".join(gzip.decompress(m) for m in _members(warc_dir, 4))
    for name, data in (("a.warc", plain), ("one-stream.warc.gz", gzip.compress(plain))):
        path = _write(tmp_path, name, data)
        assert plan_ranges(str(path), 1) == [(0, len(data))]
        assert split_units(str(path), "u", 1) == [(str(path), "u")]


def test_gzip_record_stored_inside_a_record_is_not_a_boundary(tmp_path, warc_dir):
    """A record whose payload is a gzip'd WARC record, deflated with stored blocks (as deflate does
    with incompressible data): the inner member's bytes lie verbatim in the file."""
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    members = _members(warc_dir, 3)
    inner = members[1]
    buf = io.BytesIO()
    http = StatusAndHeaders("200 OK", [("Content-Type", "application/gzip")], protocol="HTTP/1.1")
    rec = WARCWriter(buf, gzip=False).create_warc_record(
        "http://example.com/a.warc.gz", "response", payload=io.BytesIO(inner), http_headers=http
    )
    WARCWriter(buf, gzip=False).write_record(rec)
    outer = gzip.compress(buf.getvalue(), compresslevel=0)
    data = b"".join([members[0], outer, *members[2:]])
    path = _write(tmp_path, "nested.warc.gz", data)
    embedded = data.find(inner[:64], len(members[0]))
    assert len(members[0]) < embedded < len(members[0]) + len(outer)  # the trap is there
    starts = [s for s, _ in plan_ranges(str(path), 1)]
    assert embedded not in starts
    assert starts == _offsets([members[0], outer, *members[2:]])
    for engine in ENGINES:
        whole, parts, _ = _whole_and_ranges(path, 1, engine)
        assert parts == whole


def test_unit_names(warc_dir):
    uri = str(warc_dir / "cc-main-2020-34-sample.warc.gz")
    unit = unit_name(uri)
    assert parse_range_unit(unit) is None
    assert parse_range_unit(range_unit(unit, 10, 2000)) == (10, 2000)
    units = split_units(uri, unit, 50_000)
    assert len(units) > 1 and len({n for _, n in units}) == len(units)
    # remote inputs are never split (the task would download the whole file once per range)
    assert split_units("https://data.example/x.warc.gz", "x", 1) == [("https://data.example/x.warc.gz", "x")]
    assert split_units(uri, unit, None) == [(uri, unit)]


# --- the pipeline: documents, funnel, rejected samples ------------------------------------------

PIPELINE_FILES = [
    "cc-main-2020-34-sample.warc.gz",
    "crawl-2024-sample-0000.warc.gz",
    "BL-20140325121225068-00000-32090~opera~8443.warc.gz",
    "quirks/IAH-20080430204825-00000-blackbook-truncated.warc.gz",
    "quirks/iana-2014-revisits.warc.gz",
]


def _rows(root: Path, sub: str) -> list[dict]:
    rows = [r for f in sorted((root / sub).glob("*.parquet")) for r in pq.read_table(f).to_pylist()]
    return sorted(rows, key=lambda r: json.dumps(r, sort_keys=True, default=str))


def _funnel(stats: list[dict]) -> dict:
    """Merged counts without the timings (which differ run to run)."""
    merged = Stats.merged(stats).to_dict()
    for st in merged["stages"]:
        st.pop("seconds", None)
    return merged


def _run_units(root: Path, cfg: ExtractJobConfig, units: list[tuple[str, str]]) -> list[dict]:
    OutputDir(root).prepare("extract", cfg.to_dict(), cfg.fingerprint())
    for uri, unit in units:
        process_unit(uri, unit, cfg, str(root))
    return [OutputDir(root).read_stats(n) for _, n in units]


def test_pipeline_gives_the_same_documents_and_funnel(tmp_path, warc_dir):
    cfg = ExtractJobConfig()
    uris = [str(warc_dir / f) for f in PIPELINE_FILES]
    whole = _run_units(tmp_path / "whole", cfg, [(u, unit_name(u)) for u in uris])
    ranged_units = [x for u in uris for x in split_units(u, unit_name(u), 40_000)]
    assert len(ranged_units) >= 3 * len(uris)
    ranged = _run_units(tmp_path / "ranges", cfg, ranged_units)
    docs = _rows(tmp_path / "whole", "docs")
    assert len(docs) > 20 and _rows(tmp_path / "ranges", "docs") == docs  # ids, texts, offsets
    assert _funnel(ranged) == _funnel(whole)
    # Samples are capped per unit, so ranges keep more; the whole file's are among them.
    rejected = _rows(tmp_path / "ranges", "rejected")
    missing = [r for r in _rows(tmp_path / "whole", "rejected") if r not in rejected]
    assert not missing, missing[:2]
    for st in ranged:  # a range's stats say which bytes it read
        span = parse_range_unit(st["unit"])
        assert st.get("range") == (list(span) if span else None)


# --- the Spark job -----------------------------------------------------------------------------

JOB_FILES = ["cc-main-2020-34-sample.warc.gz", "crawl-2024-sample-0001.warc.gz"]
SPLIT = 50_000


@pytest.mark.spark
def test_job_runs_ranges_as_units_and_resumes(spark, warc_dir, tmp_path):
    cfg = ExtractJobConfig().replace(reader=ReaderConfig(split_bytes=SPLIT))
    uris = [str(warc_dir / f) for f in JOB_FILES]
    out = tmp_path / "out"
    result = run_extract(uris, str(out), cfg, spark=SparkOptions(progress=False))
    n_units = len([x for u in uris for x in split_units(u, unit_name(u), SPLIT)])
    assert result.ok and result.processed == n_units > len(uris)
    assert cfg.fingerprint() == ExtractJobConfig().fingerprint()  # the split is not in it
    assert json.loads((out / "_config.json").read_text())["split_bytes"] == SPLIT

    direct = tmp_path / "direct"
    OutputDir(direct).prepare("extract", cfg.to_dict(), cfg.fingerprint())
    for u in uris:
        assert process_file(u, cfg, str(direct))["status"] == "done"
    assert _rows(out, "docs") == _rows(direct, "docs")
    whole = [OutputDir(direct).read_stats(unit_name(u)) for u in uris]
    assert _funnel([json.loads((out / "stats.json").read_text())]) == _funnel(whole)

    again = run_extract(uris, str(out), cfg, spark=SparkOptions(progress=False))
    assert again.processed == 0 and again.skipped == n_units
    marker = sorted((out / "done").glob("*@*.json"))[1]
    marker.unlink()
    resumed = run_extract(uris, str(out), cfg, spark=SparkOptions(progress=False))
    assert resumed.processed == 1 and resumed.ok and (out / "_SUCCESS").exists()
    assert _rows(out, "docs") == _rows(direct, "docs")

    other = ExtractJobConfig().replace(reader=ReaderConfig(split_bytes=SPLIT * 2))
    with pytest.raises(OutputConflict, match="split_bytes"):
        run_extract(uris, str(out), other, spark=SparkOptions(progress=False))


def test_folder_made_before_ranges_keeps_whole_units(warc_dir, tmp_path):
    """A folder without a split_bytes record resumes with whole-file units (no Spark: all done)."""
    cfg = ExtractJobConfig().replace(reader=ReaderConfig(split_bytes=SPLIT))
    uris = [str(warc_dir / f) for f in JOB_FILES]
    out = tmp_path / "old"
    OutputDir(out).prepare("extract", cfg.to_dict(), cfg.fingerprint(), {"inputs": sorted(uris)})
    for u in uris:
        assert process_file(u, cfg, str(out))["status"] == "done"
    result = run_extract(uris, str(out), cfg, spark=SparkOptions(progress=False))
    assert result.processed == 0 and result.skipped == len(uris) and result.ok
    assert not list((out / "docs").glob("*@*"))


# --- the range size planned from the inputs and cores (reader.units_per_core) -------------------------

FIVE = [f"pages-trafilatura-eval-part{i}.warc.gz" for i in range(4)] + ["pages-aeb-181.warc.gz"]


@pytest.mark.parametrize("cores", [2, 3, 8])
def test_few_files_under_split_bytes_are_cut_so_every_core_has_several_units(warc_dir, cores):
    """Five 6-7.7 MB WARCs, each under split_bytes, were five units: on 2 cores the fifth ran alone.
    Planned for the cores, they give at least cores x units_per_core ranges, none larger than the
    planned size by more than one record (a range ends at the first record boundary past its target),
    and each record still in exactly one range."""
    uris = [str(warc_dir / f) for f in FIVE]
    reader = ReaderConfig()
    unit = plan_unit_bytes(uris, reader.split_bytes, cores, reader.units_per_core, reader.min_split_bytes)
    total = sum(Path(u).stat().st_size for u in uris)
    assert reader.min_split_bytes <= unit < reader.split_bytes and unit >= total / (
        cores * reader.units_per_core
    )
    units = [x for u in uris for x in split_units(u, unit_name(u), unit)]
    assert len(units) >= cores * reader.units_per_core
    biggest_record = max(e - s for u in uris for s, e in plan_ranges(u, 1))  # one range per record
    for _, name in units:
        start, end = parse_range_unit(name) or (0, 0)
        assert end - start <= unit + biggest_record, name
    fixed = [x for u in uris for x in split_units(u, unit_name(u), reader.split_bytes)]
    assert len(fixed) == len(uris)  # what split_bytes alone gives: one unit per file


def test_planned_size_stays_between_min_split_bytes_and_split_bytes(warc_dir):
    """A 1 GB-class input keeps split_bytes (its ranges already fill the cores); small inputs are not
    cut below min_split_bytes; an explicit split_bytes under min_split_bytes is kept as given; unknown
    cores or units_per_core 0 give split_bytes; remote inputs count for nothing (they stay whole)."""
    uris = [str(p) for p in sorted(warc_dir.glob("*.warc.gz"))]
    total = sum(Path(u).stat().st_size for u in uris)
    mib = 2**20
    assert plan_unit_bytes(uris, 16 * mib, 2, 3, mib) == -(-total // 6)
    assert plan_unit_bytes(uris, total // 100, 2, 3, 1) == total // 100  # split_bytes is the ceiling
    assert plan_unit_bytes(uris[:1], 16 * mib, 64, 3, mib) == mib  # min_split_bytes is the floor
    assert plan_unit_bytes(uris, 50_000, 2, 3, mib) == 50_000
    assert plan_unit_bytes(uris, 16 * mib, None, 3, mib) == 16 * mib
    assert plan_unit_bytes(uris, 16 * mib, 2, 0, mib) == 16 * mib
    assert plan_unit_bytes(uris, None, 2, 3, mib) is None
    assert plan_unit_bytes(["s3://bucket/a.warc.gz"], 16 * mib, 2, 3, 1) == 1


def test_a_folder_resumes_with_its_recorded_unit_size_on_other_cores(warc_dir, tmp_path):
    """The size planned for one machine's cores is recorded (`unit_bytes`); a rerun on a machine with
    other cores takes it, so the done units are still the units (no Spark: all done). Planned anew for
    7 cores, the ranges would be other units and would run again."""
    cfg = ExtractJobConfig().replace(reader=ReaderConfig(min_split_bytes=20_000))
    uris = [str(warc_dir / f) for f in JOB_FILES]
    unit = plan_unit_bytes(uris, cfg.reader.split_bytes, 2, 3, 20_000)
    units = [x for u in uris for x in split_units(u, unit_name(u), unit)]
    out = tmp_path / "out"
    record = {"inputs": sorted(uris), "split_bytes": cfg.reader.split_bytes, "unit_bytes": unit}
    OutputDir(out).prepare("extract", cfg.to_dict(), cfg.fingerprint(), record)
    for u, name in units:
        process_unit(u, name, cfg, str(out))
    assert all(OutputDir(out).is_done(name) for _, name in units)
    seven = plan_unit_bytes(uris, cfg.reader.split_bytes, 7, 3, 20_000)
    assert {n for _, n in units} != {n for u in uris for _, n in split_units(u, unit_name(u), seven)}
    spark = SparkOptions(conf={"spark.default.parallelism": "7"}, progress=False)
    result = run_extract(uris, str(out), cfg, spark=spark)
    assert result.processed == 0 and result.skipped == len(units) > len(uris) and result.ok
