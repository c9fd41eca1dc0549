"""Spike guard: skip an update whose loss or grad norm is beyond mean + kσ of a rolling window; after M in a
row, ask for a rollback to the last good checkpoint.

OLMo-core's SkipStepOptimizer rule (6σ over the last 128 steps) and llm.c's z-score outlier detector,
plus the rollback none of the peers automates (research/trainer-peers.md §5.1). Only accepted steps enter the
window, so a run of spikes cannot drag the mean up and hide itself. The decision is taken on values that are
already all-reduced, so every rank decides the same. The state is a small dict saved in each checkpoint.
`SpikeGuard` decides (the trainer asks it before each update); `SpikeRollback`, a step hook, acts on a
skip or a rollback once the step is done.
"""

from __future__ import annotations

import math
import sys
from collections import deque
from typing import Any

from trainer.config import SpikeSection
from trainer.hooks import Hook, StepEnd

ACCEPT, SKIP, ROLLBACK = "accept", "skip", "rollback"


class SpikeGuard:
    def __init__(self, cfg: SpikeSection):
        self.cfg = cfg
        self.losses: deque[float] = deque(maxlen=cfg.window)
        self.norms: deque[float] = deque(maxlen=cfg.window)
        self.consecutive = 0
        self.skipped_total = 0
        self.phase = ""

    @staticmethod
    def _limit(values: deque[float], sigmas: float) -> float:
        n = len(values)
        mean = sum(values) / n
        var = sum((v - mean) ** 2 for v in values) / (n - 1)
        return mean + sigmas * math.sqrt(var)

    def is_spike(self, loss: float, grad_norm: float) -> tuple[bool, str]:
        """(spike?, reason) for this step's values against the window (no state change)."""
        if not (math.isfinite(loss) and math.isfinite(grad_norm)):
            return True, "non-finite"
        if not self.cfg.enabled or len(self.losses) < self.cfg.min_history:
            return False, ""
        if loss > self._limit(self.losses, self.cfg.sigmas):
            return True, "loss"
        if grad_norm > self._limit(self.norms, self.cfg.sigmas):
            return True, "grad_norm"
        return False, ""

    def observe(self, loss: float, grad_norm: float, phase: str = "") -> tuple[str, str]:
        """Decide ACCEPT / SKIP / ROLLBACK for a step and update the state accordingly.

        A new mixture phase (e.g. the anneal) is a new data distribution: its first steps are compared
        with the old phase's window otherwise, and a legitimate jump in grad norm reads as a spike. The
        window restarts at a phase switch (the guard waits for `min_history` steps again).
        """
        if phase != self.phase:
            if self.phase:
                self.losses.clear()
                self.norms.clear()
            self.phase = phase
        spike, reason = self.is_spike(loss, grad_norm)
        if not spike:
            self.losses.append(loss)
            self.norms.append(grad_norm)
            self.consecutive = 0
            return ACCEPT, ""
        self.consecutive += 1
        self.skipped_total += 1
        if self.consecutive >= self.cfg.max_consecutive:
            return ROLLBACK, reason
        return SKIP, reason

    def state_dict(self) -> dict[str, Any]:
        return {
            "losses": list(self.losses),
            "norms": list(self.norms),
            "consecutive": self.consecutive,
            "skipped_total": self.skipped_total,
            "phase": self.phase,
        }

    def load_state_dict(self, st: dict[str, Any]) -> None:
        self.losses = deque(st["losses"], maxlen=self.cfg.window)
        self.norms = deque(st["norms"], maxlen=self.cfg.window)
        self.consecutive = int(st["consecutive"])
        self.skipped_total = int(st["skipped_total"])
        self.phase = str(st.get("phase", ""))


class SpikeRollback(Hook):
    """The guard's decision acted on after the step (trainer/hooks.py): a skipped update is recorded
    (`spike` in the step's record, a `spike_skip` event), and a ROLLBACK quarantines the global-stream
    window of the spiking run of steps and reloads the newest good checkpoint; after spike.max_rollbacks
    the run gives up (exit 3)."""

    def on_step_end(self, t, step: StepEnd) -> None:
        if step.decision == ACCEPT:
            return
        rec = step.rec
        rec["spike"] = step.reason
        t.metrics.write({"event": "spike_skip", "step": t.step, "reason": step.reason, "loss": rec["loss"]})
        _log(t, f"[spike] step {t.step}: {step.reason} spike (loss {rec['loss']:.4f}, grad norm "
             f"{rec['grad_norm']:.3g}): update skipped ({t.guard.consecutive} in a row)")  # fmt: skip
        if step.decision == ROLLBACK:
            rec["rollback"] = self._rollback(t)

    def _rollback(self, t) -> str:
        window = (int(t.spike_run_start), int(t.batches.global_index))
        t.batches.quarantine.append(window)
        if not t.checkpointer.enabled:
            _log(t, "[spike] rollback wanted but checkpoints are off: continuing past the window")
            return "no-checkpoint"
        if t.rollbacks >= t.cfg.spike.max_rollbacks:
            _log(t, f"[spike] {t.rollbacks} rollbacks already: giving up, the run needs a human")
            t.metrics.write({"event": "give_up", "step": t.step, "rollbacks": t.rollbacks})
            t.finish()
            sys.exit(3)
        tag = t.checkpointer.choose()
        if tag is None:
            _log(t, "[spike] rollback wanted but no good checkpoint: continuing past the window")
            return "no-checkpoint"
        at = t.step
        t.load(tag, keep_quarantine=True)
        t.rollbacks += 1
        t.guard.consecutive = 0
        t.spike_run_start = None
        _log(t, f"[spike] step {at}: rolled back to {tag}; data window [{window[0]}, {window[1]}) "
             "of the global stream quarantined")  # fmt: skip
        t.metrics.write(
            {"event": "rollback", "step": at, "to": tag, "quarantine": list(window), "rollbacks": t.rollbacks}
        )
        return tag


def _log(t, msg: str) -> None:
    if t.rank == 0:
        print(msg, flush=True)
