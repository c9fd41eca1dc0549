"""The curation jobs on a real Spark standalone cluster give exactly what the embedded `local[*]` run gives.

Every Spark step of scripts/pipeline.py (extract → dedup → score → tokenize per source of
mixtures/demo.yaml) runs twice over three real WARCs: once as `python -m ...` (local[*]) and once as
`spark-submit --master spark://127.0.0.1:PORT <pkg>/__main__.py ...` on the two-worker cluster of
conftest.py. The two runs must hold the same document ids and texts after each stage, the same quality
scores, and the same token counts per source. The quality model and the tokenizer are single-process
steps: they are made once, and both runs use them, so a difference can only come from the engine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from scripts.pipeline import Layout, Step, curation_steps, tokenize_steps

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "mixtures" / "demo.yaml"
# Small real WARCs with English pages that survive the filters (about 40 documents together).
WARCS = (
    "crawl-2024-sample-0000.warc.gz",
    "crawl-2024-sample-0001.warc.gz",
    "BL-20140325121225068-00000-32090~opera~8443.warc.gz",
)


def _run(cmd: list[str], env: dict[str, str], log: Path) -> None:
    with log.open("ab") as f:
        f.write(("\n$ " + " ".join(cmd) + "\n").encode())
        f.flush()
        rc = subprocess.run(cmd, cwd=ROOT, env=env, stdout=f, stderr=subprocess.STDOUT).returncode
    if rc != 0:
        pytest.fail(
            f"exit {rc}: {' '.join(cmd)}\n--- log tail ---\n{log.read_text(errors='replace')[-4000:]}"
        )


def _rows(folder: Path, columns: list[str]) -> list[dict]:
    files = sorted(folder.glob("*.parquet"))
    assert files, f"no Parquet in {folder}"
    rows = [r for f in files for r in pq.read_table(f, columns=columns).to_pylist()]
    return sorted(rows, key=lambda r: r["id"])


@pytest.fixture(scope="module")
def shared_inputs(tmp_path_factory, warc_dir, data_dir):
    """A quality model and a tokenizer, trained once (single-process steps) from a local extract."""
    work = tmp_path_factory.mktemp("cluster-shared")
    # perplexity=False: the reference LM (train-lm, minutes of DeepSpeed on CPU) is not what this
    # test compares; quality and toxicity still run in the score step on both deployments
    lay = Layout(warcs=tuple(str(warc_dir / w) for w in WARCS), out=str(work), shared_data=str(data_dir),
                 perplexity=False)  # fmt: skip
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    steps = {s.name: s for s in curation_steps(lay)}
    log = work / "log.txt"
    for name in ("extract", "train-quality"):
        _run(steps[name].local(sys.executable), env, log)
    tok = Step(
        "train-tokenizer",
        "tokens",
        ("train-tokenizer", "--input", f"{work}/extract", "--output", f"{work}/tokenizer", "--config",
         "configs/tokenizer.yaml"),
        spark=False,
    )  # fmt: skip
    _run(tok.local(sys.executable), env, log)
    return work / "quality-model", work / "tokenizer" / "tokenizer.json"


def _recipe_without_perplexity(out: Path) -> Path:
    """The demo recipe minus its perplexity selectors: these layouts score no perplexity (see above)."""
    data = yaml.safe_load(RECIPE.read_text())
    for src in data["sources"].values():
        (src.get("select") or {}).pop("perplexity", None)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "recipe.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def spark_steps(out: Path, warc_dir: Path, data_dir: Path, model: Path, tokenizer: Path) -> list[Step]:
    lay = Layout(
        warcs=tuple(str(warc_dir / w) for w in WARCS),
        out=str(out),
        shared_data=str(data_dir),
        quality_model=str(model),
        perplexity=False,
    )
    steps = [s for s in curation_steps(lay) + tokenize_steps(lay, _recipe_without_perplexity(out)) if s.spark]
    # The tokenizer comes from shared_inputs, not from this layout's own (absent) train-tokenizer output.
    fixed = []
    for s in steps:
        args = tuple(str(tokenizer) if a.endswith("tokenizer/tokenizer.json") else a for a in s.args)
        fixed.append(Step(s.name, s.module, args, s.spark, s.output, s.done_marker))
    return fixed


def test_cluster_matches_local(spark_cluster, shared_inputs, tmp_path, warc_dir, data_dir):
    model, tokenizer = shared_inputs
    local_out, cluster_out = tmp_path / "local", tmp_path / "cluster"
    local_steps = spark_steps(local_out, warc_dir, data_dir, model, tokenizer)
    cluster_steps = spark_steps(cluster_out, warc_dir, data_dir, model, tokenizer)
    assert [s.name for s in local_steps] == ["extract", "dedup", "score", *(
        f"tokenize:{n}" for n in ("web", "web_hq"))], "pipeline stages changed: update this test"  # fmt: skip

    env_local = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    times = {}
    for loc, clu in zip(local_steps, cluster_steps):
        t0 = time.perf_counter()
        _run(loc.local(sys.executable), env_local, tmp_path / "local.log")
        t1 = time.perf_counter()
        cmd = clu.submit(spark_cluster.master_url, spark_cluster.spark_submit, spark_cluster.submit_conf())
        _run(cmd, spark_cluster.env, tmp_path / "cluster.log")
        times[loc.name] = (round(t1 - t0, 1), round(time.perf_counter() - t1, 1))
    print("seconds per step (local, cluster):", json.dumps(times))

    # The jobs really ran on the cluster: the master lists the finished applications.
    import urllib.request

    with urllib.request.urlopen(f"{spark_cluster.ui_url}/json/", timeout=5) as r:
        state = json.load(r)
    assert len(state["completedapps"]) >= len(cluster_steps), state["completedapps"]

    for stage, cols in (("extract", ["id", "url", "text", "lang"]), ("dedup", ["id", "text", "dup_cluster_size"]),
                        ("scored", ["id", "text", "quality"])):  # fmt: skip
        a, b = _rows(local_out / stage / "docs", cols), _rows(cluster_out / stage / "docs", cols)
        assert len(a) > 10, f"{stage}: too few documents for a meaningful comparison ({len(a)})"
        assert a == b, f"{stage}: local[*] and cluster outputs differ"
    for stage in ("extract", "dedup", "scored"):
        sa = json.loads((local_out / stage / "stats.json").read_text())
        sb = json.loads((cluster_out / stage / "stats.json").read_text())
        assert [(s["stage"], s["docs_in"], s["docs_out"], s["drops"]) for s in sa["stages"]] == [
            (s["stage"], s["docs_in"], s["docs_out"], s["drops"]) for s in sb["stages"]
        ], f"{stage}: funnels differ"

    for src in ("web", "web_hq"):
        ma = json.loads((local_out / "tokens" / "shards" / src / "manifest.json").read_text())
        mb = json.loads((cluster_out / "tokens" / "shards" / src / "manifest.json").read_text())
        assert ma["documents"] > 0 and ma["tokens"] > 0
        assert (ma["documents"], ma["tokens"]) == (mb["documents"], mb["tokens"]), src
        ids_a = sorted(r["id"] for r in _rows(local_out / "tokens" / "shards" / src, ["id"]))
        ids_b = sorted(r["id"] for r in _rows(cluster_out / "tokens" / "shards" / src, ["id"]))
        assert ids_a == ids_b, f"{src}: different documents tokenized"
