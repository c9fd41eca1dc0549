"""Trainer pieces without DeepSpeed: config loading/overrides/errors, the generated DeepSpeed JSON, LR
schedules and ramp-up against hand computation, the spike guard's decisions, checkpoint verification and
fallback, and the MFU FLOPs formula.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml

from core.errors import ConfigError as CoreConfigError
from trainer.config import ConfigError, compile_enabled, load_config
from trainer.metrics import causal_flops_per_token, device_peak, flops_per_token, mfu
from trainer.model import model_config
from trainer.schedule import batch_at, lr_at
from trainer.spike import ACCEPT, ROLLBACK, SKIP, SpikeGuard

REPO = Path(__file__).resolve().parents[2]


def _write(tmp_path, text):
    p = tmp_path / "c.yaml"
    p.write_text(text)
    return p


def test_config_file_plus_dotted_overrides(tmp_path):
    p = _write(tmp_path, "data: {recipe: r.yaml, seq_len: 128}\noptimizer: {lr: 1.0e-3}\n")
    cfg = load_config(p, ["optimizer.lr=2e-3", "schedule.rampup=[{tokens: 0, batch: 4}]", "model.size=124m"])
    assert cfg.optimizer.lr == 2e-3 and cfg.data.seq_len == 128 and cfg.model.size == "124m"
    assert cfg.schedule.rampup[0].batch == 4
    assert cfg.optimizer.beta2 == 0.95  # default


@pytest.mark.parametrize(
    ("text", "override", "key"),
    [
        ("data: {recipe: r.yaml}\n", "optimizer.lrr=1", "optimizer.lrr"),
        ("data: {recipe: r.yaml}\n", "optimizer.lr=fast", "optimizer.lr"),
        ("data: {recipe: r.yaml}\n", "model.size=7b", "model.size"),
        ("data: {recipe: r.yaml}\n", "schedule.warmup_steps=500", "schedule.warmup_steps"),
        ("data: {}\n", "seed=1", "data.recipe"),
        ("data: {recipe: r.yaml}\n", "checkpoint.verify=md5", "checkpoint.verify"),
        ("data: {recipe: r.yaml}\n", "schedule.rampup=[{tokens: 5, batch: 4}]", "schedule.rampup[0].tokens"),
    ],
)
def test_bad_config_names_file_and_key(tmp_path, text, override, key):
    p = _write(tmp_path, text)
    with pytest.raises(ConfigError) as e:
        load_config(p, [override])
    assert str(p) in str(e.value) and key in str(e.value)


def test_config_is_the_core_loader(tmp_path):
    """One ConfigError class, frozen sections, and an override that is not YAML is named as such."""
    assert ConfigError is CoreConfigError
    p = _write(tmp_path, "data: {recipe: r.yaml}\noptimizer: {lr: 2e-3}\n")  # YAML 1.1 reads 2e-3 as a string
    cfg = load_config(p)
    assert cfg.optimizer.lr == 2e-3
    with pytest.raises(ValueError):
        cfg.optimizer.lr = 1.0  # type: ignore[misc]
    with pytest.raises(ConfigError, match=r"override 'optimizer\.lr=\[1': not valid YAML"):
        load_config(p, ["optimizer.lr=[1"])
    with pytest.raises(ConfigError, match=r"logging\.tensorboard must be true or false"):
        load_config(p, ["logging.tensorboard=1"])


def test_shipped_config_round_trips_through_to_dict():
    """to_dict() (what checkpoints record) holds every value the YAML file sets, under the same keys, and
    one entry per section; the defaults fill the rest."""
    path = REPO / "configs" / "train-debug.yaml"
    raw = yaml.safe_load(path.read_text())
    got = load_config(path).to_dict()
    assert set(got) == {"seed", "model", "optimizer", "schedule", "data", "eval", "checkpoint", "spike",
                        "logging", "deepspeed"}  # fmt: skip
    for section, values in raw.items():
        if isinstance(values, dict):
            assert {k: got[section][k] for k in values} == values, section
        else:
            assert got[section] == values
    assert json.loads(json.dumps(got)) == got  # plain JSON data


def test_batch_must_divide_into_micro_batches_times_ranks(tmp_path):
    cfg = load_config(
        _write(tmp_path, "data: {recipe: r.yaml}\nschedule: {global_batch: 6, micro_batch: 2}\n")
    )
    cfg.schedule.check_divisible(3)  # 6 = 2 × 3
    with pytest.raises(ConfigError, match=r"schedule\.global_batch"):
        cfg.schedule.check_divisible(2)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("model.compile=1", "model.compile must be one of auto, true, false; got 1"),
        ("model.compile=fast", "model.compile must be one of auto, true, false; got 'fast'"),
        ("deepspeed.zero_stage=4", "deepspeed.zero_stage must be one of 0, 1, 2, 3, auto; got 4"),
        ("deepspeed.zero_stage=max", "deepspeed.zero_stage must be one of 0, 1, 2, 3, auto; got 'max'"),
        ("deepspeed.memory_margin=1", r"deepspeed.memory_margin must be in \[0, 1\), got 1.0"),
        ("deepspeed.timeout_s=0", r"deepspeed.timeout_s must be > 0, got 0"),
    ],
)
def test_compile_and_zero_stage_values(tmp_path, override, message):
    p = _write(tmp_path, "data: {recipe: r.yaml}\n")
    with pytest.raises(ConfigError, match=message):
        load_config(p, [override])
    ok = load_config(p, ["model.compile=false", "deepspeed.zero_stage='2'"])  # a quoted number is a number
    assert ok.model.compile is False and ok.deepspeed.zero_stage == 2
    assert load_config(p).model.compile == "auto"
    assert compile_enabled(ok, on_cuda=True) is False
    assert compile_enabled(load_config(p), on_cuda=True) and not compile_enabled(
        load_config(p), on_cuda=False
    )


def _sched(tmp_path, kind, **kw):
    extra = ", ".join(f"{k}: {v}" for k, v in kw.items())
    return load_config(
        _write(
            tmp_path,
            f"data: {{recipe: r.yaml}}\noptimizer: {{lr: 1.0, min_lr: 0.1}}\n"
            f"schedule: {{kind: {kind}, steps: 10, warmup_steps: 2{', ' + extra if extra else ''}}}\n",
        )
    )


def test_cosine_schedule_by_hand(tmp_path):
    cfg = _sched(tmp_path, "cosine")
    got = [lr_at(s, cfg.schedule, cfg.optimizer) for s in range(10)]
    # warmup: 1·1/2, 1·2/2; then p = (s−2)/8 for s = 2..9, lr = 0.1 + 0.45·(1 + cos(πp))
    assert got[0] == pytest.approx(0.5) and got[1] == pytest.approx(1.0)
    assert got[2] == pytest.approx(1.0)  # p = 0
    assert got[6] == pytest.approx(0.55)  # p = 1/2: 0.1 + 0.45
    assert got[4] == pytest.approx(0.1 + 0.45 * (1 + math.sqrt(0.5)))  # p = 1/4
    assert got[9] == pytest.approx(0.1 + 0.45 * (1 + math.cos(math.pi * 7 / 8)))


def test_wsd_schedule_by_hand(tmp_path):
    cfg = _sched(tmp_path, "wsd", decay_fraction=0.4)
    got = [lr_at(s, cfg.schedule, cfg.optimizer) for s in range(10)]
    # 10 steps, decay over the last 4 (s = 6..9): 1 − 0.9·k/4 for k = 1..4
    assert got[:6] == pytest.approx([0.5, 1.0, 1.0, 1.0, 1.0, 1.0])
    assert got[6:] == pytest.approx([0.775, 0.55, 0.325, 0.1])


def test_rampup_by_consumed_tokens(tmp_path):
    cfg = load_config(
        _write(
            tmp_path,
            "data: {recipe: r.yaml}\nschedule: {global_batch: 16, rampup: "
            "[{tokens: 0, batch: 4}, {tokens: 1000, batch: 8}]}\n",
        )
    )
    assert [batch_at(t, cfg.schedule) for t in (0, 999, 1000, 10**9)] == [4, 4, 8, 8]
    assert batch_at(0, cfg.schedule.replace(rampup=[])) == 16


def test_spike_guard_skip_then_rollback(tmp_path):
    cfg = load_config(
        _write(
            tmp_path,
            "data: {recipe: r.yaml}\nspike: {window: 4, min_history: 4, sigmas: 3, max_consecutive: 2}\n",
        )
    )
    g = SpikeGuard(cfg.spike)
    for v in (1.0, 2.0, 1.0, 2.0):  # mean 1.5, sample std sqrt(1/3) ≈ 0.577 → limit 1.5 + 1.732 = 3.232
        assert g.observe(v, 1.0)[0] == ACCEPT
    assert g.observe(3.2, 1.0) == (ACCEPT, "")  # below the limit; window now 2, 1, 2, 3.2
    # window (2, 1, 2, 3.2): mean 2.05, var (0.0025+1.1025+0.0025+1.3225)/3 = 0.81, std 0.9 → limit 4.75
    assert g.observe(4.8, 1.0) == (SKIP, "loss")
    assert list(g.losses) == [2.0, 1.0, 2.0, 3.2]  # a skipped step does not enter the window
    assert g.observe(2.0, 1e6) == (ROLLBACK, "grad_norm")  # second in a row
    assert g.observe(float("nan"), 1.0)[1] == "non-finite"
    st = g.state_dict()
    g2 = SpikeGuard(cfg.spike)
    g2.load_state_dict(json.loads(json.dumps(st)))
    assert g2.state_dict() == st


def test_spike_guard_window_restarts_at_a_phase_switch(tmp_path):
    """The anneal's first steps are judged against the anneal, not against the main phase."""
    cfg = load_config(
        _write(
            tmp_path,
            "data: {recipe: r.yaml}\nspike: {window: 4, min_history: 4, sigmas: 3, max_consecutive: 2}\n",
        )
    )
    g = SpikeGuard(cfg.spike)
    for v in (1.0, 1.1, 1.0, 1.1):
        assert g.observe(2.0, v, "main")[0] == ACCEPT
    assert g.is_spike(2.0, 3.0) == (True, "grad_norm")  # in the main phase this would be a spike
    assert g.observe(2.0, 3.0, "anneal") == (ACCEPT, "")  # a new phase: the window restarted
    assert list(g.norms) == [3.0]
    st = g.state_dict()
    assert st["phase"] == "anneal"
    g2 = SpikeGuard(cfg.spike)
    g2.load_state_dict(json.loads(json.dumps(st)))
    assert g2.state_dict() == st


