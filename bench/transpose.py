"""16384 x 16384 fp32 transpose staged through shared memory, against x.t().contiguous().

The padded kernel (:func:`make_transpose`): a CTA of ``tile x rows`` threads moves one
``tile x tile`` tile: each thread loads ``tile / rows`` elements of a tile column (rows ty,
ty + rows, ...; a warp reads 128 contiguous bytes per instruction), stores them to shared
memory, and after a barrier reads the transposed column and stores it.  The shared tile is
padded to ``tile + 1`` columns, so both the row writes and the column reads touch 32 different
banks (bank = word address mod 32; CUDA C++ Programming Guide, "Shared Memory").

The TMA kernel (:func:`make_tma_transpose`) moves *blocks* of ``sub`` 32 x 32 tiles stacked
along the rows: ``32 * sub`` rows x 32 columns of A, one TMA load (``32 * sub`` 128-byte rows,
128-byte swizzle) into a ring of ``stages`` shared buffers; the threads transpose it into one
of two 128-byte-swizzled output buffers (``sub`` boxes of 32 x 32), which one TMA store per box
writes to B (the 128-byte swizzle caps a box row at 32 floats, so an output block is ``sub``
boxes; the input block is one box of up to 256 rows).  With the swizzle, 16-byte chunk ``j`` of row ``r`` sits at chunk ``j ^ (r % 8)``;
lane ``l`` of warp ``w`` moves element ``(l, 4w + (l // 8 + q) % 4)`` of each 32 x 32 tile at
step ``q``, so a warp's 32 reads hit 32 different banks (the writes at most 2 per bank).

It is persistent: ``ctas`` CTAs walk the blocks ``t = blockIdx.x + i * ctas``; thread 0 keeps
``stages`` loads in flight (the ring's ``full`` mbarriers complete as they land).  Per block:
every thread waits for ``full[s]``, transposes ``src[s]`` into ``dst[i % 2]``, and fences its
writes for the TMA (``fence.proxy.async.shared::cta``); thread 0 waits until the store of the
previous block has read ``dst[(i - 1) % 2]`` (``cp.async.bulk.wait_group.read 0``: that buffer is
written next); one CTA barrier; thread 0 stores ``dst[i % 2]`` and loads block ``t + stages * ctas``
into the now-free ``src[s]``.  Blocks are rastered in groups of ``group`` block rows (block
column-major inside a group), so that the blocks in flight at once read and write runs of
several KiB of each row of A and of B instead of 128 bytes of many rows.  ``ctas=None``
launches one CTA per block (no loop), as the first version did.

    python bench/transpose.py          # on a GPU: check and time DEFAULTS and the peers
    python bench/transpose.py --sweep  # on a GPU: the grid, then group sizes for its best
    python bench/transpose.py --cpu    # no GPU: compile and assemble each kind of variant
"""

from __future__ import annotations

import os
import sys

# bench/ holds copy.py, which would shadow the standard library's copy module:
# import the helpers as the package `bench`, from the repository root.
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:] = [_ROOT] + [p for p in sys.path if os.path.abspath(p or ".") != os.path.join(_ROOT, "bench")]

import argparse
import dataclasses

import tvm_tirx
from tvm_tirx import testing
from tvm_tirx.script import tirx as T
from tvm_tirx.tile.families.tma import swizzled_layout

from bench._compile import assemble_each, compile_all  # noqa: E402
from bench._timing import table  # noqa: E402

N = 16384
TILE = 32
ROWS = 8  # threads along y; each thread moves TILE / ROWS elements
H200_SMS = 132
#: CUDA C++ Programming Guide, "Compute Capability 9.0": 228 KB per SM, 227 KB at most per
#: block, 1 KB reserved per resident block, 2048 threads per SM.
SM_SMEM, CTA_RESERVED, MAX_CTA_SMEM, SM_THREADS = 228 * 1024, 1024, 227 * 1024, 2048


