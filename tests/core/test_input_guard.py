"""The output guards of core/output.py without Spark: inputs guarded by content (`file_identities`,
`guard_inputs`, `OutputDir.guard_inputs`), outputs that overlap their inputs (`check_disjoint`) and
damaged output folders (`_config.json`, stage markers) refused by name."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from core.errors import ConfigError, OutputConflict
from core.output import OutputDir, changed_input_policy, check_disjoint, guard_folder, guard_inputs
from core.storage import file_identities


def _parquet(path: Path, texts: list[str]) -> Path:
    pq.write_table(pa.table({"id": [f"d{i}" for i in range(len(texts))], "text": texts}), path)
    return path


def _same_size_other_bytes(path: Path, at: int) -> None:
    """Change one byte at `at`, keeping the size and the mtime (what `touch -r` hides)."""
    st = path.stat()
    data = bytearray(path.read_bytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size and path.stat().st_mtime_ns == st.st_mtime_ns


def test_identity_sees_a_rewrite_under_the_same_name(tmp_path):
    f = _parquet(tmp_path / "a.parquet", ["first text", "second text"])
    before = file_identities([str(f)])[str(f)]
    assert file_identities([str(f)])[str(f)] == before  # stable when nothing changed
    _parquet(f, ["other text", "second text"])
    assert file_identities([str(f)])[str(f)] != before


@pytest.mark.parametrize("where", ["middle", "tail"])
def test_identity_sees_other_bytes_with_the_same_size_and_mtime(tmp_path, where):
    small = _parquet(tmp_path / "small.parquet", ["x" * 1000, "y" * 1000])
    before = file_identities([str(small)])[str(small)]
    _same_size_other_bytes(small, small.stat().st_size // 2 if where == "middle" else -20)
    assert file_identities([str(small)])[str(small)]["sample"] != before["sample"]


def test_identity_of_a_large_parquet_file_sees_a_changed_last_row_group(tmp_path):
    """Past 4 MiB the file is sampled: a changed last row group moves the footer (sizes, stats)."""
    rng = __import__("random").Random(0)
    texts = ["".join(rng.choice("abcdefghij ") for _ in range(2000)) for _ in range(3000)]
    f = tmp_path / "big.parquet"
    pq.write_table(pa.table({"text": texts}), f, row_group_size=500, compression="none")
    assert f.stat().st_size > 5 << 20
    before = file_identities([str(f)])[str(f)]
    texts[-1] = texts[-1][:-5] + "zzzzz"  # same length: only the last row group's bytes differ
    st = f.stat()
    pq.write_table(pa.table({"text": texts}), f, row_group_size=500, compression="none")
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = file_identities([str(f)])[str(f)]
    assert after["size"] == before["size"] and after["mtime_ns"] == before["mtime_ns"]
    assert after["sample"] != before["sample"]


def test_identity_of_an_object_is_its_etag_without_a_download(s3_bucket):
    import fsspec

    fs = fsspec.filesystem("s3", use_listings_cache=False)
    uri = f"{s3_bucket}/in/a.parquet"
    fs.pipe_file(uri.split("://", 1)[1], b"A" * 1000)
    before = file_identities([uri])[uri]
    assert before["size"] == 1000 and before["etag"]
    fs.pipe_file(uri.split("://", 1)[1], b"B" * 1000)  # replaced: same key, same size
    after = file_identities([uri])[uri]
    assert after["size"] == 1000 and after["etag"] != before["etag"]
    assert file_identities(["https://data.commoncrawl.org/x.warc.gz"]) == {
        "https://data.commoncrawl.org/x.warc.gz": None
    }


def test_guard_inputs_refuses_naming_the_file_and_restart_starts_over(tmp_path):
    a = _parquet(tmp_path / "a.parquet", ["one"])
    b = _parquet(tmp_path / "b.parquet", ["two"])
    out = tmp_path / "out"
    out.mkdir()
    calls: list[list[str]] = []
    assert guard_inputs(out, [str(a), str(b)], None, calls.append) == []  # recorded
    assert guard_inputs(out, [str(a), str(b)], None, calls.append) == []  # unchanged: resumes
    _parquet(b, ["changed"])
    with pytest.raises(OutputConflict, match=r"b\.parquet \(size \d+ -> \d+.*content differs\)") as e:
        guard_inputs(out, [str(a), str(b)], "refuse", calls.append)
    assert "a.parquet" not in str(e.value) and "restart" in str(e.value)

    def crash(changed):
        raise RuntimeError("killed while starting over")

    with pytest.raises(RuntimeError):
        guard_inputs(out, [str(a), str(b)], "restart", crash)
    # the record was not updated by the crashed restart: still refused, never resumed
    with pytest.raises(OutputConflict, match=r"b\.parquet"):
        guard_inputs(out, [str(a), str(b)], None, calls.append)
    assert guard_inputs(out, [str(a), str(b)], "restart", calls.append) == [str(b)]
    assert calls == [[str(b)]]
    assert guard_inputs(out, [str(a), str(b)], None, calls.append) == []  # the new content is recorded


def test_policy_from_the_environment(monkeypatch):
    assert changed_input_policy() == "refuse"
    monkeypatch.setenv("REFINERY_ON_CHANGED_INPUT", "restart")
    assert changed_input_policy() == "restart"
    assert changed_input_policy("refuse") == "refuse"
    monkeypatch.setenv("REFINERY_ON_CHANGED_INPUT", "yes")
    with pytest.raises(ConfigError, match="REFINERY_ON_CHANGED_INPUT must be one of refuse, restart"):
        changed_input_policy()


def test_restart_forgets_only_the_units_of_the_changed_input(tmp_path):
    """Per-file jobs: every unit whose marker names the changed input is forgotten (marker first),
    including a unit the current plan no longer names (a WARC cut into other ranges); others stay."""
    a = _parquet(tmp_path / "a.parquet", ["one"])
    b = _parquet(tmp_path / "b.parquet", ["two"])
    out = OutputDir(tmp_path / "out")
    out.prepare("job", {}, "fp")
    units = [(str(a), "a-1"), (str(b), "b-1@0-10")]
    out.guard_inputs(units)
    for uri, unit in [*units, (str(b), "b-1@10-20")]:  # the last: a range of the old file
        for sub, ext in (("docs", ".parquet"), ("rejected", ".parquet")):
            (out.root / sub / f"{unit}{ext}").write_bytes(b"x")
        out.commit_unit(unit, [], {"input": uri, "unit": unit})
    _same_size_other_bytes(b, 10)
    with pytest.raises(OutputConflict, match=r"b\.parquet"):
        out.guard_inputs(units)
    assert out.guard_inputs(units, "restart") == [str(b)]
    left = sorted(p.relative_to(out.root).as_posix() for p in out.root.rglob("*") if p.is_file())
    assert [p for p in left if "b-1" in p] == []
    assert {"docs/a-1.parquet", "rejected/a-1.parquet", "stats/a-1.json", "done/a-1.json"} <= set(left)


@pytest.mark.parametrize(
    "output,given,nested,message",
    [
        ("{t}/in", "{t}/in", True, "is also the --input"),
        ("{t}/in/", "{t}/in", True, "is also the --input"),
        ("{t}/in/out", "{t}/in", True, "lies inside --input"),
        ("{t}", "{t}/in", True, "lies inside --output"),
        ("s3://b/data", "s3a://b/data/", True, "is also the --input"),
        ("s3://b/data/out", "s3://b/data", True, "lies inside --input"),
        ("s3://b/data", "s3://b/data/docs", True, "lies inside --output"),
    ],
)
def test_overlapping_output_is_refused(tmp_path, output, given, nested, message):
    (tmp_path / "in").mkdir()
    output, given = output.format(t=tmp_path), given.format(t=tmp_path)
    with pytest.raises(OutputConflict, match=message):
        check_disjoint(output, [given], nested=nested)


def test_disjoint_outputs_are_accepted(tmp_path):
    (tmp_path / "in").mkdir()
    check_disjoint(tmp_path / "out", [str(tmp_path / "in")])
    check_disjoint(tmp_path / "in2", [str(tmp_path / "in")])  # a sibling sharing a name prefix
    check_disjoint("s3://b/data2", ["s3://b/data"])
    check_disjoint(tmp_path / "in" / "out", [str(tmp_path / "in")], nested=False)  # extract's folders
    with pytest.raises(OutputConflict, match=r"input .*x\.warc\.gz lies inside --output"):
        check_disjoint(tmp_path, files=[str(tmp_path / "in" / "x.warc.gz")], nested=False)


@pytest.mark.parametrize("kind", ["garbage", "list", "folder", "binary"])
def test_a_damaged_config_record_is_refused_by_name(tmp_path, kind):
    out = tmp_path / "out"
    out.mkdir()
    cfg = out / "_config.json"
    if kind == "folder":
        cfg.mkdir()
    else:
        cfg.write_bytes({"garbage": b"{not json", "list": b"[1, 2]", "binary": b"\xff\xfe\x00"}[kind])
    with pytest.raises(
        OutputConflict, match=rf"{re.escape(str(cfg))}.*(not valid JSON|JSON list|folder, not a file)"
    ):
        OutputDir(out).prepare("extract", {}, "fp")
    with pytest.raises(OutputConflict, match=re.escape(str(cfg))):
        guard_folder(out, "dedup", {}, "fp")


@pytest.mark.parametrize(
    "name,make", [("stats.json", "folder"), ("done", "file"), ("_inputs.json", "folder")]
)
def test_a_file_or_folder_in_the_wrong_place_is_refused_by_name(tmp_path, name, make):
    out = tmp_path / "out"
    out.mkdir()
    (out / name).mkdir() if make == "folder" else (out / name).write_text("x")
    with pytest.raises(OutputConflict, match=re.escape(str(out / name))):
        OutputDir(out).prepare("extract", {}, "fp")


def test_a_damaged_stage_marker_is_refused_by_name(tmp_path):
    from dedup.stages.base import StageStore

    store = StageStore(tmp_path)
    stages = Path(store.dir)
    (stages / "exact.json").write_text("{trunc")
    (stages / "url.json").mkdir()
    store.finish("ids", {"docs": 3})
    assert store.marker("ids") == {"docs": 3} and store.marker("minhash") is None
    for name in ("exact", "url"):
        with pytest.raises(OutputConflict, match=re.escape(f"stage marker {stages / name}.json")):
            store.marker(name)
    assert json.loads((stages / "ids.json").read_text()) == {"docs": 3}
