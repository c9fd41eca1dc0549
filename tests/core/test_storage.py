"""core/storage.py and core/output.py on a real S3 server (moto on 127.0.0.1) and on a local folder.

What an object-store output must guarantee, each checked on the server's actual keys: the config
guard works, no key ever has a temporary name, a unit's marker exists only after its files, a
failed commit leaves no marker (and the redo overwrites what it left), an unreachable bucket is an
OutputConflict before any work. The local folder keeps a real rename (same inode).
"""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from core.errors import InputError, OutputConflict
from core.files import doc_parquet_uris, parquet_schema
from core.output import OutputDir, check_folder_path
from core.storage import ObjectStore, join, local_input


def _keys(uri: str) -> list[str]:
    store = ObjectStore(uri)
    return sorted(k[len(uri) + 1 :] for k in store.list(uri, recursive=True))


def _commit(out: OutputDir, unit: str, payload: bytes) -> None:
    tmp = out.tmp_path("docs", unit, ".parquet")
    tmp.write_bytes(payload)
    out.commit_unit(unit, {"docs": tmp}, {"input": f"in/{unit}", "docs_written": 1})


def test_local_commit_is_a_rename(tmp_path):
    out = OutputDir(tmp_path / "o", ("docs", "stats", "done"))
    out.prepare("job", {"a": 1}, "fp")
    tmp = out.tmp_path("docs", "u1", ".parquet")
    assert tmp.parent == out.root / "docs"  # made in the folder itself: a rename, never a copy
    tmp.write_bytes(b"x" * 100)
    inode = tmp.stat().st_ino
    out.commit_unit("u1", {"docs": tmp}, {"input": "in/u1"})
    final = out.root / "docs" / "u1.parquet"
    assert final.stat().st_ino == inode and not tmp.exists()
    assert out.is_done("u1") and out.read_marker("u1")["input"] == "in/u1"


def test_object_store_commit_guard_and_no_temporary_key(s3_bucket):
    root = join(s3_bucket, "jobs", "one")
    out = OutputDir(root, ("docs", "stats", "done"))
    assert out.prepare("job", {"a": 1}, "fp") is True
    tmp = out.tmp_path("docs", "u1", ".parquet")
    assert not str(tmp).startswith("s3://")  # staged on local disk, never under a temporary key
    assert not out.is_done("u1")
    tmp.write_bytes(b"payload")
    out.commit_unit("u1", {"docs": tmp}, {"input": "in/u1", "docs_written": 1})
    assert _keys(root) == ["_config.json", "docs/u1.parquet", "done/u1.json", "stats/u1.json"]
    assert ObjectStore(root).read_bytes(out.path("docs", "u1.parquet")) == b"payload"
    assert not tmp.exists()  # the staging copy is gone once uploaded
    assert out.is_done("u1") and out.read_stats("u1")["docs_written"] == 1
    assert json.loads(ObjectStore(root).read_bytes(out.path("_config.json")))["fingerprint"] == "fp"
    # the same config resumes; another is refused, naming the key that differs
    assert OutputDir(root).prepare("job", {"a": 1}, "fp") is False
    with pytest.raises(OutputConflict, match=r"differs in: a"):
        OutputDir(root).prepare("job", {"a": 2}, "fp2")
    out.set_success(True)
    assert "_SUCCESS" in _keys(root)
    out.set_success(False)
    assert "_SUCCESS" not in _keys(root)


def test_failed_commit_leaves_no_marker_and_the_redo_overwrites(s3_bucket):
    root = join(s3_bucket, "partial")
    out = OutputDir(root, ("docs", "rejected", "stats", "done"))
    out.prepare("job", {}, "fp")
    docs = out.tmp_path("docs", "u1", ".parquet")
    docs.write_bytes(b"first try")
    missing = out.tmp_path("rejected", "u1", ".parquet")  # never written: its upload fails
    with pytest.raises(FileNotFoundError):
        out.commit_unit("u1", {"docs": docs, "rejected": missing}, {"input": "in/u1"})
    # an orphan data key at its final name, but no stats and no marker: the unit is not done
    assert _keys(root) == ["_config.json", "docs/u1.parquet"]
    assert not out.is_done("u1")
    _commit(out, "u1", b"second try")
    assert ObjectStore(root).read_bytes(out.path("docs", "u1.parquet")) == b"second try"
    assert out.is_done("u1")


def test_unreachable_or_missing_bucket_is_refused_before_work(s3_bucket, s3_server):
    with pytest.raises(OutputConflict, match="bucket 'refinery-no-such-bucket' does not exist"):
        check_folder_path("s3://refinery-no-such-bucket/out")
    ObjectStore(s3_bucket).write_bytes(join(s3_bucket, "a-file"), b"x")
    with pytest.raises(OutputConflict, match="is an object, not a folder"):
        OutputDir(join(s3_bucket, "a-file")).prepare("job", {}, "fp")
    # A prefix is a folder whether or not a key is under it right now: two trainer nodes each write and
    # delete a probe key under checkpoint.dir, and the other's check ran between the two (a flaky
    # "is an object" in the two-node test, when the check asked "exists" and then "holds a key").
    folder = join(s3_bucket, "ckpt")
    store = ObjectStore(s3_bucket)
    store.write_bytes(join(folder, ".probe"), b"")
    assert not store.is_file(folder) and store.exists(folder)
    check_folder_path(folder)
    store.delete(join(folder, ".probe"))
    assert not store.is_file(folder) and store.is_file(join(s3_bucket, "a-file"))
    check_folder_path(folder)
    s3_server.stop()
    try:
        with pytest.raises(OutputConflict, match="cannot be reached"):
            check_folder_path(join(s3_bucket, "out"))
    finally:
        s3_server.start()


