"""Fused-kernel benchmark: ours vs eager PyTorch, torch.compile of the same reference, and Liger-Kernel.

For RMSNorm, RoPE (q and k), SwiGLU and linear + cross-entropy at the shapes of the 124m and 1b models and
an 8B-class model (Llama 3 8B: d 4096, 32/8 heads of 128, FFN 14336, V 128,256), it times forward + backward
(median of CUDA-event timings after warm-up) and measures peak extra memory of one forward + backward, and
prints one table of ratios against ours (time ×: theirs / ours, > 1 means ours is faster; memory ×: theirs /
ours, > 1 means ours uses less). Then linear + cross-entropy at V = 128,256, H = 4096 with 8K–32K tokens:
memory against the unfused reference and speed.

Two timings, two tables. "device": the summed duration of the GPU kernels of one forward + backward
(torch.profiler, CUDA activity; what the target "each kernel >= torch.compile" is about). "wall": CUDA
events around one forward + backward, which also counts the GPU waiting for the host to launch work:
at these shapes RMSNorm, RoPE and SwiGLU run tens of microseconds on an H100, so their wall cells (0.6-1.4
ms in the first H100 run, 2026-11-26) are mostly the dispatch of the op, not the kernel.

Eager and torch.compile columns run `trainer.kernels.reference`, the same functions the tests compare
against. The Liger column appears only when `liger_kernel` is importable; a Liger call that fails (API drift)
prints "err" instead of a number.

    python -m bench.trainer.kernels                    # needs CUDA
    python -m bench.trainer.kernels --interpret        # tiny shapes in Triton's CPU interpreter: a smoke test only
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from bench.harness import table


@dataclass(frozen=True)
class Shape:
    name: str
    tokens: int
    hidden: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    ffn: int
    vocab: int


MODEL_SHAPES = [
    Shape("124m", 8192, 768, 12, 12, 64, 2048, 50304),
    Shape("1b", 8192, 2048, 32, 8, 64, 7680, 50304),
    Shape("8b", 8192, 4096, 32, 8, 128, 14336, 128256),
]
TINY = Shape("tiny", 64, 64, 4, 2, 16, 96, 256)
CE_TOKENS = [8192, 16384, 32768]


KERNELS = ("rms_norm", "rope", "swiglu", "linear_ce")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--interpret", action="store_true", help="CPU smoke run: tiny shape, Triton interpreter")
    p.add_argument("--no-compile", action="store_true", help="skip the torch.compile column")
    p.add_argument("--iters", type=int, default=20, help="timed iterations per cell")
    p.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16")
    p.add_argument(
        "--kernels", default=",".join(KERNELS), help=f"comma-separated subset of {','.join(KERNELS)}"
    )
    a = p.parse_args(argv)
    a.kernels = [k for k in a.kernels.split(",") if k]
    if not a.kernels or set(a.kernels) - set(KERNELS):
        p.error(f"--kernels: choose from {', '.join(KERNELS)}, got {','.join(a.kernels) or 'none'}")
    return a


# ---------------------------------------------------------------- measuring


@dataclass
class Measured:
    wall_ms: float  # median of one forward + backward between CUDA events (CPU: perf_counter)
    device_ms: float | None  # GPU kernel time of one forward + backward (None on CPU)
    peak_mib: float | None  # peak extra memory of one (None on CPU)


def measure(step: Callable[[], None], device, iters: int) -> Measured:
    """One implementation's timings and memory (module doc: "device" and "wall")."""
    import torch

    step()  # warm-up: compilation, autotuning, allocator
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        step()
        torch.cuda.synchronize()
        peak = (torch.cuda.max_memory_allocated() - base) / 2**20
        times = []
        for _ in range(iters):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            step()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        return Measured(statistics.median(times), kernel_ms(step, iters), peak)
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        step()
        times.append((time.perf_counter() - t0) * 1e3)
    return Measured(statistics.median(times), None, None)


def kernel_ms(step: Callable[[], None], iters: int) -> float | None:
    """GPU time of one step: the durations of the kernels (and device copies/fills) that `iters` steps
    launch, summed, over iters; None when the profiler records no device activity."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            step()
        torch.cuda.synchronize()
    # `self_device_time_total` since torch 2.4; `self_cuda_time_total` before
    us = sum(
        getattr(e, "self_device_time_total", None) or getattr(e, "self_cuda_time_total", 0)
        for e in prof.key_averages()
    )
    return us / 1e3 / iters if us > 0 else None


@dataclass
class Case:
    """One kernel's implementations at one shape, sharing inputs: `impls` name -> forward closure,
    `grads` runs the backward of a forward's output, `reference` (fn, args) is what torch.compile gets."""

    impls: dict[str, Callable]
    grads: Callable
    reference: tuple[Callable, tuple]


