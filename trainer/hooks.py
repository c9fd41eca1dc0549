"""Step hooks: the trainer's extension point. A feature that acts around an optimizer step is one `Hook`
subclass in its own file and one line in `train.default_hooks`.

The loop (trainer/train.py, Trainer.run) calls, on every rank and in registration order:

    on_start(t)                   once, when the trainer is built (before any resume)
    on_loss(t, loss, indices)     each micro-batch's loss before its backward; returns the loss to use
    on_step_end(t, step)          after each optimizer step; `step.rec` is the step's metrics record
    on_checkpoint(t, event)       after a checkpoint is saved ("save") or loaded to resume ("resume")
    on_upload(t, n)               object-store checkpoints: after this rank's n-th uploaded file
    on_train_end(t)               once, after the last step: in REVERSE order, as nested set-ups unwind

`t` is the Trainer: a hook reads and updates the run's state there (step, metrics, checkpointer), so the
state a checkpoint saves stays in one place. Order matters and is the registration order: the spike
guard's rollback comes first (the others look for `rollback` in the record), the checkpoint before the
metrics line (which reports its seconds), the held-out eval after it; at the end the final eval runs
before the final save. Hooks that run a collective (save, eval) must decide alike on every rank, from
all-reduced values only. The built-ins: trainer/spike.py (SpikeRollback), trainer/checkpointing.py
(CheckpointCadence), MetricsLog below, trainer/evaluation.py (HeldoutEval), trainer/faults.py (FaultHook),
trainer/profiling.py (StepProfiler).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any


@dataclasses.dataclass
class StepEnd:
    """One finished optimizer step, as hooks see it."""

    rec: dict[str, Any]  # the metrics record of the step; hooks may add to it (time.checkpoint, rollback)
    decision: str  # the spike guard's: accept | skip | rollback (trainer/spike.py)
    reason: str = ""  # why it did not accept: what spiked


class Hook:
    """No-op defaults: a hook overrides what it needs."""

    def on_start(self, t) -> None:
        pass

    def on_loss(self, t, loss, indices: Sequence[int]):
        return loss

    def on_step_end(self, t, step: StepEnd) -> None:
        pass

    def on_checkpoint(self, t, event: str) -> None:
        pass

    def on_upload(self, t, n: int) -> None:
        pass

    def on_train_end(self, t) -> None:
        pass


class Hooks:
    """The registered hooks, called in order (on_train_end in reverse)."""

    def __init__(self, hooks: Sequence[Hook]):
        self.hooks = list(hooks)

    def on_start(self, t) -> None:
        for h in self.hooks:
            h.on_start(t)

    def on_loss(self, t, loss, indices: Sequence[int]):
        for h in self.hooks:
            loss = h.on_loss(t, loss, indices)
        return loss

    def on_step_end(self, t, step: StepEnd) -> None:
        for h in self.hooks:
            h.on_step_end(t, step)

    def on_checkpoint(self, t, event: str) -> None:
        for h in self.hooks:
            h.on_checkpoint(t, event)

    def on_upload(self, t, n: int) -> None:
        for h in self.hooks:
            h.on_upload(t, n)

    def on_train_end(self, t) -> None:
        for h in reversed(self.hooks):
            h.on_train_end(t)


class MetricsLog(Hook):
    """The step's line in metrics.jsonl every logging.every steps (and at every rollback or skipped update),
    and a console line on rank 0 every max(logging.every, 10) steps and at step 1."""

    def on_step_end(self, t, step: StepEnd) -> None:
        rec, every = step.rec, t.cfg.logging.every
        if t.step % every == 0 or "rollback" in rec or not rec["update"]:
            t.metrics.write(rec)
            if t.rank == 0 and (t.step % max(every, 10) == 0 or t.step == 1):
                # both MFU counts, named: PaLM's (the one the docs' targets use) and the causal one
                mf = (
                    f" mfu {rec['mfu']:.1%} (causal {rec['mfu_causal']:.1%})"
                    if rec["mfu"] is not None
                    else ""
                )
                print(f"step {t.step:5d} loss {rec['loss']:.4f} gnorm {rec['grad_norm']:.3f} "
                      f"lr {rec['lr']:.2e} batch {rec['batch']} {rec['tokens_per_s']:.0f} tok/s{mf}",
                      flush=True)  # fmt: skip
