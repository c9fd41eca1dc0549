"""Hostile manifest.json fields (issue 44 item 1, `pytest -m security`): refused naming the field, before
any of them reaches a path, an open or a lock.

The manifests are the real ones of testkit/corpus.py's two sources (the tokenize job's own per-file
function); one field of one entry is replaced by a hostile value. Checked, as a class:
- every path-bearing field (`bin_sha256`, `idx_sha256`, `bin`, `idx`, `ids`) and every size or count,
  over many hostile values (`..`, absolute paths, `%2F`, NUL, non-hex, 63/65 digits, upper case, wrong
  types), is a ManifestError naming the manifest and `files[0].<field>`;
- end to end, on S3 through the node cache (where `bin_sha256: "../victim"` once made a file outside the
  cache a verified shard, and a crafted `idx_sha256` created a file through the lock's O_CREAT) and on a
  local folder: the sampler refuses the recipe naming the field, and no file outside the cache is opened
  (a CPython audit hook records every open) or created;
- the cache's own guard, for a caller that hands it unchecked entries: the same refusal, nothing made.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mixtures.recipe import Recipe, RecipeError
from mixtures.sampler import MixtureSampler
from testkit.audit import recording, tree
from testkit.corpus import build_two_sources, two_source_recipe
from testkit.s3 import upload_tree
from tokens.manifest import ManifestError, parse_manifest
from tokens.shard_cache import Remote, ShardCache, open_cached_shards

pytestmark = pytest.mark.security

SHA = "0" * 64
HOSTILE_SHA = [
    "../victim",
    "../../made-by-lock",
    "/etc/passwd",
    "..%2Fvictim",
    "a" * 63,
    "a" * 65,
    "A" * 64,  # hexdigest writes lower case: another spelling would be another cache file
    "g" * 64,
    "a" * 63 + "\x00",
    "a" * 64 + "\x00",
    "a" * 64 + "/../x",
    " " + "a" * 63,
    "",
    None,
    64,
    ["a" * 64],
]
HOSTILE_NAMES = {
    "bin": ["../victim.bin", "/tmp/victim.bin", "sub/part.bin", "..%2Fvictim.bin", "part.bin\x00", ".hidden.bin",
            "part\\..\\x.bin", "part.idx", "", "..", None, 7],
    "idx": ["../victim.idx", "/tmp/victim.idx", "..%2Fvictim.idx", "part-00000.idx\x00.bin", "x.idx",
            "part-00000.bin", None],
    "ids": ["../victim.ids.parquet", "/abs.ids.parquet", "a/b.ids.parquet", "x.parquet", 3],
}  # fmt: skip
HOSTILE_COUNTS = [-1, 2**70, True, 1.5, "10", None]

CASES = (
    [(f, v) for f in ("bin_sha256", "idx_sha256") for v in HOSTILE_SHA]
    + [(f, v) for f, values in HOSTILE_NAMES.items() for v in values]
    + [(f, v) for f in ("bin_bytes", "documents", "tokens") for v in HOSTILE_COUNTS]
    + [("bin_bytes", 10**15), ("bin_bytes", "+2")]  # past S3's largest object; 2 bytes off its token count
)


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> dict[str, Path]:
    return build_two_sources(tmp_path_factory.mktemp("src"))


def _manifest(folder: Path) -> dict:
    return json.loads((folder / "manifest.json").read_text())


def _entry(folder: Path) -> int:
    """The largest shard of the source (a non-empty .bin), the entry the tests make hostile."""
    files = _manifest(folder)["files"]
    return max(range(len(files)), key=lambda i: files[i]["bin_bytes"])


def _hostile(folder: Path, field: str, value) -> tuple[dict, int]:
    m, i = _manifest(folder), _entry(folder)
    m["files"][i][field] = m["files"][i][field] + 2 if value == "+2" else value
    return m, i


@pytest.mark.parametrize(("field", "value"), CASES)
def test_every_hostile_field_is_refused_naming_it(sources, field, value):
    m, i = _hostile(sources["web"], field, value)
    where = "s3://bucket/shards/web/manifest.json"
    with pytest.raises(ManifestError) as e:
        parse_manifest(json.dumps(m), where)
    msg = str(e.value)
    assert msg.startswith((f"{where}: files[{i}].{field} ", f"{where}: files[{i}].{field}: ")), msg
    assert "shard_cache" not in msg  # a size that cannot be is the manifest's fault, not the bound's


def test_the_real_manifests_pass_unchanged(sources):
    for folder in sources.values():
        raw = _manifest(folder)
        assert parse_manifest(json.dumps(raw), "m").model_dump(exclude_unset=True) == raw


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("[]", "not a tokenize manifest"),
        ('{"files": [], "tokens": 0}', "tokenizer is missing"),
        ('{"files": [], "files": [], "tokenizer": {}, "tokens": 0}', "the key 'files' is given twice"),
        ("{", "not valid JSON"),
        (b"\xff\xfe{}", "not UTF-8"),
        ("[" * 100_000 + "]" * 100_000, "nests deeper than"),
        ('{"files": [], "tokenizer": {}, "tokens": 1e400}', "tokens: 1e400 overflows"),
    ],
)
def test_a_manifest_that_is_not_one_is_refused(text, needle):
    with pytest.raises(ManifestError, match=rf"^m: .*{needle}"):
        parse_manifest(text, "m")


def test_a_manifest_with_files_names_dtype_and_tokenizer_ids(sources):
    for key, where in [("dtype", None), ("eod_id", "tokenizer"), ("vocab_size", "tokenizer")]:
        m = _manifest(sources["web"])
        del (m[where] if where else m)[key]
        with pytest.raises(ManifestError, match=rf"^m: {where + '.' if where else ''}{key} is missing"):
            parse_manifest(json.dumps(m), "m")
    m = _manifest(sources["web"])
    m["tokenizer"]["eod_id"] = m["tokenizer"]["vocab_size"]
    with pytest.raises(ManifestError, match=r"tokenizer\.eod_id is \d+, not an id of a vocabulary of"):
        parse_manifest(json.dumps(m), "m")


# -- end to end: nothing outside the cache is opened or created ------------------------------------------


def _plant_victim(tmp_path: Path, sources) -> None:
    """A valid shard pair outside the cache, where a `..` would reach it: what was trained on."""
    m = _manifest(sources["multi"])
    f = m["files"][_entry(sources["multi"])]
    for name in ("victim.bin", "node/victim.bin", f"node/{SHA}.bin"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(sources["multi"] / f["bin"], tmp_path / name)
        shutil.copy(sources["multi"] / f["idx"], (tmp_path / name).with_suffix(".idx"))


S3_CASES = [
    ("bin_sha256", "../victim"),
    ("bin_sha256", "../../victim"),
    ("idx_sha256", "../../made-by-lock"),
    ("idx_sha256", "/tmp/made-by-lock"),
    ("bin", "../victim.bin"),
    ("bin", "..%2Fvictim.bin"),
    ("idx", "../victim.idx"),
    ("bin_sha256", "A" * 64),
]


@pytest.mark.parametrize(("field", "value"), S3_CASES)
def test_hostile_manifest_on_s3_opens_and_creates_nothing_outside_the_cache(
    sources, s3_bucket, tmp_path, field, value
):
    uri = f"{s3_bucket}/shards/web"
    upload_tree(sources["web"], uri)
    m, i = _hostile(sources["web"], field, value)
    import s3fs

    s3fs.S3FileSystem().pipe_file(f"{uri}/manifest.json".removeprefix("s3://"), json.dumps(m).encode())
    _plant_victim(tmp_path, sources)
    cache = ShardCache(tmp_path / "node" / "cache", 10**9)
    recipe = Recipe.from_dict(two_source_recipe({"web": uri, "multi": sources["multi"]}), source="t")
    before = tree(tmp_path)
    with recording() as opened, pytest.raises(RecipeError, match=rf"manifest\.json: files\[{i}\]\.{field} "):
        MixtureSampler(recipe, 64, shard_cache=cache)
    outside = [p for p in opened if p.startswith(str(tmp_path)) and not p.startswith(str(cache.root))]
    assert not outside, outside
    assert tree(tmp_path) == before  # nothing made, by a lock or otherwise


@pytest.mark.parametrize(("field", "value"), [c for c in S3_CASES if c[0] in ("bin", "idx")])
def test_hostile_manifest_in_a_local_folder_opens_nothing_outside_it(sources, tmp_path, field, value):
    folder = tmp_path / "shards" / "web"
    shutil.copytree(sources["web"], folder)
    m, i = _hostile(folder, field, value)
    (folder / "manifest.json").write_text(json.dumps(m))
    _plant_victim(tmp_path / "shards", sources)  # shards/victim.bin: what "../victim.bin" names
    recipe = Recipe.from_dict(two_source_recipe({"web": folder, "multi": sources["multi"]}), source="t")
    with recording() as opened, pytest.raises(RecipeError, match=rf"manifest\.json: files\[{i}\]\.{field} "):
        MixtureSampler(recipe, 64)
    assert not [p for p in opened if "victim" in p]


@pytest.mark.parametrize("value", HOSTILE_SHA)
@pytest.mark.parametrize("field", ["bin_sha256", "idx_sha256"])
def test_the_cache_refuses_an_unchecked_hash_from_any_caller(sources, tmp_path, field, value):
    """open_cached_shards given raw entries (not through parse_manifest): the cache's own guard."""
    f = dict(_manifest(sources["web"])["files"][0], **{field: value})
    _plant_victim(tmp_path, sources)
    cache = ShardCache(tmp_path / "node" / "cache", 10**9)
    before = tree(tmp_path)
    with (
        recording() as opened,
        pytest.raises(ManifestError, match=rf"s3://b/web/part-\d+\.\w+: its {field} must be"),
    ):
        open_cached_shards(cache, "s3://b/web", [f])
    assert not opened and tree(tmp_path) == before


@pytest.mark.parametrize(
    ("field", "value"),
    # x.idx beside part-N.bin is a plain name: only the manifest's pairing rule refuses it
    [(f, v) for f in ("bin", "idx") for v in HOSTILE_NAMES[f] if v != "x.idx"],
)
def test_the_cache_refuses_an_unchecked_name_from_any_caller(sources, tmp_path, field, value):
    f = dict(_manifest(sources["web"])["files"][0], **{field: value})
    cache = ShardCache(tmp_path / "cache", 10**9)
    with pytest.raises(ManifestError, match=rf"^s3://b/web/manifest\.json: files\[0\]\.{field} must be"):
        open_cached_shards(cache, "s3://b/web", [f])
    assert not (tmp_path / "cache").exists()


@pytest.mark.parametrize("size", [-1, True, 2**63, 1.0])
def test_the_cache_refuses_an_impossible_size(size):
    with pytest.raises(ManifestError, match=r"s3://b/x\.bin: its size must be an integer"):
        Remote("s3://b/x.bin", SHA, size, "bin")