def make_transpose(n: int = N, pad: int = 1, tile: int = TILE, rows: int = ROWS):
    """Transpose of an ``n x n`` float32 matrix by ``tile x tile`` tiles (``tile`` a multiple
    of 32 dividing ``n``), ``rows`` threads along y, ``pad`` extra shared columns per row."""
    tiles = n // tile
    per_thread = tile // rows

    @T.function
    def transpose(A: T.Tensor((n, n), "float32", align=16), B: T.Tensor((n, n), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=(tiles, tiles), block=(tile, rows)))
        tx = T.cuda.thread_idx("x")
        ty = T.cuda.thread_idx("y")
        bx = T.cuda.block_idx("x")
        by = T.cuda.block_idx("y")
        smem = T.alloc_shared((tile, tile + pad), "float32", align=16)
        sub = smem.sub[:, 0:tile]
        r = T.alloc_local((per_thread, 1), "float32")
        a = A.view(tiles, tile, tiles, tile).sub[by, :, bx, :]
        b = B.view(tiles, tile, tiles, tile).sub[bx, :, by, :]
        T.cuda.tile.apply(T.ptx["ld.global.f32"], r, a.sub[ty::rows, tx : tx + 1])
        T.cuda.tile.apply(T.ptx["st.shared.f32"], sub.sub[ty::rows, tx : tx + 1], r)
        T.cuda.cta_sync()
        T.cuda.tile.apply(T.ptx["ld.shared.f32"], r, sub.sub[tx, :].sub[ty::rows].view(per_thread, 1))
        T.cuda.tile.apply(T.ptx["st.global.f32"], b.sub[ty::rows, tx : tx + 1], r)

    return transpose


TMA_LOAD = "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
TMA_STORE = "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group"
THREADS = 256  # 8 warps: warp w moves columns 4w .. 4w + 3 of each 32 x 32 tile


def tma_smem_bytes(sub: int, stages: int) -> int:
    """Dynamic shared memory of one TMA-transpose CTA: ``stages`` input and 2 output blocks of
    ``sub`` 4 KiB tiles, the mbarriers, and 1 KiB for the 1024-byte alignment."""
    return (stages + 2) * sub * TILE * TILE * 4 + 8 * stages + 1024


