"""A Llama-3-8B decoder block end to end: torch, torch.compile, and Relax three ways (issue 28).

The block (bench/_decoder.py: RMSNorm, Q/K/V projections, rotary embedding, causal GQA
attention, output projection, SwiGLU MLP, two residual adds; bf16 weights) runs as

* torch eager, ``torch.compile``, and ``torch.compile`` with this package's operators
  (``ops.linear``, ``ops.attention``);
* a Relax module (symbolic batch and sequence) built by apache-tvm alone (its default GPU
  schedules), with its cuBLAS offload (``partition_for_cublas``; attention stays with
  apache-tvm), and with ours (``partition_for_tvm_tirx``: every matmul and the attention).

Each result is checked against the torch block in float32 (max |y - ref| / max |ref| <=
5e-2: a chain of bf16 roundings), then timed (CUDA events, median of ``--runs`` rounds;
each round times every variant once, in a rotated order, so that clock drift over the
run favors none).  The
table prints ms per block, tokens per second and the error; an error over the tolerance
is marked WRONG (the variant is still timed), a variant that fails prints why.
``--profile`` prints, per shape, the GPU time of each kernel of the two ``torch.compile``
variants and of the Relax block with our offload (torch.profiler), to show where they differ.

    python bench/model.py          # GPU: the table, batch x sequence 1 x 4096 and 8 x 2048
    python bench/model.py --cpu    # no GPU: build the three Relax variants for sm_90a
    python bench/model.py --profile  # GPU: the torch.compile variants' kernels, by GPU time
    python bench/model.py --only compile ops tvm_tirx  # GPU: the variants whose name ends so
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:] = [_ROOT] + [p for p in sys.path if os.path.abspath(p or ".") != os.path.join(_ROOT, "bench")]

import tvm  # noqa: E402
from tvm import relax  # noqa: E402

from tvm_tirx import testing  # noqa: E402
from tvm_tirx.ops.relax_offload import partition_for_tvm_tirx  # noqa: E402

from bench._decoder import LLAMA3_8B, WEIGHTS, DecoderBlock, make_weights, relax_block, rope_tables  # noqa: E402
from bench._timing import table  # noqa: E402

SHAPES = ((1, 4096), (8, 2048))
TARGET = {"kind": "cuda", "arch": "sm_90a"}
TOLERANCE = 5e-2


def build_relax(way: str, cfg=LLAMA3_8B):
    """The Relax block built ``way``: ``"tvm"``, ``"cublas"`` or ``"tvm_tirx"`` (whose
    gated MLP's interleaved weight ``LiftTransformParams`` moves into
    ``main_transform_params``, run once by :func:`_relax_runner`)."""
    mod = relax_block(cfg)
    target = tvm.target.Target(TARGET)
    if way == "tvm_tirx":
        mod = partition_for_tvm_tirx(mod)
        mod["main"] = mod["main"].with_attr("num_input", 3)  # x, cos, sin; the rest are weights
        mod = relax.transform.LiftTransformParams()(mod)
        return tvm.compile(mod, target=target, relax_pipeline="tvm_tirx", tir_pipeline="tvm_tirx")
    if way == "cublas":
        from tvm.relax.backend.cuda.cublas import partition_for_cublas  # pylint: disable=import-outside-toplevel

        mod = relax.transform.RunCodegen()(partition_for_cublas(mod))  # the BYOC flow: partition, then codegen
    return tvm.compile(mod, target=target)


def _relax_runner(torch, way, args):
    vm = relax.VirtualMachine(build_relax(way), tvm.cuda(0))
    tvm_args = [tvm.runtime.from_dlpack(t.contiguous()) for t in args]
    if way == "tvm_tirx":  # the weights through the lifted parameter transform, once
        tvm_args = tvm_args[:3] + list(vm["main_transform_params"](tvm_args[3:]))
    return lambda: torch.from_dlpack(vm["main"](*tvm_args))


def _torch_runner(torch, way, block, args):
    if way == "eager":
        fn = block
    else:
        fn = torch.compile(block if way == "compile" else block.to_ops())
    return lambda: fn(*args)


def _checked(make, ref):
    """``(fn, error cell)`` of one variant, or ``(None, why it failed)``."""
    try:
        fn = make()
        err = ((fn().float() - ref).abs().max() / ref.abs().max()).item()
        flag = "" if err <= TOLERANCE else f" WRONG (over {TOLERANCE:.0e})"  # a wrong variant is timed too
        return fn, f"{err:.1e}{flag}"
    except Exception as e:  # pylint: disable=broad-except  # report, go on
        return None, f"{type(e).__name__}: {str(e).splitlines()[0][:70] if str(e) else ''}"


def _interleaved(fns: dict, runs: int) -> dict:
    """``{name: median ms}`` over ``runs`` rounds; each round times every variant once
    (``testing.do_bench``, one run after one warm-up call), in an order rotated from round
    to round, so that a drift of the GPU's clocks over the benchmark favors none of them."""
    names, samples = list(fns), {name: [] for name in fns}
    for r in range(runs):
        for name in names[r % len(names):] + names[:r % len(names)]:
            samples[name].append(testing.do_bench(fns[name], runs=1, warmup=1).median)
    return {name: statistics.median(v) for name, v in samples.items()}


class _Block(DecoderBlock):
    def to_ops(self):
        return _Block(self.cfg, {n: getattr(self, n) for n in WEIGHTS}, impl="tvm_tirx")


