"""What the benches share: one clock for every side, the kept-set agreement, one table printer.

The clock. A bench compares sides that run in different process trees: this process, a multiprocessing
Pool, datatrove's LocalPipelineExecutor workers and their sandboxes, Spark's JVM and Python workers. Every
side is timed the same way: the wall seconds of its whole call, set-up included (`Clock.wall`), and the
CPU seconds of the process tree it ran in, children that ended included (`Clock.cpu`, from /proc:
`tree_cpu_seconds`), which on a shared machine is the steadier per-core measure. What a side spends on
set-up is taken out the same way on every side by the bench that reports a steady rate
(bench/curation/sides.py: `Run.setup_core_s`, `Run.steady_per_core`).

The kept-set agreement: documents kept by both with the same text over documents kept by either, one
implementation, testkit.kept_sets (the cascade's test asserts with it); `kept_agreement` reads two output
folders.

The table: `table(headers, rows)`, columns padded to their widest cell, a rule under the header.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_CLK_TCK = os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(roots: set[int], exclude: set[int] = frozenset()) -> float:
    """CPU seconds used so far by `roots` and their live descendants, subtrees in `exclude` left out.

    Each live process counts utime+stime plus cutime+cstime (the CPU of its children that exited
    and were reaped): a process's CPU is then counted once, in itself while alive, in its reaper
    after. A delta of two calls is the CPU the tree used in between.
    """
    procs: dict[int, tuple[int, int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        procs[int(name)] = (int(fields[1]), sum(int(x) for x in fields[11:15]))
    children: dict[int, list[int]] = defaultdict(list)
    for pid, (ppid, _) in procs.items():
        children[ppid].append(pid)
    ticks, stack, seen = 0, list(roots), set()
    while stack:
        pid = stack.pop()
        if pid in seen or pid in exclude or pid not in procs:
            continue
        seen.add(pid)
        ticks += procs[pid][1]
        stack.extend(children[pid])
    return ticks / _CLK_TCK


def child_pids() -> set[int]:
    """This process's direct children now (to name a JVM started by a call: the set after minus before)."""
    me = os.getpid()
    out = set()
    for name in os.listdir("/proc"):
        if name.isdigit():
            with contextlib.suppress(OSError), open(f"/proc/{name}/stat") as f:
                stat = f.read()
                if int(stat[stat.rindex(")") + 2 :].split()[1]) == me:
                    out.add(int(name))
    return out


@dataclass
class Clock:
    """Wall and process-tree CPU seconds of what runs inside `with Clock() as c:`, then `c.wall`, `c.cpu`.

    `roots`: the trees whose CPU counts (default this process and everything under it; add a JVM started
    before, as the Spark side does); `exclude`: subtrees left out (that JVM, when the side is not Spark).
    `t0` is the start as a Unix time, to place the side's task timestamps in its call."""

    roots: set[int] = field(default_factory=lambda: {os.getpid()})
    exclude: set[int] = field(default_factory=set)
    t0: float = 0.0
    wall: float = 0.0
    cpu: float = 0.0

    def __enter__(self) -> Clock:
        self._cpu0 = tree_cpu_seconds(self.roots, self.exclude)
        self.t0 = time.time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.time() - self.t0
        self.cpu = tree_cpu_seconds(self.roots, self.exclude) - self._cpu0


def kept_agreement(a: Path, b: Path) -> float:
    """Documents kept by both output folders (docs/*.parquet) with the same text, over documents kept
    by either: testkit.kept_sets.agreement over the two folders' kept sets."""
    from testkit.kept_sets import output_texts, texts_agreement

    return texts_agreement(output_texts(a), output_texts(b)).ratio


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], left: int = 1) -> str:
    """Columns padded to their widest cell, the first `left` left-aligned and the rest right-aligned
    (numbers), a rule under the header; cells are str()-ed."""
    cells = [[str(c) for c in r] for r in rows]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]

    def fmt(row: Sequence[str]) -> str:
        return "  ".join(
            c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))
        ).rstrip()

    return "\n".join([fmt(headers), "  ".join("-" * w for w in widths), *(fmt(r) for r in cells)])


@contextlib.contextmanager
def stderr_to(path: Path | None) -> Iterator[None]:
    """Send fd 2 (and so every child's stderr: datatrove's log lines, the JVM's) to `path`; None: leave it."""
    if path is None:
        yield
        return
    from core.files import redirected_fd

    with open(path, "ab") as f, redirected_fd(2, f.fileno()):
        yield
