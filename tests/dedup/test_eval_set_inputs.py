"""An evaluation set that is not a readable text file says what it is (issue 44 item 7).

- a folder, given as a set's path (local, an `s3://` prefix, or a glob that matches only folders), is
  refused on load as a folder, not as "no such file";
- a `text` or `jsonl` file that is binary (a NUL byte: Parquet, gzip bytes, an image) or not UTF-8 (the
  shared Clough-Stevenson answers are cp1252) is refused naming the file and where, instead of being
  read with U+FFFD replacements whose n-grams would silently miss the passages;
- the real UTF-8 sets (shared WikiText-2, Wikipedia JSONL, gzipped too) still load.
"""

from __future__ import annotations

import gzip
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from core.config import ConfigError
from core.errors import InputError
from core.storage import open_store
from dedup.config import DecontaminateConfig, DedupJobConfig
from dedup.decontam import build_index


def _set(path, fmt=None) -> DecontaminateConfig:
    return DecontaminateConfig(sets=[{"name": "x", "paths": str(path), **({"format": fmt} if fmt else {})}])


@pytest.mark.parametrize("spell", ["folder", "folder/", "folder/*"])
def test_a_local_folder_is_refused_as_a_folder(tmp_path, data_dir, spell):
    (tmp_path / "folder").mkdir()
    shutil.copy(data_dir / "quality" / "wikitext-2-valid.txt", tmp_path / "folder" / "sub.txt")
    if spell == "folder/*":  # a glob that matches only a folder
        (tmp_path / "folder" / "sub.txt").unlink()
        (tmp_path / "folder" / "inner").mkdir()
    p = f"{tmp_path}/{spell}"
    with pytest.raises(ConfigError, match=r"decontaminate\.sets\[0\]: x: paths\[0\]: .* is a folder") as e:
        DedupJobConfig.from_dict({"decontaminate": {"sets": [{"name": "x", "paths": [p]}]}})
    assert "no such file" not in str(e.value) and p in str(e.value)


def test_an_s3_prefix_is_refused_as_a_folder(s3_bucket, data_dir):
    uri = f"{s3_bucket}/evals/wikitext-2-valid.txt"
    open_store(uri).upload(data_dir / "quality" / "wikitext-2-valid.txt", uri)
    with pytest.raises(ConfigError, match=rf"paths\[0\]: '{s3_bucket}/evals' is a folder"):
        _set(f"{s3_bucket}/evals")


def test_a_missing_file_is_still_no_such_file(tmp_path):
    with pytest.raises(ConfigError, match=r"no such file"):
        _set(tmp_path / "missing.txt")


def _parquet(path):
    pq.write_table(pa.table({"text": ["a passage of text"] * 50}), path)


@pytest.mark.parametrize("fmt", ["text", "jsonl"])
@pytest.mark.parametrize(
    ("name", "make", "needle"),
    [
        ("set.parquet", _parquet, r"set\.parquet: a NUL byte in its first 8000 bytes, so a binary file"),
        ("nul.txt", lambda p: p.write_bytes(b'{"text": "fine"}\n' * 900 + b'{"text": "bad \x00"}\n'), r":901: a NUL byte"),
        ("gz-bytes.txt", lambda p: p.write_bytes(gzip.compress(b"text " * 1000)), "not UTF-8|NUL byte"),
        ("image.txt", lambda p: p.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4), "not UTF-8|NUL"),
        ("latin1.txt.gz", lambda p: p.write_bytes(gzip.compress("caf\u00e9 na\u00efve\n".encode("latin-1"))),
         r"\(after line 0\): byte 0xe9 is not UTF-8"),
    ],
)  # fmt: skip
def test_a_binary_or_non_utf8_set_is_refused_naming_the_file(tmp_path, fmt, name, make, needle):
    make(tmp_path / name)
    with pytest.raises(InputError, match=needle) as e:
        build_index(_set(tmp_path / name, fmt))
    assert str(tmp_path / name) in str(e.value) and f"format {fmt} is UTF-8 text" in str(e.value)


def test_the_shared_cp1252_answers_are_refused_not_replaced(data_dir, tmp_path):
    """Real text in another encoding: 0x92 is cp1252's apostrophe; replaced, `don't` would lose its n-grams."""
    f = data_dir / "neardup" / "clough-stevenson" / "g1pB_taska.txt"
    with pytest.raises(InputError, match=r"g1pB_taska\.txt \(after line \d+\): byte 0x92 is not UTF-8"):
        build_index(_set(f, "text"))
    # the hint works: converted, the same file is a set
    utf8 = tmp_path / "g1pB_taska.txt"
    utf8.write_text(f.read_bytes().decode("cp1252"))
    assert build_index(_set(utf8, "text")).sets[0].passages > 0


def test_real_utf8_sets_still_load(data_dir, tmp_path):
    wiki = data_dir / "quality" / "wikitext-2-valid.txt"
    gz = tmp_path / "wikitext.txt.gz"
    gz.write_bytes(gzip.compress(wiki.read_bytes()))
    plain, zipped = build_index(_set(wiki)), build_index(_set(gz))
    assert plain.sets[0].passages == zipped.sets[0].passages > 0
    assert build_index(_set(data_dir / "quality" / "enwiki_sample_articles.jsonl")).sets[0].records == 105