def _wanted(variant: str, only) -> bool:
    """Whether ``variant`` is timed: every one without ``--only``, else those whose name
    ends with one of its words."""
    return not only or any(variant.endswith(word) for word in only)


def main_gpu(runs, only=None):
    import torch

    cfg, rows = LLAMA3_8B, []
    weights = make_weights(cfg, device="cuda")
    block = _Block(cfg, weights)
    ref_block = DecoderBlock(cfg, {n: w.float() for n, w in weights.items()})
    for b, s in SHAPES:
        torch.manual_seed(0)
        x = torch.randn(b, s, cfg.hidden, device="cuda", dtype=torch.bfloat16)
        cos, sin = rope_tables(cfg, s, device="cuda")
        args = (x, cos, sin)
        with torch.no_grad():
            ref = ref_block(x.float(), cos.float(), sin.float())
            makers = {f"torch {way}": (lambda way=way: _torch_runner(torch, way, block, args))
                      for way in ("eager", "compile", "compile + tvm_tirx ops")}
            rargs = [*args, *(weights[n] for n in WEIGHTS)]
            makers |= {f"Relax: {way}": (lambda way=way: _relax_runner(torch, way, rargs))
                       for way in ("tvm", "cublas", "tvm_tirx")}
            checked = {name: _checked(make, ref) for name, make in makers.items() if _wanted(name, only)}
            times = _interleaved({name: fn for name, (fn, _) in checked.items() if fn is not None}, runs)
            for name, (fn, cell) in checked.items():
                ms = times.get(name)
                rows.append([f"{b} x {s}", name, f"{ms:.3f}" if ms else "-",
                             f"{b * s / ms * 1e3:,.0f}" if ms else "-", cell])
                print(rows[-1], flush=True)
        del x
    print(f"Llama-3-8B decoder block (bf16), median of {runs} interleaved rounds (CUDA events)")
    print(table(["batch x seq", "variant", "ms / block", "tokens / s", "max rel. err"], rows))


def _idle(prof, calls: int = 5) -> str:
    """The GPU's idle time between consecutive kernels of the profiled calls (ms per call)
    and the three kernels most often started late (the gap before them, ms per call)."""
    kernels = sorted((e for e in prof.events() if e.device_type.name == "CUDA" and e.time_range.elapsed_us() > 0),
                     key=lambda e: e.time_range.start)
    gaps = {}
    for before, after in zip(kernels, kernels[1:]):
        gap = max(0.0, after.time_range.start - before.time_range.end) / 1e3 / calls
        if gap < 0.5:  # between the calls the host synchronizes: not counted
            gaps[after.name[:40]] = gaps.get(after.name[:40], 0.0) + gap
    worst = sorted(gaps.items(), key=lambda kv: -kv[1])[:3]
    return (f"idle between kernels {sum(gaps.values()):.3f} ms per call (before "
            + ", ".join(f"{k} {v:.3f}" for k, v in worst) + ")")


def profile_gpu(top: int = 20):
    """Print, per shape, the ``top`` kernels of ``torch.compile``, ``torch.compile`` with
    our ops and the Relax block with our offload by total GPU time over 5 calls
    (torch.profiler, whose CUPTI trace sees the Relax VM's launches too; ms per call)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    cfg = LLAMA3_8B
    weights = make_weights(cfg, device="cuda")
    block = _Block(cfg, weights)
    for b, s in SHAPES:
        x = torch.randn(b, s, cfg.hidden, device="cuda", dtype=torch.bfloat16)
        args = (x, *rope_tables(cfg, s, device="cuda"))
        runners = {f"torch {way}": (lambda way=way: _torch_runner(torch, way, block, args))
                   for way in ("compile", "compile + tvm_tirx ops")}
        runners["Relax: tvm_tirx"] = lambda: _relax_runner(torch, "tvm_tirx", [*args, *(weights[n] for n in WEIGHTS)])
        for way, make in runners.items():
            fn = make()
            with torch.no_grad():
                for _ in range(3):
                    fn()
                torch.cuda.synchronize()
                with profile(activities=[ProfilerActivity.CUDA]) as prof:
                    for _ in range(5):
                        fn()
                    torch.cuda.synchronize()
            rows = [(e.key, e.device_time_total / 5e3, e.count // 5) for e in prof.key_averages()]
            rows = sorted((r for r in rows if r[1] > 0), key=lambda r: -r[1])
            print(f"\n{b} x {s}, {way}: {sum(r[1] for r in rows):.3f} ms of kernels per call; {_idle(prof)}")
            print(table(["kernel", "ms / call", "calls"], [[k[:90], f"{ms:.3f}", n] for k, ms, n in rows[:top]]))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpu", action="store_true", help="build the Relax variants for sm_90a only")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--profile", action="store_true", help="the torch.compile variants' kernels by GPU time")
    parser.add_argument("--only", nargs="*", default=None, help="time the variants whose name ends with one of these")
    args = parser.parse_args(argv)
    if args.profile and testing.has_cuda():
        profile_gpu()
        return 0
    if args.cpu or not testing.has_cuda():
        for way in ("tvm", "cublas", "tvm_tirx"):
            try:
                build_relax(way)
                print(f"Relax block, {way}: built for sm_90a")
            except Exception as e:  # pylint: disable=broad-except
                print(f"Relax block, {way}: {type(e).__name__}: {str(e).splitlines()[0][:100] if str(e) else ''}")
        return 0
    main_gpu(args.runs, args.only)
    return 0


if __name__ == "__main__":
    sys.exit(main())