def test_parquet_listing_and_reading_on_object_store(s3_bucket, tmp_path):
    table = pa.table({"id": ["a", "b"], "text": ["one", "two"]})
    local = tmp_path / "x.parquet"
    pq.write_table(table, local)
    store = ObjectStore(s3_bucket)
    for key in (
        "ds/docs/p1.parquet",
        "ds/docs/sub/p2.parquet",
        "ds/docs/.p3.parquet.tmp-1",
        "ds/docs/_tmp/p4.parquet",
        "ds/stats/p1.json",
        "ds/other.parquet",
    ):
        store.write_bytes(join(s3_bucket, key), local.read_bytes())
    # an output folder: its docs/ only, `.`/`_` names skipped, sorted full URIs
    assert doc_parquet_uris(join(s3_bucket, "ds")) == [
        join(s3_bucket, "ds/docs/p1.parquet"),
        join(s3_bucket, "ds/docs/sub/p2.parquet"),
    ]
    assert doc_parquet_uris(join(s3_bucket, "ds/other.parquet")) == [join(s3_bucket, "ds/other.parquet")]
    with pytest.raises(InputError, match="no Parquet files"):
        doc_parquet_uris(join(s3_bucket, "nothing-here"))
    uri = join(s3_bucket, "ds/docs/p1.parquet")
    assert parquet_schema(uri).names == ["id", "text"]
    with local_input(uri) as path:
        assert pq.read_table(path).equals(table)
    store.write_bytes(join(s3_bucket, "bad.parquet"), b"not parquet")
    with pytest.raises(InputError, match=r"bad\.parquet: not a readable Parquet file"):
        parquet_schema(join(s3_bucket, "bad.parquet"))


@pytest.mark.parametrize("where", ["local", "s3"])
def test_job_output_is_read_marker_first(where, request, tmp_path, caplog):
    """The one reader rule (core.files.finished_docs) on a local folder and on S3 alike."""
    import logging
    from pathlib import Path

    from core.files import doc_parquet_files
    from core.storage import open_store

    root = request.getfixturevalue("s3_bucket") if where == "s3" else str(tmp_path / "out")
    local = tmp_path / "x.parquet"
    pq.write_table(pa.table({"id": ["a"], "text": ["one"]}), local)
    store = open_store(root)

    def put(rel: str, data: bytes) -> None:
        store.makedirs(join(root, rel).rsplit("/", 1)[0])  # a local folder; nothing on S3
        store.write_bytes(join(root, rel), data)

    # per-unit job: u2's data file is an orphan of a killed commit (no marker), so it is not read
    per_unit = "extract"
    for key in ("docs/u1.parquet", "docs/u2.parquet"):
        put(f"{per_unit}/{key}", local.read_bytes())
    put(f"{per_unit}/done/u1.json", b"{}")
    with caplog.at_level(logging.WARNING, logger="core.files"):
        assert doc_parquet_uris(join(root, per_unit)) == [join(root, per_unit, "docs/u1.parquet")]
    assert "1 file(s) in docs/ without a completion marker in done/ skipped" in caplog.text
    assert "u2.parquet" in caplog.text
    if where == "local":  # the Path listing every local reader uses (tokenizer, plan, report) too
        assert doc_parquet_files(Path(root) / per_unit) == [Path(root) / per_unit / "docs" / "u1.parquet"]
    # the same rule in Hive's layout (extract's `output.partition_by: lang`): a unit's files sit one
    # folder down, one per language, and belong to the unit named by the file; u4 has no marker
    part = "partitioned"
    for key in ("lang=deu_Latn/u3", "lang=rus_Cyrl/u3", "lang=rus_Cyrl/u4", "notapartition/u3"):
        put(f"{part}/docs/{key}.parquet", local.read_bytes())
    put(f"{part}/done/u3.json", b"{}")
    assert doc_parquet_uris(join(root, part)) == [
        join(root, part, "docs/lang=deu_Latn/u3.parquet"),
        join(root, part, "docs/lang=rus_Cyrl/u3.parquet"),
    ]
    # whole-output job (dedup): nothing until _SUCCESS
    whole = "dedup"
    put(f"{whole}/_config.json", b"{}")
    put(f"{whole}/docs/part-0.parquet", local.read_bytes())
    with pytest.raises(InputError, match="unfinished job output"):
        doc_parquet_uris(join(root, whole))
    put(f"{whole}/_SUCCESS", b"")
    assert doc_parquet_uris(join(root, whole)) == [join(root, whole, "docs/part-0.parquet")]
    # a plain folder of Parquet files (no markers, no _config.json) is read whole
    put("plain/docs/p.parquet", local.read_bytes())
    assert doc_parquet_uris(join(root, "plain")) == [join(root, "plain/docs/p.parquet")]


def test_partition_folders_take_plain_values_only():
    """A partition value becomes a path component: a language code does; a value that could leave the
    folder or hide in it is refused, never escaped; null is Hive's default partition."""
    from core.output import HIVE_NULL, partition_folder, unit_of

    assert partition_folder("lang", "rus_Cyrl") == "lang=rus_Cyrl"
    assert partition_folder("lang", None) == f"lang={HIVE_NULL}"
    for bad in ("../x", "a/b", "", ".hidden", "_tmp", "x\x00", "é", 3, "a" * 65):
        with pytest.raises(ValueError, match="cannot name a partition folder"):
            partition_folder("lang", bad)
    assert unit_of("u1.parquet") == unit_of("lang=x/u1.parquet") == unit_of("a=1/b=2/u1.parquet") == "u1"
    assert unit_of("sub/u1.parquet") == "sub/u1"  # a plain subfolder is no partition: no unit's file
