"""The checks the one runner makes before any Spark session starts: the output path, the master URL,
the input list recorded in `_config.json` (resume with the same inputs, refuse another list), and no
empty folder left behind when Spark cannot start. No Spark here: `get_spark` is replaced where the
run would reach it."""

from __future__ import annotations

import json

import pytest

import core.runner
from core.errors import ConfigError, OutputConflict
from core.output import OutputDir, check_folder_path
from core.runner import PerFileJob, input_list, run_per_file
from core.spark import SparkOptions, check_master

NO_PROGRESS = SparkOptions(progress=False)


def _noop(uri, unit, payload, out_root):  # never called: these runs stop before Spark
    raise AssertionError("no task should run")


def _job(**kw) -> PerFileJob:
    return PerFileJob(name="t", config={"k": 1}, fingerprint="f1", process=_noop, **kw)


class _SparkDown(RuntimeError):
    pass


@pytest.fixture
def spark_down(monkeypatch):
    """get_spark as it fails when the JVM cannot start (a bad --spark-conf, no Java)."""

    def fail(*a, **kw):
        raise _SparkDown("Java gateway process exited before sending its port number")

    monkeypatch.setattr(core.runner, "get_spark", fail)


@pytest.mark.parametrize(
    "master",
    ["local", "local[2]", "local[*]", "local[4,2]", "local[*,3]", "spark://h:7077", "spark://a:1,b:2",
     "yarn", "k8s://https://h:6443", "mesos://h:5050", "local-cluster[2,1,1024]"],
)  # fmt: skip
def test_master_forms_spark_accepts(master):
    check_master(master)
    check_master(None)


@pytest.mark.parametrize(
    "master", ["bogus://x", "local[0]", "local[]", "spark://", "Local", "yarn-client", ""]
)
def test_bad_master_refused_before_the_folder_is_made(tmp_path, master):
    out = tmp_path / "o"
    with pytest.raises(ConfigError, match="is not a Spark master URL"):
        run_per_file(_job(), [("a", "a")], str(out), SparkOptions(master))
    assert not out.exists()


def test_failed_spark_start_leaves_no_folder(tmp_path, spark_down):
    """Left behind, the folder claimed by this config refused a corrected command."""
    out = tmp_path / "o"
    with pytest.raises(_SparkDown):
        run_per_file(_job(), [("a", "a")], str(out), NO_PROGRESS)
    assert not out.exists()
    other = PerFileJob(name="t", config={"k": 2}, fingerprint="f2", process=_noop)
    with pytest.raises(_SparkDown):  # not OutputConflict: the folder did not survive
        run_per_file(other, [("a", "a")], str(out), NO_PROGRESS)


def _made_by_an_earlier_run(out, units, done=()):
    job = _job()
    OutputDir(out, job.subdirs).prepare(job.name, job.config, job.fingerprint, {"inputs": input_list(units)})
    for name in done:
        (out / "done" / f"{name}.json").write_text("{}")


def test_failed_spark_start_keeps_a_folder_it_did_not_make(tmp_path, spark_down):
    out = tmp_path / "o"
    _made_by_an_earlier_run(out, [("/d/a", "a")])
    with pytest.raises(_SparkDown):
        run_per_file(_job(), [("/d/a", "a")], str(out), NO_PROGRESS)
    assert (out / "_config.json").exists()


def test_other_inputs_refused_same_inputs_resume(tmp_path, spark_down):
    out = tmp_path / "o"
    units = [("/d/a.warc.gz", "a"), ("/d/b.warc.gz", "b")]
    _made_by_an_earlier_run(out, units, done=("a", "b"))
    # the same inputs, in any order: resumed, both skipped (nothing to run, so Spark is not needed)
    for again in (units, units[::-1]):
        res = run_per_file(_job(), again, str(out), NO_PROGRESS)
        assert (res.skipped, res.processed) == (2, 0)
    assert json.loads((out / "_config.json").read_text())["inputs"] == ["/d/a.warc.gz", "/d/b.warc.gz"]
    with pytest.raises(
        OutputConflict, match=r"differs in: inputs\); inputs: 1 added \(/d/c.warc.gz\), 2 removed"
    ):
        run_per_file(_job(), [("/d/c.warc.gz", "c")], str(out), NO_PROGRESS)
    with pytest.raises(OutputConflict, match=r"inputs: 1 removed \(/d/b.warc.gz\)"):
        run_per_file(_job(), units[:1], str(out), NO_PROGRESS)


def test_job_that_records_its_own_inputs_opts_out(tmp_path):
    out = tmp_path / "o"
    run_per_file(_job(guard_inputs=False), [], str(out), NO_PROGRESS)
    assert "inputs" not in json.loads((out / "_config.json").read_text())


def test_input_list_is_absolute_sorted_unique(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    units = [("b.warc.gz", "b"), ("s3://x/a.warc.gz", "a"), (str(tmp_path / "b.warc.gz"), "b")]
    assert input_list(units) == sorted([str(tmp_path / "b.warc.gz"), "s3://x/a.warc.gz"])


def test_output_that_is_a_file(tmp_path):
    f = tmp_path / "afile"
    f.write_text("x")
    with pytest.raises(OutputConflict, match=r"output .*afile is a file, not a folder"):
        run_per_file(_job(), [("a", "a")], str(f))
    with pytest.raises(OutputConflict, match=r"cannot be created: .*afile is a file"):
        run_per_file(_job(), [("a", "a")], str(f / "sub"))
    assert check_folder_path(tmp_path / "new" / "deeper") == (tmp_path / "new" / "deeper").resolve()
    assert not (tmp_path / "new").exists()  # checked, not made
