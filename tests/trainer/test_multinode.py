"""Two nodes through DeepSpeed's own multi-node launcher (`--hostfile --no_ssh --node_rank`), each node
isolated, checkpoints on S3 with node-local staging; and the launch checks that run before any of it.

The two "nodes" are two launcher processes on this machine (trainer/launch.py's command, node ranks 0
and 1 of a two-host hostfile, one rank each), each in its own mount namespace with a private /tmp
(testkit/isolated.py's `private_tmp`; skipped with the reason where it is refused, failed under CI=true). The ranks meet over
127.0.0.1 (gloo on DeepSpeed's CPU accelerator). What they share: the recipe and config (under /var/tmp,
outside the private /tmp, as a per-node read-only copy would be on a cluster), the log folder (the test
reads metrics.jsonl there), and the moto S3 server, where the token shards are (each node caches them
in its own /tmp: tokens/shard_cache.py) and the only place checkpoints go. Each
node stages its checkpoint files in its own /tmp (the default staging folder), so rank 1's ZeRO shards
exist only in node 1's /tmp until it uploads them, and on resume node 1 must download the checkpoint
itself: rank 0's download is in node 0's /tmp.

- 2 nodes x 1 rank train 4 steps with L's losses and grad norms bit for bit, L being the same config on
  one node with 2 processes (same world size, same gloo allreduce between two ranks: the sums are the
  same, so no tolerance is needed and any would hide a wrong data split or a rank that trained alone);
  the step-2 and step-4 checkpoints on S3 are complete (COMPLETE.json lists both ranks' files, and every
  file verifies against it), and nothing was staged in the test's own (shared) /tmp;
- the step-4 checkpoint loses its marker (an upload cut short): the rerun on the two isolated nodes
  resumes from step 2 and trains steps 3-4 with L's losses, bit for bit;
- node 1's rank dies (SIGKILL) or hangs (SIGSTOP) after step 2: node 0 fails at once or after
  deepspeed.timeout_s, instead of waiting for it forever.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import tempfile
import time
from pathlib import Path

import pytest
import yaml

from core.errors import ConfigError
from core.storage import ObjectStore, join
from testkit.corpus import build_corpus
from testkit.isolated import require_private_tmp
from testkit.nodes import TIMEOUT, start_two_nodes, train_on_one_node, train_on_two_nodes
from testkit.nodes import hostfile as write_hostfile
from testkit.s3 import s3_env, upload_tree
from testkit.tiny_train import tiny_run
from tests.trainer.test_train_deepspeed import records, step_records
from trainer import checkpoint as ckpt
from trainer import checkpoint_remote as remote
from trainer.launch import LAUNCHER_MODULE, TRAIN_MODULE, launch_command

SEQ = 32
STEPS = 4


# ------------------------------------------------------------------ checks before anything starts


def test_multinode_command_is_deepspeeds_no_ssh_form(tmp_path):
    pytest.importorskip("deepspeed")
    from deepspeed.launcher.runner import parse_args

    hostfile = write_hostfile(tmp_path)
    cmd = launch_command("c.yaml", ["a=1"], processes=1, master_port=29611,
                         hostfile=hostfile, node_rank=1, master_addr="127.0.0.1")  # fmt: skip
    assert cmd[:3] == [launch_command("c.yaml")[0], "-m", LAUNCHER_MODULE]
    args = parse_args(cmd[3:])  # DeepSpeed's own parser reads what the docs tell a user to type
    assert (args.hostfile, args.no_ssh, args.node_rank, args.num_nodes) == (str(hostfile), True, 1, 2)
    assert (args.master_addr, args.master_port, args.num_gpus) == ("127.0.0.1", 29611, 1)
    assert (
        args.module
        and args.user_script == TRAIN_MODULE
        and args.user_args == ["--config", "c.yaml", "--set", "a=1"]
    )


@pytest.mark.parametrize(
    ("hostfile", "kwargs", "error"),
    [
        (None, {}, r"hostfile .*/missing: no such file"),
        (
            "node-0 slots=1\nnode-1 gpus=1\n",
            {},
            r"hostfile .*hostfile:2: 'node-1 gpus=1' is not `host slots=K`",
        ),
        ("node-0 slots=1\nnode-0 slots=1\n", {}, r"hostfile .*:2: host 'node-0' listed twice"),
        ("# nothing\n\n", {}, r"lists no host"),
        ("node-0 slots=1\nnode-1 slots=1\n", {"node_rank": 2}, r"node_rank=2: must be in \[0, 2\)"),
        (
            "node-0 slots=1\nnode-1 slots=1\n",
            {"node_rank": 1, "nodes": 1},
            r"node_rank=1: must be in \[0, 1\)",
        ),
        ("node-0 slots=1\nnode-1 slots=1\n", {"nodes": 3}, r"nodes=3: the hostfile .* lists 2 host"),
        (
            "node-0 slots=1\nnode-1 slots=1\n",
            {"master_port": True},
            r"master_port: several nodes need one port",
        ),
        (
            "node-0 slots=2\nnode-1 slots=1\n",
            {"processes": 2},
            r"processes=2: more than the hostfile's slots per node \(\[2, 1\]\)",
        ),
        (
            "node-0 slots=1\n",
            {"master_addr": "no-such-host.invalid"},
            r"master_addr='no-such-host.invalid' does not",
        ),
    ],
)
def test_bad_multinode_launch_is_a_config_error(tmp_path, hostfile, kwargs, error):
    path = write_hostfile(tmp_path, hostfile) if hostfile is not None else tmp_path / "missing"
    args = {"node_rank": 0, "master_addr": "127.0.0.1", "master_port": 29611, "hostfile": path, **kwargs}
    with pytest.raises(ConfigError, match=error):
        launch_command("c.yaml", **args)


def test_node_rank_without_hostfile_is_a_config_error():
    with pytest.raises(ConfigError, match="hostfile, node_rank and master_addr together"):
        launch_command("c.yaml", node_rank=0, master_addr="127.0.0.1", master_port=29611)


# ------------------------------------------------------------------ two isolated nodes


@pytest.fixture(scope="module")
def shared_run(tmp_path_factory):
    """Shards, recipe and a 4-step ZeRO-3 config under /var/tmp (both nodes read them; their /tmp is
    private), and run L: the same config on one node with 2 processes, checkpoints in a local folder."""
    require_private_tmp()  # skips, or under CI=true fails, where a private /tmp is refused
    root = Path(tempfile.mkdtemp(prefix="refinery-multinode-", dir="/var/tmp"))
    try:
        corpus = build_corpus(tmp_path_factory.mktemp("corpus"))
        tiny_run(
            root,
            corpus,
            steps=STEPS,
            seq_len=SEQ,
            warmup_steps=1,
            total_tokens=2_000,
            checkpoint_every=2,
            keep=3,
        )
        local = root / "local"
        train_on_one_node(root / "train.yaml", [f"checkpoint.dir={local / 'ckpt'}", f"logging.dir={local}"],
                          root, "local")  # fmt: skip
        yield root, step_records(local)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _shards_on_s3(root: Path, bucket: str) -> Path:
    """The run's shards uploaded to S3 and a config whose recipe reads them there: recipe-s3.yaml,
    train-s3.yaml. Each node then caches them in its own private /tmp (data.shard_cache_dir default)."""
    recipe = yaml.safe_load((root / "recipe.yaml").read_text())
    local = Path(recipe["sources"]["web"]["shards"])
    upload_tree(local, f"{bucket}/shards/web")
    recipe["sources"]["web"]["shards"] = f"{bucket}/shards/web"
    (root / "recipe-s3.yaml").write_text(yaml.safe_dump(recipe))
    cfg = yaml.safe_load((root / "train.yaml").read_text())
    cfg["data"]["recipe"] = str(root / "recipe-s3.yaml")
    (root / "train-s3.yaml").write_text(yaml.safe_dump(cfg))
    return root / "train-s3.yaml"


def _shared_staging(uri: str) -> Path:
    """Where the default staging folder of `uri` would be in the test's own /tmp (core.storage.staging_dir,
    computed, not called: calling it creates it)."""
    return Path(tempfile.gettempdir()) / "refinery-staging" / hashlib.sha1(uri.encode()).hexdigest()[:12]


@pytest.mark.isolated
@pytest.mark.slow
def test_two_isolated_nodes_train_and_resume_from_s3_as_one_node(shared_run, s3_server, s3_bucket):
    root, local = shared_run
    uri = join(s3_bucket, "ckpt/multinode")
    logs = root / "two-nodes"
    with s3_env(s3_server):
        _shards_on_s3(root, s3_bucket)

    train_on_two_nodes(
        root / "train-s3.yaml", [f"checkpoint.dir={uri}", f"logging.dir={logs}"], root, "first", s3_server.env
    )
    got = step_records(logs)
    assert sorted(got) == list(range(1, STEPS + 1))
    for s in got:
        assert (got[s]["loss"], got[s]["grad_norm"]) == (local[s]["loss"], local[s]["grad_norm"]), s
    store = ObjectStore(uri)
    check = root / "check"
    check.mkdir()
    for tag in (ckpt.tag_for(2), ckpt.tag_for(4)):
        marker = json.loads(store.read_bytes(join(uri, tag, ckpt.MARKER)))
        assert marker["world_size"] == 2
        # both ranks' ZeRO shards: rank 1's were only ever in node 1's private /tmp before their upload
        assert {remote.owner(name) for name in marker["files"]} == {0, 1}, sorted(marker["files"])
        assert remote.fetch(uri, tag, check) is None, tag  # every listed file there, at its sha256
    assert not _shared_staging(uri).exists()  # neither node staged in the test's /tmp

    # an upload cut short before step 4's marker: the two nodes resume from step 2, each from its own download
    store.delete(join(uri, ckpt.tag_for(4), ckpt.MARKER))
    train_on_two_nodes(
        root / "train-s3.yaml",
        [f"checkpoint.dir={uri}", f"logging.dir={logs}"],
        root,
        "resume",
        s3_server.env,
    )
    assert [r["from"] for r in records(logs) if r.get("event") == "resume"] == [ckpt.tag_for(2)]
    got = step_records(logs)
    for s in (3, 4):
        assert (got[s]["loss"], got[s]["grad_norm"]) == (local[s]["loss"], local[s]["grad_norm"]), s
    assert store.exists(join(uri, ckpt.tag_for(4), ckpt.MARKER))  # step 4 saved again, whole
    assert not _shared_staging(uri).exists()


def _step_logged(logs: Path, step: int) -> bool:
    metrics = logs / "metrics.jsonl"
    return metrics.exists() and any(r.get("step") == step and "event" not in r for r in records(logs))


@pytest.mark.isolated
@pytest.mark.slow
@pytest.mark.parametrize("fault", ["kill", "hang"])
def test_a_node_that_dies_or_hangs_fails_the_other_in_bounded_time(shared_run, fault):
    """Node 1's rank is SIGKILLed (a dead node) or SIGSTOPped (a hung one: alive, sockets open, silent)
    after step 2 (test faults, node 1's environment only). Node 0 must not wait for it forever: a dead
    peer fails its next collective at once (gloo sees the connection close), a hung one after
    deepspeed.timeout_s (10 s here; DeepSpeed's default is 600). Either way node 0's launcher exits
    non-zero and says why."""
    from trainer.faults import ENV_VAR

    root, _ = shared_run
    logs = root / f"fault-{fault}"
    faults = {f"{fault}_at_step": 2, "fault_rank": 1}
    timeout_s = 10
    overrides = [f"logging.dir={logs}", f"deepspeed.timeout_s={timeout_s}"]
    procs, _ = start_two_nodes(root / "train.yaml", overrides, root, f"fault-{fault}",
                               {ENV_VAR: json.dumps(faults)})  # fmt: skip
    (node0, log0), (node1, _) = procs
    try:
        deadline = time.monotonic() + TIMEOUT
        while not _step_logged(logs, 2) and node0.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _step_logged(logs, 2), log0.read_text(errors="replace")[-3000:]
        t_fault = time.monotonic()  # node 1 acts at the end of step 2; rank 0 logs step 2 as it ends
        # bound: a dead peer ~1 s measured; a hung one timeout_s; + 60 s for a loaded CI box
        node0.wait(timeout=timeout_s + 60)
        waited = time.monotonic() - t_fault
    finally:
        for proc, _ in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    text = log0.read_text(errors="replace")
    assert node0.returncode != 0, text[-3000:]
    assert not _step_logged(logs, 4)  # it stopped; it did not train on alone
    if fault == "kill":
        # gloo's words for a peer gone mid-read ("closed by peer") or mid-write ("reset by peer")
        assert re.search(r"Connection (closed|reset) by peer", text), text[-3000:]
        assert node1.returncode != 0
    else:
        assert waited >= timeout_s * 0.9, waited  # it did wait for the hung peer, as configured
        assert "imed out" in text or "imeout" in text, text[-3000:]
