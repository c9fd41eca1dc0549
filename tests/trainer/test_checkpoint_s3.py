"""Trainer checkpoints on object storage (`checkpoint.dir=s3://...`), against a real S3 server (moto on
127.0.0.1, testkit/s3.py) and the real `deepspeed` launcher on CPU, 1 rank, the debug model.

- checkpoint_remote on the server's real keys, no trainer: the marker is read first (a tag without one
  is skipped whatever keys it has), a corrupt download falls back, only the files the marker lists are
  fetched, and a bucket that is missing or an endpoint that is down is an exit 2 before the process group;
- end to end: run L trains 12 steps with checkpoints every 4 in a local folder. Run S does the same on S3
  and is SIGKILLed after uploading the first file of its step-8 checkpoint (test fault
  kill_in_upload_step): S3 holds step 4 complete and step 8's keys without a marker. The rerun skips
  step 8 as incomplete, resumes from step 4 downloaded from S3, and trains steps 5-12 with L's losses bit
  for bit (the same bytes load through the same safe-load path: no tolerance is needed, and any would hide
  a wrong restore), re-saves step 8 whole, and prunes to the last 2 (keep=2). Then the marker of step 12 is
  deleted (an upload interrupted before its marker): the next rerun resumes from step 8, again with L's
  losses.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from core.errors import ConfigError
from core.files import sha256_file
from core.storage import ObjectStore, join
from testkit.corpus import build_corpus
from testkit.tiny_train import tiny_run
from tests.trainer.test_train_deepspeed import launch, records, step_records
from trainer import checkpoint as ckpt
from trainer import checkpoint_remote as remote

SEQ = 64
STEPS = 12


def _keys(uri: str) -> list[str]:
    store = ObjectStore(uri)
    return sorted(k[len(uri) + 1 :] for k in store.list(uri, recursive=True))


def _plant(uri: str, tag: str, files: dict[str, bytes], marker: bool = True, tmp: Path | None = None) -> None:
    """A checkpoint's keys as save() leaves them: the files, then (if `marker`) COMPLETE.json listing them."""
    store = ObjectStore(uri)
    for name, data in files.items():
        store.write_bytes(join(uri, tag, name), data)
    if marker:
        import hashlib

        listed = {n: [len(d), hashlib.sha256(d).hexdigest()] for n, d in files.items()}
        body = {"step": int(tag.split("_")[1]), "world_size": 1, "files": listed}
        store.write_bytes(join(uri, tag, ckpt.MARKER), json.dumps(body).encode())


def test_reader_takes_the_newest_checkpoint_with_a_marker_that_verifies(s3_bucket, tmp_path):
    uri = join(s3_bucket, "run")
    _plant(uri, ckpt.tag_for(4), {"trainer_rank0.json": b'{"step": 4}', "a.pt": b"A" * 100})
    _plant(uri, ckpt.tag_for(8), {"trainer_rank0.json": b'{"step": 8}', "a.pt": b"B" * 100})
    # step 8's a.pt overwritten after its marker: same size, other bytes (corruption in the store)
    ObjectStore(uri).write_bytes(join(uri, ckpt.tag_for(8), "a.pt"), b"C" * 100)
    # step 12: every file uploaded, the marker never written (the run died just before it)
    _plant(uri, ckpt.tag_for(12), {"trainer_rank0.json": b'{"step": 12}'}, marker=False)
    # a stray key beside step 4's listed files: never downloaded
    ObjectStore(uri).write_bytes(join(uri, ckpt.tag_for(4), "stray.pt"), b"not listed")
    logs: list[str] = []
    staging = tmp_path / "staging"
    staging.mkdir()
    assert remote.newest_good(uri, staging, "sha256", log=logs.append) == ckpt.tag_for(4)
    assert logs[0].startswith(f"[checkpoint] skipping {uri}/step_00000012: incomplete (no COMPLETE.json")
    assert logs[1].startswith(f"[checkpoint] skipping {uri}/step_00000008: a.pt: sha256 mismatch")
    got = staging / ckpt.tag_for(4)
    assert sorted(p.name for p in got.iterdir()) == [ckpt.MARKER, "a.pt", "trainer_rank0.json"]
    assert ckpt.verify(got) is None and (got / "a.pt").read_bytes() == b"A" * 100
    assert not (staging / ckpt.tag_for(8)).exists()  # a copy that failed is not left to be mistaken
    # sizes only (checkpoint.verify=size): the same-size corruption is not seen, as for a local folder
    assert remote.newest_good(uri, staging, "size", log=logs.append) == ckpt.tag_for(8)


def test_unreachable_or_missing_bucket_is_a_config_error(s3_server, s3_bucket):
    with pytest.raises(ConfigError, match=r"checkpoint\.dir s3://no-such-bucket-x/run: bucket 'no-such"):
        remote.check_writable("s3://no-such-bucket-x/run")
    remote.check_writable(join(s3_bucket, "run"))
    assert _keys(s3_bucket) == []  # the write probe is gone
    s3_server.stop()
    try:
        with pytest.raises(ConfigError, match=r"checkpoint\.dir .*cannot be reached"):
            remote.check_writable(join(s3_bucket, "run"))
    finally:
        s3_server.start()