def make_steps(
    kernel: str, s: Shape, dtype, device, with_compile: bool, liger
) -> dict[str, Callable[[], None]]:
    """One closure per implementation running forward + backward of `kernel` at shape `s`."""
    import torch

    from trainer.kernels import get_ops

    builders = {"rms_norm": _rms_norm, "rope": _rope, "swiglu": _swiglu, "linear_ce": _linear_ce}
    if kernel not in builders:
        raise ValueError(kernel)
    g = torch.Generator(device=device).manual_seed(0)

    def rand(*shape, scale=1.0):
        return (torch.randn(*shape, generator=g, device=device) * scale).to(dtype).requires_grad_()

    case = builders[kernel](s, rand, g, get_ops("triton", device), liger, dtype, device)
    if with_compile:
        fn, args = case.reference
        c = torch.compile(fn)
        case.impls["compile"] = lambda: c(*args)

    def run(fn):
        def step():
            case.grads(fn())

        return step

    return {name: run(fn) for name, fn in case.impls.items()}


def _rms_norm(s: Shape, rand, g, ours, liger, dtype, device) -> Case:
    import torch

    from trainer.kernels import reference

    x, w = rand(s.tokens, s.hidden), rand(s.hidden)
    dy = torch.randn_like(x)
    impls = {"ours": lambda: ours.rms_norm(x, w, 1e-5), "eager": lambda: reference.rms_norm(x, w, 1e-5)}
    if liger:
        mod = liger.LigerRMSNorm(s.hidden, eps=1e-5).to(device, dtype)
        impls["liger"] = lambda: mod(x)
    return Case(impls, lambda out: out.backward(dy), (reference.rms_norm, (x, w, 1e-5)))


