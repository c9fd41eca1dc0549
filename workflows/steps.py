"""The one step runner of every workflow, the in-process call of a package's command, and the trainer launch.

`StepRunner.run(name, done, fn, ident)` runs one step unless it is done, times it and records it in the
workflow folder's `timings.json` as `{name: {"seconds", "skipped_last_run", "command"?}}` (the report's
"wall time per stage" reads it). A step is skipped when `done` says its output's completion marker is there
and, when the step has an identity (its command), the runner recorded the same identity last time: a folder
left by another command (other inputs, an older recipe) is handed to the step, whose own checks resume or
refuse it. Every job resumes its own unfinished units, so a rerun after a crash redoes only what is missing.

`call(module, args)` runs `python -m <module> <args>` in this process: the package's own `main(argv)`, so the
arguments, checks and exit statuses are those of the command line. A Spark job's session is stopped after
it, as the end of its process did: the next job starts its own, with its own master and settings.

`launch(cmd)` is the one subprocess: the trainer under DeepSpeed's launcher (trainer/launch.py builds it).
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from core.output import atomic_write_bytes

# `python -m <module>`'s entry point, for each package a workflow runs a command of.
ENTRY_POINTS = {
    "curation": "curation.cli",
    "dedup": "dedup.cli",
    "classifiers": "classifiers.cli",
    "tokens": "tokens.cli",
    "mixtures": "mixtures.__main__",
    "report": "report.__main__",
    "trainer.export_lm": "trainer.export_lm",
    "workflows": "workflows.cli",
}
INTERRUPTED = 130  # core/cli.py: the exit status of a command stopped by Ctrl-C


class StepFailed(RuntimeError):
    """A step failed; `status` is its exit status (2: it refused its input or config)."""

    def __init__(self, msg: str, status: int) -> None:
        super().__init__(msg)
        self.status = status


def _banner(msg: str) -> str:
    return f"\n\033[1m==> {msg}\033[0m"


class StepRunner:
    """Runs a workflow's steps in order into `timings.json` (module docstring)."""

    def __init__(self, timings_path: Path, log: Callable[[str], None] | None = None) -> None:
        self.path = Path(timings_path)
        self.log = log or (lambda m: print(m, flush=True))
        found = json.loads(self.path.read_text()) if self.path.is_file() else {}
        # a folder of an older version holds plain seconds per step
        self.timings: dict[str, dict[str, Any]] = {
            k: v if isinstance(v, dict) else {"seconds": v} for k, v in found.items()
        }

    def run(self, name: str, done: bool, fn: Callable[[], Any], ident: Sequence[str] | None = None) -> None:
        same = ident is None or self.timings.get(name, {}).get("command") == list(ident)
        if done and same:
            self.log(f"\n==> {name}: already done, skipped")
            self.timings.setdefault(name, {"seconds": None})["skipped_last_run"] = True
        else:
            self.log(_banner(f"{name}  [{time.strftime('%H:%M:%S')}]"))
            t0 = time.perf_counter()
            fn()
            self.timings[name] = {"seconds": round(time.perf_counter() - t0, 1), "skipped_last_run": False}
            if ident is not None:
                self.timings[name]["command"] = list(ident)
            self.log(f"==> {name}: {self.timings[name]['seconds']:.1f} s")
        # in the order the steps ran (the report's table follows it), not sorted
        atomic_write_bytes(self.path, (json.dumps(self.timings, indent=1) + "\n").encode())


def command_line(module: str, args: Sequence[str], python: str = "python") -> list[str]:
    """The command `call(module, args)` stands for, as it is shown and recorded."""
    return [python, "-m", module, *args]


def call(
    module: str, args: Sequence[str], ok: tuple[int, ...] = (0,), log: Callable[[str], None] = print
) -> int:
    """`python -m module args` in this process (module docstring); StepFailed on a status not in `ok`."""
    log("$ " + " ".join(command_line(module, args)))
    main = importlib.import_module(ENTRY_POINTS[module]).main
    caller_session = _active_spark()
    try:
        rc = main(list(args))
    finally:
        if caller_session is None:  # a session the caller had (a notebook's, a test suite's) stays up
            _stop_spark()
    if rc == INTERRUPTED:
        raise KeyboardInterrupt
    if rc not in ok:
        raise StepFailed(f"exit status {rc}: {' '.join(command_line(module, args))}", rc)
    return rc


def _active_spark():
    """The process's active SparkSession, or None (without importing pyspark when nothing did)."""
    if "pyspark" not in sys.modules:
        return None
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession()


def _stop_spark() -> None:
    """Stop the Spark session a job started in this process, if any (a job's process used to end here)."""
    session = _active_spark()
    if session is not None:
        session.stop()


def launch(
    cmd: list[str], log: Callable[[str], None] = print, env_extra: dict[str, str] | None = None
) -> None:
    """Run the trainer launcher (trainer/launch.py's command), its output streamed; StepFailed on failure.

    Its ranks import the project's packages as this process does: the folder above them is put on
    PYTHONPATH (a checkout that is not installed), and the interpreter's own folder on PATH;
    `env_extra` on top (trainer.launch.run_command's rendezvous variables for a rank started directly).
    """
    import trainer

    log("$ " + " ".join(cmd))
    root = str(Path(trainer.__file__).resolve().parent.parent)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.update(env_extra or {})
    rc = subprocess.run(cmd, env=env).returncode
    if rc == INTERRUPTED:
        raise KeyboardInterrupt
    if rc != 0:
        raise StepFailed(f"the trainer failed (exit status {rc}): {' '.join(cmd)}", rc)
