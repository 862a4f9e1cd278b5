"""Compile-time benchmark: where tvm_tirx spends its time, against hand-written T.ptx kernels.

For each kernel: parsing (TVMScript -> PrimFunc), LowerTileApply, the rest of
apache-tvm's "tirx" pipeline, and CUDA codegen (no nvcc/nvrtc: the CUDA
compile callback is stubbed), median of N runs; and the same kernel written
by hand with plain ``T.ptx`` calls, compiled the same way, as the baseline.
Then a synthetic kernel with R repeats in one call, for R = 2^4 ... 2^13:
lowering time per R.

    python bench/compile_time.py            # everything (the default N=20)
    python bench/compile_time.py --cpu      # same: nothing here needs a GPU
"""

from __future__ import annotations

import os
import sys

# bench/ holds copy.py, which would shadow the standard library's copy module:
# import the helpers as the package `bench`, from the repository root.
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:] = [_ROOT] + [p for p in sys.path if os.path.abspath(p or ".") != os.path.join(_ROOT, "bench")]

import argparse
import textwrap

import tvm
import tvm_ffi
from tvm.tirx.layout import Axis, S, TileLayout

import tvm_tirx
from tvm_tirx import testing
from tvm_tirx.script import tirx as T
from tvm_tirx.tile.lower.lower import lower_tile_apply

from bench._timing import median_wall, table  # noqa: E402

TARGET = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})


def kernel_source(f):
    """Mark ``f`` as TVMScript without parsing it yet (the parser needs a decorator)."""
    return f


kernel_source.dispatch_token = "tirx"
cta_regs = TileLayout(S[(2, 32, 3, 4) : (1 @ Axis.warpid, 1 @ Axis.laneid, 4, 1)])


@kernel_source
def read_next_row(A: T.Tensor((64, 4), "float32", align=16), B: T.Tensor((64, 4), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tid = T.cuda.thread_idx("x")
    registers = T.alloc_local((4,), "float32", layout="default")
    shared = T.alloc_shared((64, 4), "float32", align=16)
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], registers, A.sub[tid, :])
    T.cuda.tile.apply(T.ptx["st.shared.v4.b32"], shared.sub[tid, :], registers)
    T.cuda.cta_sync()
    T.cuda.tile.apply(T.ptx["ld.shared.v4.b32"], registers, shared.sub[(tid + 1) % 64, :])
    T.cuda.tile.apply(T.ptx["st.global.v4.b32"], B.sub[tid, :], registers)


@kernel_source
def read_next_row_by_hand(A: T.Buffer((64, 4), "float32", align=16), B: T.Buffer((64, 4), "float32", align=16)):
    T.device_entry()
    bx = T.cta_id([1])
    tid = T.thread_id([64])
    r = T.alloc_local((4,), "float32")
    s = T.alloc_shared((64, 4), "float32", align=16)
    T.ptx["ld.global.v4.b32"](r[0], r[1], r[2], r[3], A.ptr_to([tid, 0]))
    T.ptx["st.shared.v4.b32"](s.ptr_to([tid, 0]), r[0], r[1], r[2], r[3])
    T.cuda.cta_sync()
    T.ptx["ld.shared.v4.b32"](r[0], r[1], r[2], r[3], s.ptr_to([(tid + 1) % 64, 0]))
    T.ptx["st.global.v4.b32"](B.ptr_to([tid, 0]), r[0], r[1], r[2], r[3])


