"""Durations the suite records itself: what schedules `make test`, what `slow` means, what a run prints.

Each run writes the seconds it measured into tests/durations.json (a pytest plugin, registered by
tests/conftest.py), so nothing here is a hand-dated table:

- `tests`: seconds per test id, set-up, call and teardown together (the first test of a file that
  builds a module fixture pays for it);
- `fixtures`: seconds per fixture (its defining file or folder and its name), timed around its set-up
  alone, so a cheap test that needs an expensive module or session fixture is known as slow too;
- `cpu`: CPU seconds per test file, where the workers could be given a cgroup each (testkit/cpu.py:
  root on Linux, as CI is): the worker, its Spark JVM, its Python workers and every subprocess. On 2
  cores the suite is CPU-bound, so this, not wall time, is what a file costs the run (a test beside one
  that uses both cores takes twice as long without costing more). Replaced by a whole-suite run only.

A run replaces the entries of what it ran and keeps the others (a run of one file leaves the rest of the
table alone); a run of the whole default collection also forgets tests that no longer exist. Values are
rounded to 0.1 s so that a rerun does not rewrite every line.

What reads the file:
- tests/conftest.py's scheduler hands the longest units out first (longest-processing-time-first, as
  `LoadScopeScheduling` needs: a long unit started last leaves the other worker idle at the end);
- the `slow` marker is added here to every test that took SLOW_S seconds or more, or that needs a
  fixture that did, so `-m "not slow"` is a fast tier that nobody keeps by hand (the inner loop,
  `make quick`, is that tier plus the tests marked `inner`);
- the end of every run prints its 15 slowest units, with their CPU seconds where measured.

Under pytest-xdist the controller receives every worker's reports, so it alone writes the file; the
fixture timings are measured in the workers and travel to it in each report's user properties.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections import defaultdict
from pathlib import Path

import pytest

from testkit.cpu import CpuMeter

TESTS = Path(__file__).resolve().parents[1]
FILE = TESTS / "durations.json"
# A test of SLOW_S seconds or more (its own or one of its fixtures' set-up) is `slow`: with ~3,600 tests,
# the ones under it add up to a few minutes on 2 cores, which is what the inner loop can spend.
SLOW_S = 2.0
SLOWEST_SHOWN = 15
# The seconds assumed for a shared set-up group (tests/conftest.py) that the table does not hold yet.
UNRECORDED_GROUP_S = 600.0
_KEY = "fixture_setup_s"
_CPU_KEY = "cpu_s"


def load(path: Path = FILE) -> dict[str, dict[str, float]]:
    """The recorded table ({"tests": {...}, "fixtures": {...}}); empty where there is none yet or it is
    unreadable (a merge conflict left in it): the scheduler then keeps collection order."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return {
            k: {str(n): float(s) for n, s in data.get(k, {}).items()} for k in ("tests", "fixtures", "cpu")
        }
    except (OSError, ValueError, AttributeError, TypeError):
        return {"tests": {}, "fixtures": {}, "cpu": {}}


def fixture_key(fixturedef) -> str:
    """`tests/trainer/test_multinode.py::shared_run`: where a fixture is defined and its name (two
    modules' `setup` fixtures are different fixtures)."""
    return f"{fixturedef.baseid or '.'}::{fixturedef.argname}"


