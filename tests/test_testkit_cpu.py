"""testkit/cpu.py, which tests/support/durations.py uses to record what each test file costs in CPU:
a child's CPU time is counted, the group goes away when the meter stops, and an earlier meter's group
left behind (a JVM still exiting when it stopped) is removed by the next."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from testkit.tiers import refused

ROOT = Path(__file__).resolve().parents[1]

# In a process of its own, so the meter moves that process, not this pytest worker: start a meter,
# run a child that burns CPU and prints the CPU time it used itself, then stop the meter.
_PROBE = """
import json, subprocess, sys
from testkit.cpu import CpuMeter, _own_groups
# an earlier meter's group left behind (its process gone: no pid reaches 9,999,999, above Linux's pid_max cap)
stale = []
for g, _ in _own_groups()[:1]:
    try:
        (g / "refinery-probe-9999999").mkdir(exist_ok=True)
        stale.append(g / "refinery-probe-9999999")
    except OSError:
        pass
m = CpuMeter.start("refinery-probe")
if m is None:
    print(json.dumps(None)); sys.exit()
stale_left = any(g.exists() for g in stale)
before = m.seconds()
child = "import time\\nx = 0\\nwhile time.process_time() < 0.5: x += 1\\nprint(time.process_time())"
used = float(subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, check=True).stdout)
measured = m.seconds() - before
m.stop()
print(json.dumps({"used": used, "measured": measured, "group_left": m.group.exists(), "stale": len(stale),
                  "stale_left": stale_left}))
"""


def test_a_childs_cpu_time_is_counted_and_the_group_removed():
    out = subprocess.run(
        [sys.executable, "-c", _PROBE], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout)
    if res is None:
        refused("no writable cgroup for this process (needs root on Linux): CPU seconds are not recorded")
    # the child's own process_time is a lower bound: the meter also counts its interpreter's start-up
    # and exit, which process_time began after and ended before; the upper bound leaves 2 s for them
    # on a loaded machine, far below what a meter counting another process's work would add
    assert res["used"] >= 0.5 and res["used"] * 0.95 <= res["measured"] <= res["used"] + 2.0, res
    assert not res["group_left"]
    assert res["stale"] == 1 and not res["stale_left"]  # the earlier meter's empty group was removed
