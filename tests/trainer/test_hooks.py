"""trainer/hooks.py: hooks run in registration order (the end in reverse), a loss passes through each
on_loss in turn, and the test faults act through their hook (trainer/faults.py, FaultHook) at exactly
their rank and step, and nowhere else.

Each assertion compares with a value computed by hand, and the hooks' operations do not commute
(x·10 + k), so the order they ran in is visible in the result; the faults' kills and stops are recorded
instead of delivered, so a fault that does not fire is asserted, not merely survived.
"""

from __future__ import annotations

import signal
from types import SimpleNamespace

import pytest
import torch

from trainer import faults as faults_module
from trainer.faults import FaultHook, Faults
from trainer.hooks import Hook, Hooks, StepEnd


class _Recorder(Hook):
    def __init__(self, name: str, digit: int, calls: list[str]):
        self.name, self.digit, self.calls = name, digit, calls

    def on_step_end(self, t, step: StepEnd) -> None:
        self.calls.append(f"step:{self.name}")
        step.rec.setdefault("seen", []).append(self.name)

    def on_train_end(self, t) -> None:
        self.calls.append(f"end:{self.name}")

    def on_loss(self, t, loss, indices):
        self.calls.append(f"loss:{self.name}")
        return loss * 10 + self.digit  # appends a digit: the result spells the order the hooks ran in


def test_order_of_hooks_and_reverse_at_the_end():
    calls: list[str] = []
    hooks = Hooks([_Recorder("a", 1, calls), _Recorder("b", 2, calls), Hook()])
    step = StepEnd({"step": 1}, "accept")
    hooks.on_step_end(None, step)
    hooks.on_train_end(None)
    assert calls == ["step:a", "step:b", "end:b", "end:a"]
    assert step.rec["seen"] == ["a", "b"]  # a later hook sees what an earlier one added
    calls.clear()
    # 3 -> a: 31 -> b: 312 -> Hook(): unchanged; the reverse order would give 321
    assert float(hooks.on_loss(None, torch.tensor(3.0, dtype=torch.float64), [0])) == 312.0
    assert calls == ["loss:a", "loss:b"]


def test_the_base_hook_passes_the_loss_through_unchanged():
    loss = torch.tensor(0.25)
    assert Hook().on_loss(None, loss, [1, 2]) is loss  # the very tensor: no copy, no graph node
    assert Hooks([]).on_loss(None, loss, [1, 2]) is loss


def test_fault_hook_poisons_only_the_listed_rows():
    t = SimpleNamespace(rank=1, step=0)
    loss = torch.tensor(0.5)
    hook = FaultHook(Faults(poison_indices=(52, 120), poison_factor=1000.0))
    assert float(hook.on_loss(t, loss, [50, 52])) == 500.0  # a micro-batch holding row 52
    assert float(hook.on_loss(t, loss, [120])) == 500.0
    assert hook.on_loss(t, loss, [51, 53]) is loss  # no listed row: the loss untouched
    assert FaultHook(Faults()).on_loss(t, loss, [52]) is loss  # nothing listed


@pytest.fixture
def signals(monkeypatch):
    """The faults' SIGKILL and SIGSTOP, recorded by name instead of delivered."""
    sent: list[str] = []
    monkeypatch.setattr(faults_module, "_kill_self", lambda: sent.append("kill"))
    monkeypatch.setattr(faults_module.os, "kill", lambda pid, sig: sent.append(signal.Signals(sig).name))
    return sent


def test_an_inactive_fault_hook_acts_nowhere(signals):
    hook = FaultHook(Faults())
    assert not Faults().active
    for rank in (0, 1):
        for step in (0, 1, 2):  # step 0 too: 0 means "off" in every setting, not "at step 0"
            t = SimpleNamespace(rank=rank, step=step)
            hook.on_step_end(t, StepEnd({}, "accept"))
            for n in (0, 1, 2):
                hook.on_upload(t, n)
    assert signals == []


def test_kill_and_hang_act_on_their_rank_and_step_only(signals):
    hook = FaultHook(Faults(kill_at_step=3, hang_at_step=5, fault_rank=1))
    fired = []
    for rank in (0, 1, 2):
        for step in range(7):
            before = len(signals)
            hook.on_step_end(SimpleNamespace(rank=rank, step=step), StepEnd({}, "accept"))
            fired += [(rank, step, what) for what in signals[before:]]
    assert fired == [(1, 3, "kill"), (1, 5, "SIGSTOP")]


def test_kill_in_upload_acts_on_rank_0s_first_file_of_its_step_only(signals):
    hook = FaultHook(Faults(kill_in_upload_step=8))
    fired = []
    for rank in (0, 1):
        for step in (0, 4, 8, 12):
            for n in (0, 1, 2, 3):
                before = len(signals)
                hook.on_upload(SimpleNamespace(rank=rank, step=step), n)
                fired += [(rank, step, n, what) for what in signals[before:]]
    assert fired == [(0, 8, 1, "kill")]