def test_flops_formula_by_hand():
    cfg = model_config("124m")  # d 768, 12 layers, MHA, ffn 2048, vocab 50304
    d, layers, ffn, vocab, t = 768, 12, 2048, 50304, 1024
    n_matmul = layers * (4 * d * d + 3 * d * ffn) + vocab * d
    # PaLM appendix B (full attention): the MFU convention; the causal count (attention halved) beside it
    assert flops_per_token(cfg, t) == 6 * n_matmul + 12 * layers * cfg.n_heads * cfg.head_dim * t
    assert causal_flops_per_token(cfg, t) == 6 * n_matmul + 6 * layers * t * d
    # the docs' conversion factor at the benches' 124m shape (vocabulary 4,096): 0.912
    small = model_config("124m", vocab_size=4096)
    assert causal_flops_per_token(small, t) / flops_per_token(small, t) == pytest.approx(0.9118, abs=1e-4)
    # 1 GPU at 100k tok/s on an H100 SXM: F·1e5 / 989.4e12
    peak = device_peak("NVIDIA H100 80GB HBM3")
    assert mfu(flops_per_token(cfg, t), 1e5, 1, peak) == pytest.approx(
        flops_per_token(cfg, t) * 1e5 / 989.4e12
    )
    assert device_peak("NVIDIA A100-SXM4-80GB") == 312e12
    assert device_peak(None) is None and device_peak("NVIDIA GeForce GTX 1080") is None
    assert mfu(1.0, 1e5, 1, None) is None