def item_fixture_keys(item: pytest.Item) -> list[str]:
    """The keys of the fixtures `item` uses, each the definition pytest resolves for it (the last)."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return []
    return [fixture_key(defs[-1]) for defs in info.name2fixturedefs.values() if defs]


def is_slow(item: pytest.Item, table: dict[str, dict[str, float]]) -> bool:
    if table["tests"].get(item.nodeid, 0.0) >= SLOW_S:
        return True
    return any(table["fixtures"].get(k, 0.0) >= SLOW_S for k in item_fixture_keys(item))


class Recorder:
    """Collects durations in the process that sees every report (the controller, or a serial run)."""

    def __init__(self, unit_of) -> None:
        self.unit_of = unit_of  # tests/conftest.py's scheduling unit of a test file
        self.tests: dict[str, float] = defaultdict(float)
        self.fixtures: dict[str, float] = {}
        self.collected: set[str] = set()
        self.full_collection = False
        self.cpu: dict[str, float] = defaultdict(float)  # CPU seconds per test file (the controller)
        self.meter: CpuMeter | None = None  # where this process runs tests
        self._cpu_mark = 0.0

    @pytest.hookimpl(hookwrapper=True)
    def pytest_fixture_setup(self, fixturedef, request):
        t0 = time.perf_counter()
        yield
        # Measured where the fixture runs (a worker); the report of the test being set up carries it
        # (request.node is the fixture's scope, a module or the session; _pyfuncitem is the test).
        item = getattr(request, "_pyfuncitem", None)
        seconds = time.perf_counter() - t0
        props = getattr(item, "user_properties", None)
        if props is not None and seconds >= 0.05:
            props.append((_KEY, (fixture_key(fixturedef), round(seconds, 2))))

    def pytest_sessionstart(self, session) -> None:
        cfg = session.config
        if _worker() or not getattr(cfg.option, "numprocesses", None):  # this process runs the tests
            self.meter = CpuMeter.start("refinery-tests")
        # the default collection: no file, -k, -m or --lf narrowed it (what `make test` runs)
        self.full_collection = (
            cfg.args_source == pytest.Config.ArgsSource.TESTPATHS
            and not cfg.option.keyword
            and not cfg.option.markexpr
            and not getattr(cfg.option, "lf", False)
        )

    def pytest_collection_finish(self, session) -> None:  # a serial run (or a worker)
        self.collected = {it.nodeid for it in session.items}

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node, ids) -> None:  # the controller
        self.collected.update(ids)

    def pytest_runtest_logstart(self, nodeid, location) -> None:
        if self.meter is not None:
            self._cpu_mark = self.meter.seconds()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item, call):
        """Each phase's report carries the CPU seconds since the last one (set-up, call, teardown)."""
        report = yield
        if self.meter is not None:
            now = self.meter.seconds()
            report.user_properties = [*report.user_properties, (_CPU_KEY, round(now - self._cpu_mark, 3))]
            self._cpu_mark = now
        return report

    def pytest_runtest_logreport(self, report) -> None:
        self.tests[report.nodeid] += report.duration
        for key, value in report.user_properties:
            if key == _KEY:
                name, seconds = value
                self.fixtures[name] = max(self.fixtures.get(name, 0.0), seconds)
            elif key == _CPU_KEY:
                self.cpu[report.nodeid.split("::", 1)[0]] += value

    def pytest_sessionfinish(self, session, exitstatus) -> None:
        if self.meter is not None:
            self.meter.stop()
        if _worker() or not self.tests or exitstatus == pytest.ExitCode.INTERRUPTED:
            return  # an interrupted run measured only part of what it started
        old = load()
        tests = {} if self.full_collection else old["tests"]
        tests.update({n: round(s, 1) for n, s in self.tests.items()})
        if not self.full_collection:  # keep only what still exists, where this run could tell
            tests = {n: s for n, s in tests.items() if n in self.collected or not _file_gone(n)}
        fixtures = {**old["fixtures"], **{k: round(s, 1) for k, s in self.fixtures.items()}}
        # a narrowed run's per-file sums would be parts of files: only a whole-suite run replaces them
        cpu = (
            {f: round(s, 1) for f, s in self.cpu.items()} if self.full_collection and self.cpu else old["cpu"]
        )
        data = {
            "about": "seconds per test and per fixture set-up, CPU seconds per file, written by tests/support/durations.py",
            "tests": dict(sorted((n, s) for n, s in tests.items() if s >= 0.1)),
            "fixtures": dict(sorted((k, s) for k, s in fixtures.items() if s >= 0.1)),
            "cpu": dict(sorted((f, s) for f, s in cpu.items() if s >= 0.1)),
        }
        tmp = FILE.with_name(f".{FILE.name}.{os.getpid()}")
        try:  # a read-only checkout (CI's copy of shared/ is; a checkout may be too) records nothing
            tmp.write_text(json.dumps(data, indent=0, sort_keys=False) + "\n", encoding="utf-8")
            tmp.replace(FILE)
        except OSError:
            tmp.unlink(missing_ok=True)

    def pytest_terminal_summary(self, terminalreporter) -> None:
        units = unit_seconds({"tests": self.tests}, self.unit_of)
        if _worker() or not units:
            return
        cpu = unit_seconds(
            {"tests": self.cpu}, self.unit_of
        )  # keyed by file: a file is its own nodeid prefix
        tr = terminalreporter
        tr.write_sep(
            "=",
            f"{SLOWEST_SHOWN} slowest units (worker seconds, and CPU seconds where measured; "
            "a unit is a file or a set-up group)",
        )

        def line(seconds: float, cpu_s: float | None, what: str) -> str:
            return f"{seconds:8.1f} s {'' if cpu_s is None else f'{cpu_s:8.1f} CPU-s'}  {what}"

        for unit, seconds in sorted(units.items(), key=lambda u: -u[1])[:SLOWEST_SHOWN]:
            tr.write_line(line(seconds, cpu.get(unit) if cpu else None, unit))
        tr.write_line(
            line(sum(units.values()), sum(cpu.values()) if cpu else None, f"all {len(units)} units")
        )


def _worker() -> bool:
    return bool(os.environ.get("PYTEST_XDIST_WORKER"))


def _file_gone(nodeid: str) -> bool:
    return not (TESTS.parent / re.split(r"::|\[", nodeid, maxsplit=1)[0]).is_file()


def unit_seconds(table: dict[str, dict[str, float]], unit_of) -> dict[str, float]:
    """Recorded seconds per scheduling unit: the sum of its tests' (fixture set-ups are inside them)."""
    units: dict[str, float] = defaultdict(float)
    for nodeid, seconds in table["tests"].items():
        units[unit_of(nodeid.split("::", 1)[0])] += seconds
    return dict(units)
