"""Learning-rate schedules and the batch-size ramp-up, as pure functions of the step and consumed tokens.

Pure functions (no state to checkpoint): on resume, the trainer's step counter and token count are restored
and the schedule continues exactly. Step s counts optimizer updates from 0.

- cosine (nanoGPT, Llama): linear warmup lr·(s+1)/W for s < W, then
  min_lr + ½(lr − min_lr)(1 + cos(π·p)), p = (s − W)/(S − W) ∈ [0, 1].
- wsd (warmup-stable-decay, MiniCPM / OLMo-core): the same warmup, lr until the last `decay_fraction`·S
  steps, then linear to min_lr over those D steps: lr − (lr − min_lr)·(s − (S − D) + 1)/D.
- constant: warmup, then lr.

Ramp-up: the global batch (sequences) is a step function of the tokens consumed before the step, given as
stages [(tokens ≥ t_i → batch b_i)] (Megatron's `rampup_batch_size` is by samples; tokens are the unit of a
data recipe). The trainer pulls exactly that many sequences from the sampler, so nothing is skipped or repeated.
"""

from __future__ import annotations

import math

from trainer.config import OptimizerSection, ScheduleSection


def lr_at(step: int, sched: ScheduleSection, opt: OptimizerSection) -> float:
    """Learning rate of optimizer step `step` (0-based)."""
    s, total, warm = step, sched.steps, sched.warmup_steps
    peak, floor = opt.lr, opt.min_lr
    if s < warm:
        return peak * (s + 1) / warm
    if sched.kind == "constant":
        return peak
    if sched.kind == "cosine":
        span = max(total - warm, 1)
        p = min((s - warm) / span, 1.0)
        return floor + 0.5 * (peak - floor) * (1 + math.cos(math.pi * p))
    decay = max(round(sched.decay_fraction * total), 0)
    start = total - decay
    if decay == 0 or s < start:
        return peak
    frac = min((s - start + 1) / decay, 1.0)
    return peak - (peak - floor) * frac


def batch_at(tokens_consumed: int, sched: ScheduleSection) -> int:
    """Global batch (sequences) of the step that starts after `tokens_consumed` tokens."""
    batch = sched.global_batch
    for st in sched.rampup:
        if tokens_consumed >= st.tokens:
            batch = st.batch
    return batch
