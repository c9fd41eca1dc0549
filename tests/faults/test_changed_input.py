"""Fault: an input rewritten under the same name between a killed run and its rerun (issue 31, item 5).

A resumed job must not mix outputs made from the old bytes with the new ones: the rerun is refused
naming the file (exit 2), or, with the `restart` policy, what was made from that input is redone
and the result equals a clean run on the new inputs. Dedup is killed after its `exact` stage (a
stage that raises, so the markers up to `exact` are the ones a real kill leaves); extract's units
are committed without Spark, then one WARC is replaced by another under the same name.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from core.errors import OutputConflict
from core.output import OutputDir, unit_name
from core.spark import SparkOptions
from curation.config import ExtractJobConfig
from curation.pipeline import process_file
from dedup import job
from dedup.config import DedupJobConfig
from dedup.stages import Stage, StageContext
from testkit.neardup import real_documents
from testkit.shared_data import REPO_ROOT

pytestmark = pytest.mark.faults

CFG = {"output": {"partitions": 2}}


class _Killed(Exception):
    pass


class _KillAfterExact(Stage):
    """Stands for the driver being killed once `exact` has written its marker."""

    name = "killed"

    def run(self, ctx: StageContext) -> dict:
        raise _Killed


def _write(path: Path, ids: list[str], texts: list[str]) -> None:
    pq.write_table(pa.table({"id": ids, "text": texts}), path)


def _docs(out: Path) -> list[tuple[str, str]]:
    return sorted((r["id"], r["text"]) for r in pq.read_table(out / "docs").to_pylist())


@pytest.mark.spark
def test_dedup_killed_after_exact_then_input_rewritten(spark, data_dir, tmp_path, monkeypatch):
    docs = [d for d in real_documents(data_dir) if 200 <= len(d.split()) <= 600][:90]
    a, b, new_b = docs[:30], docs[30:60], docs[60:90]
    inp, out = tmp_path / "in", tmp_path / "out"
    inp.mkdir()
    a_ids, b_ids = [f"a{i}" for i in range(30)], [f"b{i}" for i in range(30)]
    _write(inp / "a.parquet", a_ids, a)
    _write(inp / "b.parquet", b_ids, b)
    stages = list(job.STAGES)
    stages.insert([s.name for s in stages].index("exact") + 1, _KillAfterExact())
    with monkeypatch.context() as m:
        m.setattr(job, "STAGES", tuple(stages))
        with pytest.raises(_Killed):
            job.run_dedup(
                str(inp), str(out), DedupJobConfig.from_dict(CFG), spark=SparkOptions(progress=False)
            )
    assert sorted(p.stem for p in (out / "stages").glob("*.json")) == ["exact", "ids", "prepare"]

    _write(inp / "b.parquet", b_ids, new_b)  # same name, other texts
    cmd = [sys.executable, "-m", "dedup", "run", "--input", str(inp), "--output", str(out)]
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    run = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=300)
    assert run.returncode == 2, run.stderr[-2000:]
    err = run.stderr.strip().splitlines()[-1]
    assert err.startswith("error: input changed since") and str(inp / "b.parquet") in err, err
    assert "a.parquet" not in err
    assert not (out / "_SUCCESS").exists() and not (out / "docs").exists()

    # Variant: the same size and mtime with other bytes (`touch -r` after an in-place edit).
    st = (inp / "b.parquet").stat()
    data = bytearray((inp / "b.parquet").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (inp / "b.parquet").write_bytes(bytes(data))
    os.utime(inp / "b.parquet", ns=(st.st_atime_ns, st.st_mtime_ns))
    with pytest.raises(OutputConflict, match=r"b\.parquet \(.*content differs"):
        job.run_dedup(str(inp), str(out), DedupJobConfig.from_dict(CFG), spark=SparkOptions(progress=False))
    _write(inp / "b.parquet", b_ids, new_b)

    again = job.run_dedup(
        str(inp),
        str(out),
        DedupJobConfig.from_dict(CFG),
        spark=SparkOptions(progress=False),
        on_changed_input="restart",
    )
    assert again.resumed == []  # every stage redone: prepare read the old b.parquet
    # What a clean run on the new inputs gives: these 60 distinct real documents, every one kept (a
    # separate clean run compared here before cost one more dedup run); nothing of the old b.parquet.
    expected = sorted([*zip(a_ids, a), *zip(b_ids, new_b)])
    assert _docs(out) == expected
    stats = json.loads((out / "stats.json").read_text())
    assert all(not s["drops"] for s in stats["stages"]), stats["stages"]
    assert again.docs_in == again.docs_out == 60 and (out / "_SUCCESS").exists()
    # the restarted folder now resumes as any other
    assert job.run_dedup(
        str(inp), str(out), DedupJobConfig.from_dict(CFG), spark=SparkOptions(progress=False)
    ).resumed


@pytest.mark.spark
def test_extract_warc_replaced_under_the_same_name(spark, warc_dir, tmp_path, monkeypatch):
    """Two WARCs, both done; one is replaced by another WARC under its name. The rerun is refused
    naming it; with REFINERY_ON_CHANGED_INPUT=restart only that WARC's unit is redone, and it holds
    what a clean run of the new WARC gives."""
    from curation.job import run_extract

    cfg = ExtractJobConfig()
    inp = tmp_path / "warcs"
    inp.mkdir()
    for name in ("crawl-2024-sample-0000.warc.gz", "cc-main-2024-22-whirlwind.warc.gz"):
        shutil.copy(warc_dir / name, inp / name)
    uris = sorted(str(p) for p in inp.iterdir())
    out = tmp_path / "out"
    first = run_extract([str(inp)], str(out), cfg, spark=SparkOptions(progress=False))
    assert first.ok and first.processed == 2

    replaced = str(inp / "cc-main-2024-22-whirlwind.warc.gz")
    shutil.copy(warc_dir / "crawl-2024-sample-0001.warc.gz", replaced)
    with pytest.raises(OutputConflict, match=r"cc-main-2024-22-whirlwind\.warc\.gz \(size"):
        run_extract([str(inp)], str(out), cfg, spark=SparkOptions(progress=False))

    monkeypatch.setenv("REFINERY_ON_CHANGED_INPUT", "restart")
    again = run_extract([str(inp)], str(out), cfg, spark=SparkOptions(progress=False))
    assert again.ok and (again.skipped, again.processed) == (1, 1)
    clean = tmp_path / "clean"
    OutputDir(clean).prepare("extract", cfg.to_dict(), cfg.fingerprint())
    assert process_file(replaced, cfg, str(clean))["status"] == "done"
    unit = unit_name(replaced)
    got = pq.read_table(out / "docs" / f"{unit}.parquet").column("text").to_pylist()
    want = pq.read_table(clean / "docs" / f"{unit}.parquet").column("text").to_pylist()
    assert got == want and got
    assert len(uris) == 2 and (out / "_SUCCESS").exists()
