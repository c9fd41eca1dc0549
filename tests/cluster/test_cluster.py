"""The curation jobs on a real Spark standalone cluster give exactly what the embedded `local[*]` run gives.

The local[*] run is the suite's reduced demo (tests/support/demo.py, the `demo_run` fixture): it runs every
step of workflows/pipeline.py (`python -m workflows demo`) over three real WARCs. Here the Spark steps of
the same pipeline that the isolated tier does not run on a cluster (score with the demo's quality model
and reference LM, tokenize of the recipe's selected source) run again as `spark-submit --master
spark://127.0.0.1:PORT <pkg>/__main__.py ...` on the two-worker cluster of conftest.py, from the demo's
own dedup output and with its tokenizer, so a difference can only come from the engine. The two runs
must hold the same scores, funnels, and documents and tokens. Reusing the demo's outputs instead of a
second local run saves the `python -m` jobs (JVM starts) and the single-process steps.

Not run here again: extract and dedup on a cluster are tests/test_object_storage.py's and
tests/isolated/'s subject (workers that share not even /tmp with the driver, every output equal to the
local run's; ~60 s of a CI run here), and so is tokenize without a selector (the S3 chain's shards are
byte-identical to the local chain's). Of the recipe's two sources only `web_hq` runs here, whose
`select` (language, toxicity and a perplexity percentile resolved over the scored pages) runs on the
cluster; `web`, the whole scored folder, was a third spark-submit (~25 s of a loaded run).
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.support.demo import WARCS
from workflows.pipeline import Layout, Step, curation_steps, tokenize_steps

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


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


def spark_steps(out: Path, demo: Path, warc_dir: Path, data_dir: Path) -> list[Step]:
    """The Spark steps of the demo's pipeline writing under `out`, with the demo's models and recipe."""
    lay = Layout(
        warcs=tuple(str(warc_dir / w) for w in WARCS),
        out=str(out),
        shared_data=str(data_dir),
        quality_model=str(demo / "quality-model"),
        lm_model=str(demo / "lm" / "model"),
    )
    steps = [s for s in curation_steps(lay) + tokenize_steps(lay, demo / "recipe.yaml") if s.spark]
    # The tokenizer is the demo's, not this layout's own (absent) train-tokenizer output.
    tokenizer = str(demo / "tokenizer" / "tokenizer.json")
    fixed = []
    for s in steps:
        args = tuple(tokenizer if a.endswith("tokenizer/tokenizer.json") else a for a in s.args)
        fixed.append(Step(s.name, s.module, args, s.spark, s.output, s.done_marker))
    return fixed


def test_cluster_matches_local(spark_cluster, demo_run, tmp_path, warc_dir, data_dir):
    local_out, cluster_out = demo_run, tmp_path / "cluster"
    cluster_steps = spark_steps(cluster_out, demo_run, warc_dir, data_dir)
    assert [s.name for s in cluster_steps] == ["extract", "dedup", "score", *(
        f"tokenize:{n}" for n in ("web", "web_hq"))], "pipeline stages changed: update this test"  # fmt: skip
    # extract and dedup: the demo's own outputs (the isolated tier runs those two on a cluster)
    cluster_out.mkdir()
    for stage in ("extract", "dedup"):
        (cluster_out / stage).symlink_to(local_out / stage, target_is_directory=True)
    cluster_steps = [s for s in cluster_steps if s.name not in ("extract", "dedup", "tokenize:web")]

    times = {}
    for clu in cluster_steps:
        t0 = time.perf_counter()
        cmd = clu.submit(spark_cluster.master_url, spark_cluster.spark_submit, spark_cluster.submit_conf())
        _run(cmd, spark_cluster.env, tmp_path / "cluster.log")
        times[clu.name] = round(time.perf_counter() - t0, 1)
    print("seconds per step on the cluster:", json.dumps(times))

    # The jobs really ran on the cluster: the master lists the finished applications.
    import urllib.request

    with urllib.request.urlopen(f"{spark_cluster.ui_url}/json/", timeout=5) as r:
        state = json.load(r)
    assert len(state["completedapps"]) >= len(cluster_steps), state["completedapps"]

    for stage, cols in (("scored", ["id", "text", "quality", "toxicity"]),):
        a, b = _rows(local_out / stage / "docs", cols), _rows(cluster_out / stage / "docs", cols)
        assert len(a) > 10, f"{stage}: too few documents for a meaningful comparison ({len(a)})"
        assert a == b, f"{stage}: local[*] and cluster outputs differ"
    # Perplexity: each run batches its task's rows by length; another batch shape can change the float
    # GEMM's blocking and so the last bits, and the bf16 head's normaliser amplifies that to ~1e-4
    # relative at most (bench/classifiers/perplexity_precision.py: 6.3e-4 between bf16 and fp32 heads); 1e-3 bounds it.
    pa, pb = (_rows(o / "scored" / "docs", ["id", "perplexity"]) for o in (local_out, cluster_out))
    assert [r["id"] for r in pa] == [r["id"] for r in pb]
    assert sum(r["perplexity"] is not None for r in pa) > 10
    for ra, rb in zip(pa, pb):
        assert (ra["perplexity"] is None) == (rb["perplexity"] is None), ra["id"]
        if ra["perplexity"] is not None:
            assert rb["perplexity"] == pytest.approx(ra["perplexity"], rel=1e-3), ra["id"]
    for stage in ("scored",):
        sa = json.loads((local_out / stage / "stats.json").read_text())
        sb = json.loads((cluster_out / stage / "stats.json").read_text())
        assert [(s["stage"], s["docs_in"], s["docs_out"], s["drops"]) for s in sa["stages"]] == [
            (s["stage"], s["docs_in"], s["docs_out"], s["drops"]) for s in sb["stages"]
        ], f"{stage}: funnels differ"

    for src in ("web_hq",):
        ma = json.loads((local_out / "tokens" / "shards" / src / "manifest.json").read_text())
        mb = json.loads((cluster_out / "tokens" / "shards" / src / "manifest.json").read_text())
        assert ma["documents"] > 0 and ma["tokens"] > 0
        assert (ma["documents"], ma["tokens"]) == (mb["documents"], mb["tokens"]), src
        ids_a = sorted(r["id"] for r in _rows(local_out / "tokens" / "shards" / src, ["id"]))
        ids_b = sorted(r["id"] for r in _rows(cluster_out / "tokens" / "shards" / src, ["id"]))
        assert ids_a == ids_b, f"{src}: different documents tokenized"