def test_eval_config_and_tensorboard_switch(tmp_path):
    cfg = load_config(_write(tmp_path, "data: {recipe: r.yaml}\n"), ["eval.every=7"])
    assert cfg.eval.every == 7 and cfg.eval.sequences_per_source == 16 and cfg.logging.tensorboard
    for override, key in [
        ("eval.sequences_per_source=-1", "eval.sequences_per_source"),
        ("eval.every=-2", "eval.every"),
    ]:
        with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
            load_config(_write(tmp_path, "data: {recipe: r.yaml}\n"), [override])


def test_tensorboard_gets_the_jsonl_numbers_under_their_paths(tmp_path):
    """Records as the trainer writes them; read back with TensorBoard's own reader. A relaunch after step 2
    (`start(2)`) purges what the first attempt logged past step 2."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from trainer.metrics import MetricsWriter

    step = {"loss": 5.5, "grad_norm": 0.75, "lr": 1e-3, "mfu": None, "update": True, "phase": "main",
            "per_source_tokens": {"web": 130, "multi": 65}, "time": {"data": 0.25, "fwd_bwd": 1.5},
            "indices": [0, 1]}  # fmt: skip
    w = MetricsWriter(tmp_path, enabled=True, tensorboard=True)
    w.start(0)
    for s in (1, 2, 3):
        w.write({"step": s, **step, "loss": 6.0 - s})
    w.write({"event": "eval", "step": 3, "eval": {"web": {"loss": 4.25}}, "seconds": 0.5})
    w.close()
    w = MetricsWriter(tmp_path, enabled=True, tensorboard=True)  # the relaunch, resumed at step 2
    w.start(2)
    w.write({"step": 3, **step, "loss": 2.5})
    w.write(
        {"event": "end", "step": 3, "goodput": 0.875, "sample": "The end", "per_source_tokens": {"web": 9}}
    )
    w.close()
    acc = EventAccumulator(str(tmp_path / "tensorboard"))
    acc.Reload()
    scalars = {t: [(e.step, e.value) for e in acc.Scalars(t)] for t in acc.Tags()["scalars"]}
    # the purged eval of the first attempt leaves its tags with no points
    assert scalars.pop("eval/web/loss") == [] and scalars.pop("eval/seconds") == []
    assert set(scalars) == {
        "loss", "grad_norm", "lr", "per_source_tokens/web", "per_source_tokens/multi", "time/data",
        "time/fwd_bwd", "end/goodput", "end/per_source_tokens/web",
    }  # fmt: skip
    # steps 1, 2 of the first attempt, step 3 of the relaunch; its first step 3 and its eval are purged
    assert scalars["loss"] == [(1, 5.0), (2, 4.0), (3, 2.5)]
    assert scalars["end/goodput"] == [(3, 0.875)]
    (text,) = acc.Tensors("end/sample/text_summary")  # add_text's tag suffix
    assert text.step == 3 and text.tensor_proto.string_val == [b"The end"]
    lines = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in lines] == [1, 2, 3, 3, 3, 3]  # the JSONL keeps every attempt


def test_eval_scalars_tag_per_source():
    from trainer.metrics import scalar_tags

    rec = {"event": "eval", "step": 5, "eval": {"web": {"loss": 4.0}, "multi": {"loss": 4.5}}, "seconds": 0.1}
    assert dict(scalar_tags(rec)) == {"eval/web/loss": 4.0, "eval/multi/loss": 4.5, "eval/seconds": 0.1}


def test_faults_come_from_the_environment_not_the_config(tmp_path):
    from trainer.faults import ENV_VAR, Faults, faults_from_env

    with pytest.raises(ConfigError, match=r"unknown key test_hooks"):
        load_config(_write(tmp_path, "data: {recipe: r.yaml}\n"), ["test_hooks.kill_at_step=3"])
    assert faults_from_env({}) == Faults() and not Faults().active
    f = faults_from_env({ENV_VAR: '{"poison_indices": [3, 9], "poison_factor": 1000, "kill_at_step": 17}'})
    assert (f.poison_indices, f.poison_factor, f.kill_at_step, f.active) == ((3, 9), 1000.0, 17, True)
    with pytest.raises(ConfigError, match=rf"{ENV_VAR}: not valid JSON"):
        faults_from_env({ENV_VAR: "{kill_at_step: 3"})
    assert faults_from_env({ENV_VAR: '{"dump_state_steps": [15]}'}).active  # an observation, announced too
    allowed = "dump_state_steps, fault_rank, hang_at_step, kill_at_step, kill_in_upload_step, poison_factor, poison_indices"
    with pytest.raises(ConfigError, match=rf"{ENV_VAR}: unknown key kill_at; allowed: {allowed}"):
        faults_from_env({ENV_VAR: '{"kill_at": 3}'})
    with pytest.raises(ConfigError, match=rf"{ENV_VAR}: kill_at_step must be >= 0"):
        faults_from_env({ENV_VAR: '{"kill_at_step": -1}'})


def test_step_profiler_covers_exactly_its_window(tmp_path, capsys):
    """logging.profile_start=3, profile_steps=2 over a 6-step loop of real matmuls: the profiler opens when
    step 2 ends and closes when step 4 ends, so the trace holds steps 3 and 4 only (each step's work is
    named by a record_function marker), and writes the trace, the op table and rank 0's console summary."""
    from types import SimpleNamespace

    import torch

    from trainer.hooks import StepEnd
    from trainer.profiling import StepProfiler

    cfg = load_config(None, ["data.recipe=r.yaml", f"logging.dir={tmp_path}", "logging.profile_start=3",
                             "logging.profile_steps=2"])  # fmt: skip
    t = SimpleNamespace(cfg=cfg, step=0, rank=0, on_cuda=False)
    hook = StepProfiler()
    hook.on_start(t)
    a = torch.randn(64, 64)
    for step in range(1, 7):
        with torch.profiler.record_function(f"marker_step_{step}"):
            (a @ a).sum()
        t.step = step
        hook.on_step_end(t, StepEnd(rec={}, decision="accept"))
    hook.on_train_end(t)
    trace = json.loads((tmp_path / "profile" / "trace-rank0.json").read_text())
    names = {e.get("name", "") for e in trace["traceEvents"]}
    assert {n for n in names if n.startswith("marker_step_")} == {"marker_step_3", "marker_step_4"}
    assert "aten::mm" in names
    table = (tmp_path / "profile" / "ops-rank0.txt").read_text()
    assert table.startswith("steps 3-4, sorted by self_cpu_time_total") and "aten::mm" in table
    assert "[trainer] profile of steps 3-4" in capsys.readouterr().out

    # a run resumed from a checkpoint: profile_start=1 opens at start, the resume to step 4 moves past
    # it (nothing written for steps it never ran); profile_start=5 opens at a resume to step 4
    for start, wrote in ((1, False), (5, True)):
        out = tmp_path / f"resumed-{start}"
        cfg = load_config(None, ["data.recipe=r.yaml", f"logging.dir={out}", f"logging.profile_start={start}",
                                 "logging.profile_steps=1"])  # fmt: skip
        t = SimpleNamespace(cfg=cfg, step=0, rank=0, on_cuda=False)
        hook = StepProfiler()
        hook.on_start(t)
        t.step = 4
        hook.on_checkpoint(t, "resume")
        (a @ a).sum()
        t.step = 5
        hook.on_step_end(t, StepEnd(rec={}, decision="accept"))
        hook.on_train_end(t)
        assert (out / "profile" / "ops-rank0.txt").is_file() == wrote, start
        if wrote:
            assert (out / "profile" / "ops-rank0.txt").read_text().startswith("steps 5-5")


def test_profile_window_is_validated(tmp_path):
    with pytest.raises(ConfigError, match=r"logging\.profile_steps"):
        load_config(None, ["data.recipe=r.yaml", "logging.profile_steps=0"])
