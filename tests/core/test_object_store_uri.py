"""core/storage.py `check_object_store_uri`: the one check of an object-store URI's form, which every
`ObjectStore` makes on its URI and configs make at load to name their key (issue 44 item 4).

`checkpoint.dir=s3://` used to reach the client with an empty bucket and fail there with "list index out
of range"; `..` and `//` segments are keys S3 keeps literally, so such a prefix is not the folder it reads
as. No network: the check runs before any client is made.
"""

from __future__ import annotations

import pytest

from core.storage import OBJECT_STORE_PREFIXES, ObjectStore, check_object_store_uri

GOOD = ["s3://bucket", "s3://bucket/", "s3://my.bucket-1/runs/a/b/", "s3a://b1c/x", "gs://Bucket_1/x.parquet",
        "az://container/p", "memory://m0/x"]  # fmt: skip

BAD = {
    "s3://": "names no bucket",
    "s3:///x": "names no bucket",
    "gs://": "names no bucket",
    "s3://bucket/..": "an '..' path segment",
    "s3://bucket/../other": "an '..' path segment",
    "s3://bucket/a/./b": "an '.' path segment",
    "s3://bucket/a//b": "an empty path segment",
    "s3://-bucket/x": "is not a bucket name",
    "s3://bucket-/x": "is not a bucket name",
    "s3://buc ket/x": "is not a bucket name",
    "s3://host:9000/x": "is not a bucket name",
    "s3://" + "b" * 300: "is not a bucket name",
    "https://bucket/x": "is not an object-store URI",
    "/local/path": "is not an object-store URI",
}


@pytest.mark.parametrize("uri", GOOD)
def test_well_formed_uris_pass(uri):
    check_object_store_uri(uri)


@pytest.mark.parametrize(("uri", "why"), BAD.items(), ids=list(BAD))
def test_malformed_uris_are_refused_saying_why(uri, why):
    with pytest.raises(ValueError, match=why):
        check_object_store_uri(uri)


@pytest.mark.parametrize("prefix", OBJECT_STORE_PREFIXES)
def test_every_scheme_needs_a_bucket(prefix):
    with pytest.raises(ValueError, match="names no bucket"):
        check_object_store_uri(prefix)
    check_object_store_uri(prefix + "bucket/key")


@pytest.mark.parametrize("uri", ["s3://", "s3:///x", "s3://bucket/../x"])
def test_an_object_store_refuses_a_malformed_uri_before_its_client(uri):
    with pytest.raises(ValueError, match=r"names no bucket|path segment"):
        ObjectStore(uri)
