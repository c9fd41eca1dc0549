"""The trainer against hostile or unusable shard inputs (issue 44 items 1 and 7): refused before its process
group starts, exit 2, one line naming the field or the config key, never a traceback.

Real shards (testkit/corpus.py's two sources), one of them on moto's S3 server (testkit/s3.py) read through
the node cache, as a multi-node run reads them. Checked:
- a manifest whose `bin_sha256` is `../victim` (the run that trained on a file outside the cache and exited
  0), or any other hostile path-bearing field: `config error: data.recipe: …files[i].<field> …`, with a
  valid shard planted where the `..` points, and nothing created outside the cache (security);
- a cache folder the indexes cannot be written to: the error names the folder and data.shard_cache_dir;
- the end-of-run sample opens the manifest's `tokenizer.path` only when it is a regular file with the
  manifest's sha256 (security: /dev/zero would hang the read; another file is not the shards' tokenizer).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import yaml

from testkit.corpus import build_two_sources, two_source_recipe
from testkit.s3 import upload_tree
from tests.trainer.test_train_startup import _config, no_process_group  # noqa: F401 (a fixture)
from trainer import train
from trainer.evaluation import checked_tokenizer


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> dict[str, Path]:
    return build_two_sources(tmp_path_factory.mktemp("src"))


def _s3_config(tmp_path: Path, sources, s3_bucket: str, manifest: dict | None = None) -> Path:
    """A debug-model config whose recipe draws `web` from S3 (with `manifest` uploaded as its manifest.json)
    and `multi` from its local folder."""
    import s3fs

    uri = f"{s3_bucket}/shards/web"
    upload_tree(sources["web"], uri)
    if manifest is not None:
        s3fs.S3FileSystem().pipe_file(
            f"{uri}/manifest.json".removeprefix("s3://"), json.dumps(manifest).encode()
        )
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump(two_source_recipe({"web": uri, "multi": sources["multi"]})))
    return _config(tmp_path, str(recipe))


@pytest.mark.security
@pytest.mark.parametrize(
    ("field", "value"),
    [("bin_sha256", "../victim"), ("idx_sha256", "../../made-by-lock"), ("bin", "../victim.bin")],
)
@pytest.mark.usefixtures("no_process_group")
def test_hostile_manifest_exits_2_naming_the_field(sources, s3_bucket, tmp_path, capsys, field, value):
    m = json.loads((sources["web"] / "manifest.json").read_text())
    i = max(range(len(m["files"])), key=lambda k: m["files"][k]["bin_bytes"])
    victim = sources["web"] / m["files"][i]["bin"]
    for name in ("victim.bin", "node/victim.bin"):  # a valid shard where "../victim" points
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(victim, tmp_path / name)
    m["files"][i][field] = value
    cfg = _s3_config(tmp_path, sources, s3_bucket, m)
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    assert train.main(["--config", str(cfg), f"data.shard_cache_dir={tmp_path / 'node' / 'cache'}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("config error: data.recipe:"), err
    assert f"manifest.json: files[{i}].{field} must be" in err
    assert "Traceback" not in err
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before  # no lock, no cache file, nothing


@pytest.mark.usefixtures("no_process_group")
def test_a_cache_folder_that_cannot_hold_the_indexes_exits_2_naming_it(sources, s3_bucket, tmp_path, capsys):
    cfg = _s3_config(tmp_path, sources, s3_bucket)
    not_a_folder = tmp_path / "cache-is-a-file"
    not_a_folder.write_text("")
    assert train.main(["--config", str(cfg), f"data.shard_cache_dir={not_a_folder}"]) == 2
    err = capsys.readouterr().err
    assert f"config error: shard cache {not_a_folder} (data.shard_cache_dir): cannot use it" in err, err
    assert "set data.shard_cache_dir to a writable node-local folder" in err and "Traceback" not in err


@pytest.mark.security
def test_the_sample_opens_the_manifests_tokenizer_only_when_it_is_that_tokenizer(sources, tmp_path):
    tok = json.loads((sources["web"] / "manifest.json").read_text())["tokenizer"]
    assert checked_tokenizer(tok["path"], tok["sha256"]) == tok["path"]
    other = tmp_path / "tokenizer.json"
    other.write_text(Path(tok["path"]).read_text() + "\n")  # as valid, but not the same file
    cases = [
        ("/dev/zero", "not a regular file"),  # stat only: reading it would never end
        (str(tmp_path), "not a regular file"),
        (str(tmp_path / "missing.json"), "No such file or directory"),
        (str(other), "the shards were made with"),
        (None, "names no tokenizer"),
    ]
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "fifo")  # opening a FIFO blocks until a writer comes
        cases.append((str(tmp_path / "fifo"), "not a regular file"))
    for path, needle in cases:
        with pytest.raises(ValueError, match=needle):
            checked_tokenizer(path, tok["sha256"])
