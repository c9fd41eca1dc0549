"""Spike guard: skip an update whose loss or grad norm is beyond mean + kσ of a rolling window; after M in a
row, ask for a rollback to the last good checkpoint.

OLMo-core's SkipStepOptimizer rule (6σ over the last 128 steps) and llm.c's z-score outlier detector,
plus the rollback none of the peers automates (research/trainer-peers.md §5.1). Only accepted steps enter the
window, so a run of spikes cannot drag the mean up and hide itself. The decision is taken on values that are
already all-reduced, so every rank decides the same. The state is a small dict saved in each checkpoint.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

from trainer.config import SpikeSection

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
