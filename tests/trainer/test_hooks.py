"""trainer/hooks.py: hooks run in registration order (the end in reverse), a loss passes through each
on_loss in turn, and the test faults act through their hook (trainer/faults.py, FaultHook)."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from trainer.faults import FaultHook, Faults
from trainer.hooks import Hook, Hooks, StepEnd


class _Recorder(Hook):
    def __init__(self, name: str, calls: list[str]):
        self.name, self.calls = name, calls

    def on_step_end(self, t, step: StepEnd) -> None:
        self.calls.append(f"step:{self.name}")
        step.rec.setdefault("seen", []).append(self.name)

    def on_train_end(self, t) -> None:
        self.calls.append(f"end:{self.name}")

    def on_loss(self, t, loss, indices):
        return loss * 2


def test_order_of_hooks_and_reverse_at_the_end():
    calls: list[str] = []
    hooks = Hooks([_Recorder("a", calls), _Recorder("b", calls), Hook()])
    step = StepEnd({"step": 1}, "accept")
    hooks.on_step_end(None, step)
    hooks.on_train_end(None)
    assert calls == ["step:a", "step:b", "end:b", "end:a"]
    assert step.rec["seen"] == ["a", "b"]  # a later hook sees what an earlier one added
    assert float(hooks.on_loss(None, torch.tensor(3.0), [0])) == 12.0


def test_fault_hook_poisons_only_the_listed_rows_and_inactive_changes_nothing():
    t = SimpleNamespace(rank=1, step=0)
    loss = torch.tensor(0.5)
    hook = FaultHook(Faults(poison_indices=(52, 120), poison_factor=1000.0))
    assert float(hook.on_loss(t, loss, [50, 52])) == 500.0
    assert hook.on_loss(t, loss, [51, 53]) is loss
    inert = FaultHook(Faults())
    assert inert.on_loss(t, loss, [52]) is loss
    inert.on_step_end(t, StepEnd({}, "accept"))  # no kill, no dump: nothing configured
    inert.on_upload(t, 1)
