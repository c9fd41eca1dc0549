"""trainer/metrics.py MetricsLog, the one reader of metrics.jsonl, on a file MetricsWriter wrote: a resumed
run's repeated steps (the last record wins), events, the end check."""

from __future__ import annotations

from trainer.metrics import MetricsLog, MetricsWriter


def test_reads_what_the_writer_wrote_with_a_resume(tmp_path):
    w = MetricsWriter(tmp_path, enabled=True, tensorboard=False)
    for step, loss in ((1, 5.0), (2, 4.0), (3, 3.5)):
        w.write({"step": step, "loss": loss})
    w.write({"event": "eval", "step": 2, "eval": {"web": {"loss": 4.2}}})
    w.write({"event": "resume", "step": 2, "from": "step-2", "seconds": 0.1})  # killed after 3, back to 2
    w.write({"step": 3, "loss": 3.4})
    w.write({"event": "eval", "step": 3, "eval": {"web": {"loss": 3.9}}})
    w.write({"event": "end", "step": 3, "wall_s": 1.0})
    w.close()
    log = MetricsLog.read(tmp_path)
    assert MetricsLog.read(tmp_path / "metrics.jsonl") == log
    assert [(r["step"], r["loss"]) for r in log.steps()] == [(1, 5.0), (2, 4.0), (3, 3.4)]
    assert [r["step"] for r in log.events("eval")] == [2, 3] and log.last("eval")["eval"]["web"][
        "loss"
    ] == 3.9
    assert log.finished(3) and not log.finished(4)
    assert log.last("end")["wall_s"] == 1.0 and log.last("spike_skip") is None


def test_no_log_yet_is_empty(tmp_path):
    log = MetricsLog.read(tmp_path / "train")
    assert log.records == () and log.steps() == [] and not log.finished(1)
