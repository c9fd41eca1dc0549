"""The step profiler (`logging.profile_start=N`): torch.profiler over optimizer steps N .. N+profile_steps-1.

What torchtitan's `[profiling]` gives, as one step hook: where a step's time goes, op by op, on the host
and on the device. Each rank writes `<logging.dir>/profile/trace-rank<r>.json` (a Chrome trace: open it in
Perfetto or chrome://tracing) and `ops-rank<r>.txt` (torch.profiler's table of the ops, by self device time
on CUDA, by self host time on CPU); rank 0 prints the table's top lines. Off by default: the profiler's
own overhead (tens of microseconds per op) would slow every step and distort the metrics.

The window opens when step N-1 ends (at start for N = 1), so it holds whole steps with their boundaries:
data loading, the ZeRO gathers and reduce-scatters, the optimizer, and the hooks between steps.
"""

from __future__ import annotations

from pathlib import Path

from trainer.hooks import Hook, StepEnd

TOP_ROWS = 25  # the console's share of the table; the file holds 60


class StepProfiler(Hook):
    def __init__(self) -> None:
        self.prof = None
        self.first = 0

    def on_start(self, t) -> None:
        if t.cfg.logging.profile_start == 1:
            self._open(t)

    def on_step_end(self, t, step: StepEnd) -> None:
        start, n = t.cfg.logging.profile_start, t.cfg.logging.profile_steps
        if start > 1 and t.step == start - 1 and self.prof is None:
            self._open(t)
        elif self.prof is not None and t.step >= start + n - 1:
            self._close(t)

    def on_checkpoint(self, t, event: str) -> None:
        if event != "resume":
            return
        if self.prof is not None:  # opened at start for step 1, but the run resumed past it: not those steps
            self.prof.stop()
            self.prof = None
        if t.step > 0 and t.step == t.cfg.logging.profile_start - 1:  # resumed right before the window
            self._open(t)

    def on_train_end(self, t) -> None:  # the data or the schedule ended inside the window
        if self.prof is not None:
            self._close(t)

    def _open(self, t) -> None:
        import torch

        acts = [torch.profiler.ProfilerActivity.CPU]
        if t.on_cuda:
            acts.append(torch.profiler.ProfilerActivity.CUDA)
        self.first = t.step + 1
        self.prof = torch.profiler.profile(activities=acts, record_shapes=False)
        self.prof.start()

    def _close(self, t) -> None:
        prof, self.prof = self.prof, None
        prof.stop()
        out = Path(t.cfg.logging.dir) / "profile"
        out.mkdir(parents=True, exist_ok=True)
        prof.export_chrome_trace(str(out / f"trace-rank{t.rank}.json"))
        key = "self_device_time_total" if t.on_cuda else "self_cpu_time_total"
        table = prof.key_averages().table(sort_by=key, row_limit=60)
        steps = f"steps {self.first}-{t.step}"
        (out / f"ops-rank{t.rank}.txt").write_text(f"{steps}, sorted by {key}\n{table}\n")
        if t.rank == 0:
            lines = table.splitlines()
            head = [*lines[: 3 + TOP_ROWS], *lines[-2:]]  # header, the top rows, the totals
            print(f"[trainer] profile of {steps} (sorted by {key}) in {out}:\n" + "\n".join(head), flush=True)
