"""CPU seconds of a process and everything it starts, from a cgroup of its own (Linux, root).

On CI's 2 cores the suite is CPU-bound (vmstat: 0-2% idle through a whole `make test`), so what a
test costs the run is the CPU it burns, in its worker, its Spark JVM, its Python workers and every
subprocess, not its wall time: a test that runs beside one using both cores takes twice as long
without costing more. `getrusage(RUSAGE_CHILDREN)` misses all of that (a py4j JVM is never waited
for by pytest), a cgroup does not: every descendant stays in it.

`CpuMeter.start()` makes a cgroup inside this process's own, in the cpuacct hierarchy (cgroup v1,
`cpuacct.usage`) or else the unified one (v2, `cpu.stat`'s `usage_usec`), and moves this process into
it; children inherit it. Inside its own group, so nothing that tracks this process (systemd's scope, a
container's limits) loses it. Where no writable cgroup exists (not root, another layout) it returns
None and the caller measures nothing. Accounting only: the group has no limits set.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def _own_groups() -> list[tuple[Path, bool]]:
    """(this process's cgroup folder, is v1 cpuacct) for the cpuacct hierarchy, then the unified one:
    each hierarchy's mount point (/proc/self/mountinfo) joined with this process's path in it
    (/proc/self/cgroup)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    paths = {}
    for line in lines:
        _, controllers, path = line.split(":", 2)
        paths["v2" if controllers == "" else ("cpuacct" if "cpuacct" in controllers.split(",") else "")] = (
            path
        )
    found = []
    for m in mounts:
        left, _, right = m.partition(" - ")
        fstype, options = right.split(" ")[0], right.split(" ")[-1].split(",")
        point = Path(left.split(" ")[4])
        if fstype == "cgroup" and "cpuacct" in options and "cpuacct" in paths:
            found.insert(0, (point / paths["cpuacct"].lstrip("/"), True))
        elif fstype == "cgroup2" and "v2" in paths:
            found.append((point / paths["v2"].lstrip("/"), False))
    return found


def _remove_stale(own: Path, name: str) -> None:
    """Earlier meters' groups whose process is gone: a JVM still exiting when its meter stopped kept
    the group then; empty now, it is removed (the kernel refuses a group still in use)."""
    for old in own.glob(f"{name}-*"):
        pid = old.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            with contextlib.suppress(OSError):
                old.rmdir()


class CpuMeter:
    """A cgroup holding this process and its descendants; `seconds()` is their CPU time so far."""

    def __init__(self, group: Path, usage: Path) -> None:
        self.group, self.usage = group, usage

    @classmethod
    def start(cls, name: str) -> CpuMeter | None:
        """This process moved into a new cgroup `name`-<pid>; None where none can be made."""
        for own, v1 in _own_groups():
            _remove_stale(own, name)
            group = own / f"{name}-{os.getpid()}"
            try:
                group.mkdir(exist_ok=True)
                usage = group / ("cpuacct.usage" if v1 else "cpu.stat")
                (group / "cgroup.procs").write_text(f"{os.getpid()}\n")
                meter = cls(group, usage)
                meter.seconds()  # readable, or no meter
                return meter
            except (OSError, ValueError):
                with contextlib.suppress(OSError):
                    group.rmdir()
        return None

    def seconds(self) -> float:
        text = self.usage.read_text()
        if self.usage.name == "cpuacct.usage":
            return int(text) / 1e9
        usec = next((line.split()[1] for line in text.splitlines() if line.startswith("usage_usec ")), None)
        if usec is None:
            raise ValueError(f"{self.usage}: no usage_usec line")
        return int(usec) / 1e6

    def stop(self) -> None:
        """This process back to the parent group, and the group removed if nothing is left in it (a
        process that outlived its test keeps it: the kernel refuses to remove a group in use)."""
        with contextlib.suppress(OSError):
            (self.group.parent / "cgroup.procs").write_text(f"{os.getpid()}\n")
            self.group.rmdir()
