"""workflows/steps.py: the one step runner (skips a finished step only when its command is the same, keeps
timings across reruns) and the in-process call of a package's command with its exit status."""

from __future__ import annotations

import json

import pytest

from workflows.steps import StepFailed, StepRunner, call


def test_runner_times_skips_and_reruns_a_changed_command(tmp_path):
    ran: list[str] = []
    path = tmp_path / "timings.json"
    runner = StepRunner(path, log=lambda m: None)
    runner.run("a", False, lambda: ran.append("a"), ["python", "-m", "x", "1"])
    runner.run("b", False, lambda: ran.append("b"))
    first = json.loads(path.read_text())
    assert ran == ["a", "b"] and list(first) == ["a", "b"]
    assert first["a"]["command"] == ["python", "-m", "x", "1"] and not first["a"]["skipped_last_run"]

    again = StepRunner(path, log=lambda m: None)  # a rerun: both done
    again.run("a", True, lambda: ran.append("a2"), ["python", "-m", "x", "1"])
    again.run("b", True, lambda: ran.append("b2"))
    assert ran == ["a", "b"]
    kept = json.loads(path.read_text())
    assert kept["a"]["skipped_last_run"] and kept["a"]["seconds"] == first["a"]["seconds"]

    # done, but made by another command: handed to the step again (its own checks resume or refuse)
    StepRunner(path, log=lambda m: None).run("a", True, lambda: ran.append("a3"), ["python", "-m", "x", "2"])
    assert ran[-1] == "a3" and json.loads(path.read_text())["a"]["command"][-1] == "2"


def test_runner_reads_an_older_folders_plain_seconds(tmp_path):
    (tmp_path / "timings.json").write_text(json.dumps({"reference": 1.5}))
    runner = StepRunner(tmp_path / "timings.json", log=lambda m: None)
    runner.run("reference", True, lambda: pytest.fail("a finished step ran"))
    assert json.loads((tmp_path / "timings.json").read_text())["reference"] == {
        "seconds": 1.5,
        "skipped_last_run": True,
    }


def test_call_runs_the_package_command_in_process_with_its_exit_status(tmp_path, capsys):
    with pytest.raises(StepFailed) as e:
        call("report", ["--ablation", str(tmp_path)], log=lambda m: None)
    assert e.value.status == 2 and "no ablation.json" in capsys.readouterr().err
    # a status the caller accepts is returned, not raised
    assert call("report", ["--ablation", str(tmp_path)], ok=(0, 2), log=lambda m: None) == 2


def test_timings_keep_the_order_the_steps_ran(tmp_path):
    runner = StepRunner(tmp_path / "timings.json", log=lambda m: None)
    for name in ("extract", "dedup", "score"):
        runner.run(name, False, lambda: None)
    assert list(json.loads((tmp_path / "timings.json").read_text())) == ["extract", "dedup", "score"]


@pytest.mark.spark
def test_a_step_leaves_the_callers_spark_session_running(spark, warc_dir, tmp_path):
    # The runner stops the session a step's job started (a job's process used to end there), but a
    # session the caller already had (a notebook's; this suite's shared one) must survive the step.
    warc = min(warc_dir.glob("*.warc.gz"), key=lambda p: p.stat().st_size)
    out = tmp_path / "extract"
    assert call("curation", ["extract", "--input", str(warc), "--output", str(out)], log=lambda m: None) == 0
    assert (out / "_SUCCESS").is_file()
    assert spark.range(3).count() == 3