def _block_origin(t, group: int, block_cols: int, sub: int):
    """``(row, col)`` of A where block ``t`` starts: groups of ``group`` block rows, block
    column-major inside a group (called while the kernel is parsed: PrimExprs)."""
    per_group = group * block_cols
    inner = t % per_group
    return ((t // per_group) * group + inner % group) * (TILE * sub), (inner // group) * TILE


def _check_tma_transpose(n: int, sub: int, stages: int, group: int) -> int:
    """The shared memory of one CTA (bytes) of a :func:`make_tma_transpose` configuration.

    Raises
    ------
    ValueError
        ``n`` is not a multiple of ``32 * sub``, ``sub`` is not in 1..8 (a box has at most 256
        rows), ``group`` does not divide the block rows, or the buffers exceed 227 KiB.
    """
    if not 1 <= sub <= 8 or n % (TILE * sub) or stages < 1:
        raise ValueError(f"n={n}, sub={sub}, stages={stages}: need sub in 1..8 dividing n / 32 and stages >= 1")
    if (n // (TILE * sub)) % group:
        raise ValueError(f"group={group} does not divide the {n // (TILE * sub)} block rows")
    smem = tma_smem_bytes(sub, stages)
    if smem > MAX_CTA_SMEM:
        raise ValueError(f"{smem} bytes of shared memory per CTA; at most {MAX_CTA_SMEM}")
    return smem


def make_tma_transpose(n: int = N, sub: int = 1, stages: int = 1, ctas: int | None = None, group: int = 1):
    """Transpose of an ``n x n`` float32 matrix, TMA in and out through 128-byte-swizzled
    blocks of ``sub`` 32 x 32 tiles (see the module); ``ctas=None``: one CTA per block.

    Raises
    ------
    ValueError
        As :func:`_check_tma_transpose`.
    """
    smem = _check_tma_transpose(n, sub, stages, group)
    block_rows, block_cols = n // (TILE * sub), n // TILE
    blocks = block_rows * block_cols
    grid = ctas or blocks
    rounds = (blocks + grid - 1) // grid
    block_bytes = sub * TILE * TILE * 4
    src_layout = swizzled_layout((stages, TILE * sub, TILE), "float32", 3)
    dst_layout = swizzled_layout((2, sub, TILE, TILE), "float32", 3)
    origin = lambda t: _block_origin(t, group, block_cols, sub)  # noqa: E731

    @T.function
    def tma_transpose(A: T.Tensor((n, n), "float32", align=16), B: T.Tensor((n, n), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=grid, block=THREADS, dynamic_smem_bytes=smem))
        src = T.alloc_shared((stages, TILE * sub, TILE), "float32", scope="shared.dyn", align=1024, layout=src_layout)
        dst = T.alloc_shared((2, sub, TILE, TILE), "float32", scope="shared.dyn", align=1024, layout=dst_layout)
        full = T.alloc_shared((stages, 1), "uint64", scope="shared.dyn", align=8)
        tid = T.cuda.thread_idx("x")
        bx = T.cuda.block_idx("x")
        lane = tid % 32
        w = tid // 32
        if tid == 0:
            T.cuda.tile.apply(T.ptx["mbarrier.init.shared::cta.b64"], full, count=T.uint32(1))
            T.ptx["fence.mbarrier_init.release.cluster"]()
            for k in T.unroll(stages):  # the ring's first loads
                if bx + k * grid < blocks:
                    T.cuda.tile.apply(T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"], full.sub[k, :], tx=T.uint32(block_bytes))
                    T.cuda.tile.apply(T.ptx[TMA_LOAD], src.sub[k], A, mbar=full.sub[k, :], coords=origin(bx + k * grid), swizzle=3)
        T.cuda.cta_sync()
        for i in T.serial(rounds):
            t = bx + i * grid
            s = i % stages
            if t < blocks:
                T.cuda.mbarrier_wait_phase(full.sub[s, :], (i // stages) % 2)
                for j in T.unroll(sub):
                    for q in T.unroll(4):
                        c = 4 * w + (lane // 8 + q) % 4
                        dst[i % 2, j, c, lane] = src[s, TILE * j + lane, c]
                T.ptx["fence.proxy.async.shared::cta"]()  # thread writes -> visible to the TMA store
                if tid == 0:
                    T.ptx["cp.async.bulk.wait_group.read"](0)  # the previous store has read dst[(i - 1) % 2]
                T.cuda.cta_sync()
                if tid == 0:
                    row, col = origin(t)
                    T.cuda.tile.apply(T.ptx[TMA_STORE], B, dst.sub[i % 2], coords=(col, row), coord_steps=((0, TILE),), swizzle=3)
                    T.ptx["cp.async.bulk.commit_group"]()
                    if t + stages * grid < blocks:  # every thread has read src[s]: refill it
                        T.cuda.tile.apply(T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"], full.sub[s, :], tx=T.uint32(block_bytes))
                        T.cuda.tile.apply(T.ptx[TMA_LOAD], src.sub[s], A, mbar=full.sub[s, :], coords=origin(t + stages * grid), swizzle=3)
        if tid == 0:
            T.ptx["cp.async.bulk.wait_group"](0)

    return tma_transpose


# -- configurations -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class TmaConfig:
    """One TMA-transpose variant: ``sub`` tiles per block, ``stages`` input buffers,
    ``ctas_per_sm`` (0: one CTA per block, not persistent), ``group`` block rows per raster group."""

    sub: int = 2
    stages: int = 4
    ctas_per_sm: int = 4
    group: int = 8

    def resident(self) -> bool:
        """Whether ``ctas_per_sm`` CTAs fit one SM (shared memory and threads)."""
        k = max(self.ctas_per_sm, 1)
        return k * (tma_smem_bytes(self.sub, self.stages) + CTA_RESERVED) <= SM_SMEM and k * THREADS <= SM_THREADS

    def name(self) -> str:
        """``TMA sub x stages, CTAs/SM, group``."""
        grid = f"c{self.ctas_per_sm}" if self.ctas_per_sm else "1 block/CTA"
        return f"TMA {self.sub}x32x32 st{self.stages} {grid} g{self.group}"

    def make(self, n: int = N, sms: int = H200_SMS):
        """The kernel for an ``n x n`` matrix on ``sms`` SMs."""
        ctas = self.ctas_per_sm * sms if self.ctas_per_sm else None
        return make_tma_transpose(n, self.sub, self.stages, ctas, self.group)


@dataclasses.dataclass(frozen=True)
class PaddedConfig:
    """One padded-shared-memory variant: ``tile x tile`` tiles, ``rows`` threads along y."""

    tile: int = TILE
    rows: int = ROWS

    def name(self) -> str:
        return f"padded {self.tile}x{self.tile} rows{self.rows}"

    def make(self, n: int = N, sms: int = H200_SMS):  # noqa: ARG002  (same signature as TmaConfig.make)
        return make_transpose(n, 1, self.tile, self.rows)


Tc = TmaConfig
#: The first TMA version (0.89x of our copy on the H200): one 32 x 32 tile per CTA.
TMA_FIRST = Tc(1, 1, 0, 1)
#: The default run: the sweep's fastest on the H200 (padded 64x64: 1.044x our copy; TMA 4 sub-tiles, 3 stages,
#: 2 CTAs/SM, group 1: 0.965x), the first TMA kernel and the padded 32x32 one.
DEFAULTS = [PaddedConfig(64, 8), Tc(4, 3, 2, 1), Tc(2, 4, 4, 1), PaddedConfig(), TMA_FIRST]
#: The sweep's first grid.
GRID = [
    PaddedConfig(), PaddedConfig(32, 4), PaddedConfig(64, 8), PaddedConfig(64, 16), TMA_FIRST,
    Tc(1, 4, 8, 1), Tc(1, 4, 8, 8), Tc(1, 6, 6, 8), Tc(2, 4, 4, 1), Tc(2, 4, 4, 8), Tc(2, 3, 4, 8), Tc(2, 6, 3, 8),
    Tc(4, 3, 2, 8), Tc(4, 4, 2, 8), Tc(4, 2, 3, 8), Tc(8, 2, 1, 8), Tc(8, 4, 1, 8),
]  # fmt: skip


def refinements(config: TmaConfig) -> list:
    """The second sweep round for one of the best TMA shapes: other raster groups."""
    return [dataclasses.replace(config, group=g) for g in (1, 4, 16, 32) if g != config.group]


def cpu_variants() -> list:
    """One configuration per code path, for ``--cpu``."""
    return [*DEFAULTS, PaddedConfig(64, 16), Tc(8, 2, 1, 1)]


# -- running --------------------------------------------------------------------------------------


def build(kind: str, n: int, sms: int, **fields):
    """The kernel of a configuration (module-level: :func:`tvm_tirx.testing.sweep`'s workers run it)."""
    return (TmaConfig if kind == "tma" else PaddedConfig)(**fields).make(n, sms)


def compile_configs(configs, n: int, sms: int, arch=None, workers=None) -> list:
    """The compiled kernels of ``configs`` (in parallel worker processes unless ``workers=0``).

    Raises
    ------
    RuntimeError
        A configuration failed to compile (its error text).
    """
    params = [{"kind": "tma" if isinstance(c, TmaConfig) else "padded", "n": n, "sms": sms, **dataclasses.asdict(c)} for c in configs]
    return compile_all(build, params, [c.name() for c in configs], "transpose", arch=arch, workers=workers)


def assemble_all() -> int:
    """``--cpu``: compile and assemble :func:`cpu_variants` for sm_90a."""
    configs = cpu_variants()
    kernels = compile_configs(configs, N, H200_SMS, arch="sm_90a", workers=0)
    cubins = assemble_each(kernels)
    for config, cubin in zip(configs, cubins):
        print(f"transpose [{config.name()}] {N}x{N}: assembled for sm_90a ({len(cubin)} bytes)")
    return 0


def measure(torch, configs, runs: int, sms: int, peers: bool = True) -> list:
    """``[(name, ms)]``: the peers (torch's copy_ and .t().contiguous(), our ld/st copy) and
    each configuration, checked equal to ``x.t()`` first."""
    from bench.copy import make_copy  # pylint: disable=import-outside-toplevel  (the copy ceiling)

    x = torch.randn(N, N, device="cuda")
    y = torch.empty_like(x)
    kernels = compile_configs(configs, N, sms)
    results = []
    if peers:
        copy_kernel = tvm_tirx.compile(make_copy(N * N, 4, 1024, "ld.global.v4.b32", "st.global.v4.b32"), target="cuda")
        flat_x, flat_y = x.view(-1), y.view(-1)
        results.append(("torch copy_", testing.do_bench(lambda: y.copy_(x), runs=runs).median))
        results.append(("torch x.t().contiguous()", testing.do_bench(lambda: x.t().contiguous(), runs=runs).median))
        results.append(("tile copy (ceiling)", testing.do_bench(lambda: copy_kernel(flat_x, flat_y), runs=runs).median))
    for config, kernel in zip(configs, kernels):
        y.zero_()
        kernel(x, y)
        torch.cuda.synchronize()
        assert torch.equal(y, x.t()), f"transpose [{config.name()}] is wrong"
        results.append((config.name(), testing.do_bench(lambda k=kernel: k(x, y), runs=runs).median))
    del x, y
    torch.cuda.empty_cache()
    return results


def _table(results) -> str:
    ms_of = dict(results)
    torch_ms, copy_ms = ms_of["torch x.t().contiguous()"], ms_of["tile copy (ceiling)"]
    gbs = lambda ms: 2 * N * N * 4 / (ms * 1e-3) / 1e9  # noqa: E731
    rows = [[name, f"{ms:.3f}", f"{gbs(ms):.0f}", f"{torch_ms / ms:.2f}", f"{copy_ms / ms:.3f}"] for name, ms in results]
    return table(["kernel", "ms", "GB/s", "x torch .t()", "x copy"], rows)


def sweep(torch, runs: int, sms: int, keep: int = 3) -> None:
    """The grid, then other raster groups for its ``keep`` best TMA variants."""
    first = measure(torch, GRID, runs, sms)
    by_name = {c.name(): c for c in GRID if isinstance(c, TmaConfig)}
    best = [by_name[name] for name, _ in sorted((r for r in first if r[0] in by_name), key=lambda r: r[1])[:keep]]
    second = measure(torch, [r for c in best for r in refinements(c)], runs, sms, peers=False)
    print(f"{N}x{N} fp32 transpose sweep on {sms} SMs, median of {runs} runs (CUDA events)")
    print(_table(first + second))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpu", action="store_true", help="compile and assemble each kind of variant")
    parser.add_argument("--sweep", action="store_true", help="time the grid, then raster groups for its best")
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args(argv)
    for config in {*DEFAULTS, *GRID}:
        assert not isinstance(config, TmaConfig) or config.resident(), f"{config.name()} does not fit one SM"
    if args.cpu or not testing.has_cuda():
        return assemble_all()

    import torch

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    if args.sweep:
        sweep(torch, args.runs, sms)
        return 0
    print(f"{N}x{N} fp32 transpose on {sms} SMs, median of {args.runs} runs (CUDA events)")
    print(_table(measure(torch, DEFAULTS, args.runs, sms)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
