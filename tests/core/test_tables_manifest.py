"""A hostile `_table.json` (issue 44 item 1, `pytest -m security`): refused naming the manifest and the field
before any part is joined to the table's folder, so no file outside it is read.

On an object store a table is its manifest's `parts` joined to its folder (core/tables.py), and whoever can
write the store writes the manifest. The tables here are on fsspec's in-memory store (an object store of the
project, core/storage.py) with no Spark session (`spark=None`, `spark_native="false"`, which asks the JVM
nothing): any part the reader let through would reach Spark and fail as an AttributeError, so the refusal
being a TableManifestError shows nothing was read. A victim Parquet object sits where each `..` would land;
it is still there, unchanged. The writer's own manifest (`arrow_manifest`) reads back, parts inside the folder.
"""

from __future__ import annotations

import io
import json
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from core.storage import ObjectStore, join
from core.tables import MANIFEST, TableManifestError, Tables, arrow_manifest

pytestmark = pytest.mark.security

SCHEMA = '{"fields":[{"metadata":{},"name":"id","nullable":true,"type":"long"}],"type":"struct"}'

HOSTILE_PARTS = ["../victim.parquet", "../../victim.parquet", "/etc/passwd", "/victim.parquet",
                 "a/../../victim.parquet", "..%2Fvictim.parquet", "%2E%2E%2Fvictim.parquet",
                 "..\\victim.parquet", "part-00000.parquet\x00", "x\x00/../victim.parquet", "", ".", "..",
                 ".part-00000.parquet", "a" * 300 + ".parquet", "memory://victim.parquet",
                 "part-00000.json", None, 7, ["part-00000.parquet"]]  # fmt: skip


def _parquet() -> bytes:
    buf = io.BytesIO()
    pq.write_table(pa.table({"id": [1, 2, 3]}), buf)
    return buf.getvalue()


@pytest.fixture()
def store():
    """A fresh root on the in-memory store: a victim beside the job folder and one inside it, one real part."""
    root = f"memory://t{uuid.uuid4().hex[:12]}"
    s = ObjectStore(root)
    for key in ("victim.parquet", "job/victim.parquet", "job/stages/t/part-00000.parquet"):
        s.write_bytes(join(root, key), _parquet())
    yield root, s
    s.delete_tree(root)


def _tables(root: str) -> Tables:
    return Tables(join(root, "job"), spark=None, spark_native="false")  # no JVM is asked anything


def _plant(root: str, s: ObjectStore, manifest: object) -> str:
    where = join(root, "job/stages/t", MANIFEST)
    s.write_bytes(where, manifest if isinstance(manifest, bytes) else json.dumps(manifest).encode())
    return where


def _victims_unchanged(root: str, s: ObjectStore) -> None:
    for key in ("victim.parquet", "job/victim.parquet"):
        assert s.read_bytes(join(root, key)) == _parquet()


@pytest.mark.parametrize("part", HOSTILE_PARTS)
def test_a_hostile_part_is_refused_naming_the_manifest_and_the_field(store, part):
    root, s = store
    where = _plant(root, s, arrow_manifest(SCHEMA, [("part-00000.parquet", 3), (part, 1)]))
    tables = _tables(root)
    assert tables.exists("stages/t")  # the manifest makes it a finished table: only its fields are wrong
    with pytest.raises(
        TableManifestError, match=rf"^{where}: parts\[1\] must be a file name in the table's folder"
    ):
        tables.read("stages/t")
    _victims_unchanged(root, s)


@pytest.mark.parametrize(
    ("manifest", "needle"),
    [
        ([], "not a table manifest"),
        ({"native": "false", "schema": SCHEMA, "parts": []}, "native must be true or false, got 'false'"),
        ({"schema": SCHEMA, "parts": []}, "native must be true or false, got None"),
        ({"native": False, "schema": {"type": "struct"}, "parts": []}, "schema must be a Spark schema"),
        ({"native": False, "schema": '{"type": "nonsense"}', "parts": []}, "schema must be a Spark schema"),
        ({"native": False, "schema": "[" * 5000 + "]" * 5000, "parts": []}, "schema: nests deeper"),
        ({"native": False, "schema": SCHEMA, "parts": "../victim.parquet"}, "parts must be a list"),
        ({"native": False, "schema": SCHEMA, "parts": ["part-00000.parquet"] * 2}, r"parts\[1\] lists"),
        (b'{"native": false, "native": true}', "native: the key 'native' is given twice"),
        (b'{"native": false, "schema": NaN}', "schema: "),
        (b"[" * 100_000, "nests deeper"),
        (b"\xff\xfe", "not UTF-8"),
    ],
)
def test_a_manifest_that_is_not_the_writers_is_refused_naming_the_field(store, manifest, needle):
    root, s = store
    where = _plant(root, s, manifest)
    with pytest.raises(TableManifestError, match=rf"^{where}: .*{needle}"):
        _tables(root).read("stages/t")
    _victims_unchanged(root, s)


def test_the_writers_manifest_reads_back_with_its_parts_inside_the_folder(store):
    from pyspark.sql.types import StructType

    from core.tables import read_manifest

    root, s = store
    _plant(root, s, arrow_manifest(SCHEMA, [("part-00000.parquet", 3)]))
    native, schema, parts = read_manifest(s, join(root, "job/stages/t"))
    assert native is False and schema == StructType.fromJson(json.loads(SCHEMA))
    assert parts == [join(root, "job/stages/t/part-00000.parquet")]


def test_a_table_without_a_manifest_is_still_not_found(store):
    root, _ = store
    with pytest.raises(FileNotFoundError):
        _tables(root).read("stages/never")
