"""trainer/checkpointing.py and the rules below it (trainer/checkpoint.py): which checkpoint a resume picks,
what pruning keeps, and the repair of DeepSpeed's universal load. The end-to-end resume, fallback and
elastic tests through the launcher are tests/trainer/test_train_deepspeed.py and test_checkpoint_s3.py."""

from __future__ import annotations

import json

from core.files import sha256_file
from trainer import checkpoint as ckpt


def _fake_ckpt(root, step, complete=True):
    d = root / ckpt.tag_for(step)
    d.mkdir(parents=True)
    (d / "a.pt").write_bytes(bytes(range(200)))
    if complete:
        files = {"a.pt": [200, sha256_file(d / "a.pt")]}
        (d / ckpt.MARKER).write_text(json.dumps({"step": step, "files": files}))
    return d


def test_newest_good_falls_back_past_incomplete_and_corrupt(tmp_path):
    _fake_ckpt(tmp_path, 10)
    bad = _fake_ckpt(tmp_path, 20)
    _fake_ckpt(tmp_path, 30, complete=False)
    raw = bytearray((bad / "a.pt").read_bytes())
    raw[5] ^= 0xFF  # same size, different content
    (bad / "a.pt").write_bytes(bytes(raw))
    lines = []
    assert ckpt.newest_good(tmp_path, "sha256", log=lines.append) == ckpt.tag_for(10)
    assert "incomplete" in lines[0] and "step_00000030" in lines[0]
    assert "sha256 mismatch" in lines[1] and "step_00000020" in lines[1]
    # with size-only verification the flipped byte goes unnoticed: that is why sha256 is the default
    assert ckpt.newest_good(tmp_path, "size", log=lines.append) == ckpt.tag_for(20)
    (bad / "a.pt").write_bytes(b"short")
    assert "size" in ckpt.verify(bad, "size")


def test_repair_universal_load_restores_group_settings_and_one_step_count_per_group():
    """What DeepSpeed 0.19.8's ZeRO-3 universal load leaves (every group with group 0's settings, one `step`
    tensor shared by every state) trains differently; after repair_universal_load it trains exactly like the
    optimizer that was saved. Two groups as the trainer's: decay (matrices) and no decay (vectors)."""
    import copy
    from types import SimpleNamespace

    import torch

    def adamw(params):
        groups = [{"params": [params[0]], "weight_decay": 0.1}, {"params": [params[1]], "weight_decay": 0.0}]
        return torch.optim.AdamW(groups, lr=1e-2, betas=(0.9, 0.95), foreach=False)

    def steps(params, opt, n, seed):
        gen = torch.Generator().manual_seed(seed)
        for _ in range(n):
            for p in params:
                p.grad = torch.randn(p.shape, generator=gen)
            opt.step()

    torch.manual_seed(0)
    saved = [torch.nn.Parameter(torch.randn(4, 3)), torch.nn.Parameter(torch.randn(3))]
    opt = adamw(saved)
    steps(saved, opt, 3, seed=1)
    settings = [{k: v for k, v in g.items() if k != "params"} for g in opt.param_groups]

    def as_loaded(repair: bool):
        params = [torch.nn.Parameter(p.detach().clone()) for p in saved]
        o = adamw(params)
        o.load_state_dict(copy.deepcopy(opt.state_dict()))
        shared = o.state[params[0]]["step"]
        for p in params:  # the universal load's state: one step tensor object for every sub-group
            o.state[p]["step"] = shared
        for g in o.param_groups:  # and group 0's hyperparameters on every group
            g.update(settings[0])
        if repair:
            ckpt.repair_universal_load(SimpleNamespace(param_groups=o.param_groups, optimizer=o), settings)
        return params, o

    fixed, broken = as_loaded(repair=True), as_loaded(repair=False)
    steps(saved, opt, 3, seed=2)
    for params, o in (fixed, broken):
        steps(params, o, 3, seed=2)
    assert all(torch.equal(a, b) for a, b in zip(fixed[0], saved, strict=True))
    assert [float(fixed[1].state[p]["step"]) for p in fixed[0]] == [6.0, 6.0]
    assert not torch.equal(broken[0][1], saved[1])  # the test can fail: unrepaired, it drifts
    assert [float(broken[1].state[p]["step"]) for p in broken[0]] == [9.0, 9.0]  # 3 + 2 per step


def test_prune_keeps_the_newest_complete_and_drops_older_incomplete(tmp_path):
    """keep=2 of complete 10, 20, 40 and incomplete 15, 30, 50: 20 and 40 stay, and the incomplete ones
    newer than the oldest kept (30: possibly a save in progress, 50) are left alone."""
    for step in (10, 20, 40):
        _fake_ckpt(tmp_path, step)
    for step in (15, 30, 50):
        _fake_ckpt(tmp_path, step, complete=False)
    lines: list[str] = []
    ckpt._prune(tmp_path, 2, lines.append)
    assert ckpt.list_tags(tmp_path) == [ckpt.tag_for(s) for s in (50, 40, 30, 20)]
    assert len(lines) == 2 and all("(keep last 2)" in ln for ln in lines)