@kernel_source
def cta_twelve(A: T.Tensor((64, 12), "float32", align=16), B: T.Tensor((64, 12), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    r = T.alloc_local((2, 32, 3, 4), "float32", layout=cta_regs)
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.view(2, 32, 3, 4), scope="cta")
    T.cuda.tile.apply(T.ptx["st.global.v4.b32"], B.view(2, 32, 3, 4), r, scope="cta")


@kernel_source
def cta_twelve_by_hand(A: T.Buffer((64, 12), "float32", align=16), B: T.Buffer((64, 12), "float32", align=16)):
    T.device_entry()
    bx = T.cta_id([1])
    tid = T.thread_id([64])
    r = T.alloc_local((12,), "float32")
    for i in T.unroll(3):
        T.ptx["ld.global.v4.b32"](r[4 * i], r[4 * i + 1], r[4 * i + 2], r[4 * i + 3], A.ptr_to([tid, 4 * i]))
    for i in T.unroll(3):
        T.ptx["st.global.v4.b32"](B.ptr_to([tid, 4 * i]), r[4 * i], r[4 * i + 1], r[4 * i + 2], r[4 * i + 3])


def _synthetic(repeats: int):
    """A kernel whose one tile call has ``repeats`` repeat coordinates (built from source)."""
    src = textwrap.dedent(
        f"""
        from tvm_tirx.script import tirx as T

        def kernel_source(f):
            return f

        kernel_source.dispatch_token = "tirx"

        @kernel_source
        def synthetic(A: T.Tensor(({repeats}, 4), "float32", align=16)):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
            r = T.alloc_local(({repeats}, 4), "float32")
            T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A)
        """
    )
    import importlib.util
    import pathlib
    import tempfile

    path = pathlib.Path(tempfile.mkdtemp()) / f"synthetic_{repeats}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.synthetic


def _stub_cuda_compiler():
    """Keep nvcc/nvrtc out of the codegen timing (the GPU machine would call them)."""

    @tvm_ffi.register_global_func("tvm_callback_cuda_compile", override=True)
    def _no_compile(code, target=None):  # pylint: disable=unused-argument
        return code.encode() if isinstance(code, str) else code


def _pipeline_and_codegen(func):
    from tvm.tirx.build import split_host_device_mods, tir_to_runtime

    mod = tvm.IRModule({"main": func})
    target = TARGET.with_host(tvm.target.Target("llvm" if tvm.runtime.enabled("llvm") else "c"))
    mod = tvm.tirx.transform.BindTarget(target)(mod)
    pipeline, fin_host, fin_dev = tvm.tirx.get_tir_pipeline("tirx")

    def run_pipeline():
        m = pipeline(mod)
        host, devs = split_host_device_mods(m)
        return fin_host()(host), {t: fin_dev()(d) for t, d in devs.items()}

    def run_codegen(parts):
        host, devs = parts
        return tir_to_runtime(host, devs, target.host)

    return run_pipeline, run_codegen


def measure(pyfunc, parse, runs):
    """Seconds for (parse, LowerTileApply, rest of pipeline, codegen) of one kernel."""
    func = parse(pyfunc)
    t_parse = median_wall(lambda: parse(pyfunc), runs)
    with TARGET:
        t_lower = median_wall(lambda: lower_tile_apply(func), runs)
        lowered = lower_tile_apply(func)
    run_pipeline, run_codegen = _pipeline_and_codegen(lowered)
    with TARGET:
        t_pipe = median_wall(run_pipeline, runs)
        parts = run_pipeline()
        t_gen = median_wall(lambda: run_codegen(parts), runs)
    return t_parse, t_lower, t_pipe, t_gen


#: kernels of the cache measurement: name -> () -> PrimFunc (parsed in the child process)
CACHE_KERNELS = {
    "read_next_row": lambda: T.function(read_next_row),
    "cta_twelve": lambda: T.function(cta_twelve),
    "gemm 4096^3": lambda: __import__("bench.gemm", fromlist=["make_gemm"]).make_gemm(4096, 4096, 4096),
}


def _time_one_compile(name: str) -> None:
    """Child process: print the seconds ``tvm_tirx.compile`` takes for kernel ``name``."""
    import time  # pylint: disable=import-outside-toplevel

    func = CACHE_KERNELS[name]()
    arch = None if testing.has_cuda() else "sm_90a"
    start = time.perf_counter()
    tvm_tirx.compile(func, target="cuda", arch=arch)
    print(time.perf_counter() - start)


def cache_table(repeats: int) -> str:
    """Cold and warm-cache compile times, each in a fresh process (median of ``repeats``)."""
    import statistics  # pylint: disable=import-outside-toplevel
    import subprocess  # pylint: disable=import-outside-toplevel
    import tempfile  # pylint: disable=import-outside-toplevel

    def run(name, cache):
        env = dict(os.environ, TVM_TIRX_CACHE_DIR=cache, TVM_TIRX_CACHE="1")
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--time-compile", name],
                             env=env, capture_output=True, text=True, check=True)
        return float(out.stdout.split()[-1])

    rows = []
    for name in CACHE_KERNELS:
        cold, warm = [], []
        for _ in range(repeats):
            with tempfile.TemporaryDirectory() as cache:
                cold.append(run(name, cache))
                warm.append(run(name, cache))
        c, w = statistics.median(cold), statistics.median(warm)
        rows.append([name, f"{c * 1e3:.1f}", f"{w * 1e3:.1f}", f"{w / c:.1%}"])
    return table(["kernel", "cold ms", "warm-cache ms", "warm / cold"], rows)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpu", action="store_true", help="compile timings only (all this script does)")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--max-log2-repeats", type=int, default=13)
    parser.add_argument("--cache-repeats", type=int, default=3, help="process pairs per kernel for the cache table")
    parser.add_argument("--time-compile", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.time_compile:
        _time_one_compile(args.time_compile)
        return 0
    # before the stub below: the children compile for real (NVRTC on a GPU machine)
    cache_text = cache_table(args.cache_repeats)
    _stub_cuda_compiler()
    ms = lambda s: f"{s * 1e3:.2f}"  # noqa: E731

    rows = []
    for name, tile_fn, hand_fn in (
        ("read_next_row", read_next_row, read_next_row_by_hand),
        ("cta_twelve", cta_twelve, cta_twelve_by_hand),
    ):
        tile = measure(tile_fn, T.function, args.runs)
        hand = measure(hand_fn, T.prim_func, args.runs)
        total_t, total_h = sum(tile), sum(hand)
        rows.append([name, *map(ms, tile), ms(total_t), ms(total_h), f"{total_t / total_h:.2f}"])
    print("compile time per kernel, ms (median of %d runs)" % args.runs)
    print(
        table(
            ["kernel", "parse", "LowerTileApply", "pipeline", "codegen", "total", "hand T.ptx", "ratio"],
            rows,
        )
    )

    rows = []
    base = None
    for k in range(4, args.max_log2_repeats + 1):
        r = 1 << k
        func = T.function(_synthetic(r))
        runs = max(3, args.runs if r <= 1024 else args.runs // 4)
        t = median_wall(lambda: lower_tile_apply(func), runs)
        if r == 1024:
            base = t
        rows.append([r, ms(t), f"{t / r * 1e6:.1f}", f"{t / base:.2f}" if base else ""])
    print()
    print("LowerTileApply time vs repeats R (one ld.global.v4.b32 call)")
    print(table(["R", "lower ms", "us per repeat", "vs R=1024"], rows))
    print()
    print(f"compile cache: tvm_tirx.compile in a fresh process, cold vs warm cache (median of {args.cache_repeats})")
    print(cache_text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