def _rope(s: Shape, rand, g, ours, liger, dtype, device) -> Case:
    import torch

    from trainer.kernels import reference

    b, t = 1, s.tokens
    q, k = rand(b, t, s.n_heads, s.head_dim), rand(b, t, s.n_kv_heads, s.head_dim)
    ang = torch.rand(b, t, s.head_dim // 2, generator=g, device=device) * 100
    cos, sin = ang.cos(), ang.sin()
    dq, dk = torch.randn_like(q), torch.randn_like(k)
    impls = {
        "ours": lambda: ours.apply_rope(q, k, cos, sin),
        "eager": lambda: reference.apply_rope(q, k, cos, sin),
    }
    if liger:
        # Liger takes (B, H, T, D) and HF-style full-width tables (B, T, D); layout changes are outside
        # the timed op in spirit but inside here, as a model using Liger would have to do them
        cos_f, sin_f = torch.cat([cos, cos], -1).to(dtype), torch.cat([sin, sin], -1).to(dtype)
        impls["liger"] = lambda: tuple(
            o.transpose(1, 2)
            for o in liger.liger_rotary_pos_emb(q.transpose(1, 2), k.transpose(1, 2), cos_f, sin_f)
        )
    grads = lambda out: torch.autograd.backward(out, (dq, dk))  # noqa: E731
    return Case(impls, grads, (reference.apply_rope, (q, k, cos, sin)))


def _swiglu(s: Shape, rand, g, ours, liger, dtype, device) -> Case:
    import torch

    from trainer.kernels import reference

    # gate/up as the model has them: intermediate activations (the outputs of w1(x), w3(x)), not leaves —
    # ours (and Liger) then write the gradients over them instead of allocating; the values drift to gradient
    # values over the iterations, which stay O(1) and do not change the time
    a, bb = rand(s.tokens, s.ffn).clone(), rand(s.tokens, s.ffn).clone()  # CloneBackward saves nothing
    dy = torch.randn_like(a)
    impls = {"ours": lambda: ours.swiglu(a, bb), "eager": lambda: reference.swiglu(a, bb)}
    if liger:
        impls["liger"] = lambda: liger.LigerSiLUMulFunction.apply(a, bb)
    return Case(impls, lambda out: out.backward(dy), (reference.swiglu, (a, bb)))


def _linear_ce(s: Shape, rand, g, ours, liger, dtype, device) -> Case:
    import torch

    from trainer.kernels import reference

    h, w = rand(s.tokens, s.hidden), rand(s.vocab, s.hidden, scale=s.hidden**-0.5)
    targets = torch.randint(0, s.vocab, (s.tokens,), generator=g, device=device)
    impls = {
        "ours": lambda: ours.linear_cross_entropy(h, w, targets),
        "eager": lambda: reference.linear_cross_entropy(h, w, targets),
    }
    if liger:
        loss_mod = liger.LigerFusedLinearCrossEntropyLoss()
        impls["liger"] = lambda: loss_mod(w, h, targets)
    return Case(impls, lambda out: out.backward(), (reference.linear_cross_entropy, (h, w, targets)))


def load_liger():
    """Liger's modules/functions if liger_kernel is importable, else None (its column is then omitted)."""
    if importlib.util.find_spec("liger_kernel") is None:
        return None
    try:
        from types import SimpleNamespace

        from liger_kernel.ops.swiglu import LigerSiLUMulFunction
        from liger_kernel.transformers import (
            LigerFusedLinearCrossEntropyLoss,
            LigerRMSNorm,
            liger_rotary_pos_emb,
        )
    except Exception as exc:  # installed but incompatible: say so, benchmark the rest
        print(f"liger_kernel present but not importable ({exc}); column omitted", file=sys.stderr)
        return None
    return SimpleNamespace(
        LigerRMSNorm=LigerRMSNorm,
        LigerSiLUMulFunction=LigerSiLUMulFunction,
        LigerFusedLinearCrossEntropyLoss=LigerFusedLinearCrossEntropyLoss,
        liger_rotary_pos_emb=liger_rotary_pos_emb,
    )


def bench_row(kernel, shape, dtype, device, args, liger, columns) -> dict[str, list[str]]:
    """The shape's row of each table: {"wall": [...], "device": [...]} (device: only on CUDA)."""
    steps = make_steps(kernel, shape, dtype, device, not args.no_compile and not args.interpret, liger)
    results: dict[str, Measured | None] = {}
    for name, step in steps.items():
        try:
            results[name] = measure(step, device, args.iters)
        except Exception as exc:  # one failing implementation (OOM, API drift) must not hide the others
            print(f"{kernel}/{shape.name}/{name}: {type(exc).__name__}: {exc}", file=sys.stderr)
            results[name] = None
    ours = results["ours"]
    tables = {"wall": lambda m: m.wall_ms}
    if device.type == "cuda":
        tables["device"] = lambda m: m.device_ms
    out = {}
    for clock, timing in tables.items():
        ours_ms = (timing(ours) if ours else None) or float("nan")
        ours_mib = ours.peak_mib if ours else None
        row = [
            kernel,
            shape.name,
            f"{shape.tokens}",
            f"{ours_ms:.3f}",
            "-" if ours_mib is None else f"{ours_mib:.0f}",
        ]
        for col in columns:
            r = results.get(col)
            if col not in steps:
                row.append("n/a")
            elif r is None or timing(r) is None:
                row.append("err")
            else:
                m_ratio = "-" if r.peak_mib is None or not ours_mib else f"{r.peak_mib / ours_mib:.2f}"
                row.append(f"{timing(r) / ours_ms:.2f} / {m_ratio}")
        out[clock] = row
    # each row as soon as it is measured: a run cut off by a time limit keeps what it measured
    print(f"[bench] {kernel}/{shape.name}: {json.dumps(out)}", file=sys.stderr, flush=True)
    return out


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.interpret:
        # before the Triton kernels are imported (trainer.kernels imports them lazily, on first use)
        os.environ["TRITON_INTERPRET"] = "1"
    import torch

    if not torch.cuda.is_available() and not args.interpret:
        print(
            "bench/trainer/kernels.py needs a CUDA GPU: it reports GPU time and memory. "
            "Use --interpret for a CPU smoke run of the benchmark code (numbers meaningless).",
            file=sys.stderr,
        )
        return 2
    device = torch.device("cuda" if torch.cuda.is_available() and not args.interpret else "cpu")
    dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[args.dtype]
    liger = None if args.interpret else load_liger()
    columns = ["eager", "compile", "liger"] if liger else ["eager", "compile"]
    shapes = [TINY] if args.interpret else MODEL_SHAPES
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU (Triton interpreter)"
    print(f"device: {name}; dtype {args.dtype}; torch {torch.__version__}; liger: {'yes' if liger else 'no'}")
    print("cells: their time / our time  /  their peak memory / our peak memory  (>1: ours better)\n")
    header = ["kernel", "model", "tokens", "ours ms", "ours MiB", *columns]
    rows = [bench_row(k, s, dtype, device, args, liger, columns) for k in args.kernels for s in shapes]
    ce_shapes = (
        [TINY] if args.interpret else [Shape("8b", n, 4096, 32, 8, 128, 14336, 128256) for n in CE_TOKENS]
    )
    ce_shapes = ce_shapes if "linear_ce" in args.kernels else []
    ce_rows = [bench_row("linear_ce", s, dtype, device, args, liger, columns) for s in ce_shapes]
    for clock in rows[0]:
        what = {
            "device": "GPU kernel time (profiler)",
            "wall": "wall time between CUDA events (host included)",
        }
        print(f"\n{clock}: {what[clock] if device.type == 'cuda' else 'wall time (CPU)'}")
        print(table(header, [r[clock] for r in rows]))
        if ce_rows:
            print(
                "linear + cross-entropy, H 4096, V 128,256 (8B-class head): 'eager' is the unfused reference"
            )
            print(table(header, [r[clock] for r in ce_rows]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