def test_trainer_refuses_a_missing_bucket_before_the_process_group(tmp_path, capsys, s3_bucket, monkeypatch):
    """Exit 2 naming checkpoint.dir; the process group (deepspeed.init_distributed) is never started."""
    import deepspeed

    from trainer import train

    def refuse(*a, **k):
        raise AssertionError("deepspeed.init_distributed() was called: the check came too late")

    monkeypatch.setattr(deepspeed, "init_distributed", refuse)
    for k in ("RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"):
        monkeypatch.delenv(k, raising=False)
    cfg = ["--config", "configs/train-debug.yaml", "checkpoint.dir=s3://no-such-bucket-y/ckpt"]
    cfg += [f"logging.dir={tmp_path / 'log'}", "logging.tensorboard=false"]
    assert train.main(cfg) == 2
    err = capsys.readouterr().err
    assert "config error: checkpoint.dir s3://no-such-bucket-y/ckpt: bucket 'no-such-bucket-y'" in err
    assert "Traceback" not in err


def test_owner_of_each_checkpoint_file():
    """Which rank uploads a file: by name, as DeepSpeed and the trainer name them."""
    assert remote.owner("zero_pp_rank_3_mp_rank_00_optim_states.pt") == 3
    assert remote.owner("zero_pp_rank_12_mp_rank_00_model_states.pt") == 12
    assert remote.owner("trainer_rank5.json") == 5
    assert remote.owner("mp_rank_00_model_states.pt") == 0


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    """Shards of the real corpus, a 1-rank config of 12 steps with checkpoints every 4, and run L (local)."""
    root = tmp_path_factory.mktemp("s3ckpt")
    corpus = build_corpus(tmp_path_factory.mktemp("corpus"))
    cfg_path = tiny_run(root, corpus, steps=STEPS, seq_len=SEQ, warmup_steps=2, total_tokens=4_000,
                        checkpoint_every=4, keep=2)  # fmt: skip
    run_l = root / "local"
    launch(cfg_path, f"checkpoint.dir={run_l / 'ckpt'}", f"logging.dir={run_l}", procs=1)
    return root, cfg_path, run_l


@pytest.mark.slow
def test_s3_checkpoints_killed_mid_upload_resume_exactly(small_run, s3_server, s3_bucket):
    root, cfg_path, run_l = small_run
    uri = join(s3_bucket, "ckpt/run")
    run_s = root / "s3"
    staging = root / "staging"
    args = (f"checkpoint.dir={uri}", f"checkpoint.staging={staging}", f"logging.dir={run_s}")
    # the launcher's ranks find the server through the AWS environment only (s3_bucket sets it here)
    assert os.environ["AWS_ENDPOINT_URL"] == s3_server.endpoint

    # killed after uploading the first file of step 8's checkpoint: its marker never goes up
    res = launch(cfg_path, *args, procs=1, check=False, faults={"kill_in_upload_step": 8})
    assert res.returncode != 0 and "TEST FAULTS ACTIVE" in res.stdout
    keys = _keys(uri)
    step4 = [k for k in keys if k.startswith("step_00000004/")]
    step8 = [k for k in keys if k.startswith("step_00000008/")]
    assert "step_00000004/COMPLETE.json" in step4 and len(step4) >= 3
    assert step8 and "step_00000008/COMPLETE.json" not in step8  # keys without their marker

    res = launch(cfg_path, *args, procs=1)
    out = res.stdout + res.stderr
    assert f"skipping {uri}/step_00000008: incomplete (no COMPLETE.json" in out
    resumed = [r for r in records(run_s) if r.get("event") == "resume"]
    assert [r["from"] for r in resumed] == ["step_00000004"]
    local, s3 = step_records(run_l), step_records(run_s)
    for s in range(5, STEPS + 1):
        assert s3[s]["loss"] == local[s]["loss"], s  # bit-identical to the uninterrupted local run
        assert s3[s]["grad_norm"] == local[s]["grad_norm"], s
    # nothing but scratch is left in the staging folder: each step's copy is dropped once uploaded, the
    # downloaded step 4 once loaded, so no step folder is there for anything to mistake
    assert not [p for p in staging.rglob("step_*") if p.is_dir()]
    # keep=2: steps 8 and 12, each whole (every listed file at its size and sha256), step 4 pruned
    assert sorted({k.split("/")[0] for k in _keys(uri)}) == ["step_00000008", "step_00000012"]
    check = root / "check"
    check.mkdir()
    for tag in ("step_00000008", "step_00000012"):
        assert remote.fetch(uri, tag, check) is None, tag
    # the checkpoint files are the local run's, byte for byte (same state, same DeepSpeed writer)
    ref = run_l / "ckpt" / "step_00000012"
    for f in ref.glob("*.pt"):
        assert sha256_file(check / "step_00000012" / f.name) == sha256_file(f), f.name

    # an upload interrupted before its marker: step 12 loses its marker; the rerun resumes from 8
    ObjectStore(uri).delete(join(uri, "step_00000012", ckpt.MARKER))
    res = launch(cfg_path, *args, procs=1)
    assert f"skipping {uri}/step_00000012: incomplete" in res.stdout + res.stderr
    resumed = [r for r in records(run_s) if r.get("event") == "resume"]
    assert [r["from"] for r in resumed] == ["step_00000004", "step_00000008"]
    s3 = step_records(run_s)
    for s in range(9, STEPS + 1):
        assert s3[s]["loss"] == local[s]["loss"], s
    assert ObjectStore(uri).exists(join(uri, "step_00000012", ckpt.MARKER))  # saved again, whole
    times = {
        "local save": [local[s]["time"]["checkpoint"] for s in (4, 8, 12)],
        "s3 save": [s3[s]["time"]["checkpoint"] for s in (12,)],
        "s3 resume": [r["seconds"] for r in resumed],
    }
    print(f"checkpoint seconds (debug model, 1 rank, load {os.getloadavg()[0]:.2f}): {times}")
