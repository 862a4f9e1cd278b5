"""Device-to-device copy through a TMA pipeline, against torch.Tensor.copy_ (1 and 4 GiB fp32).

The array is viewed as rows of ``COLS`` float32; a tile is ``box_rows`` rows (``box_rows`` KiB).
A CTA holds ``pairs`` producer/consumer pairs of warps; pair ``p`` of CTA ``b`` is worker
``w = b * pairs + p`` and walks the tiles ``t = w + k * workers`` through its own ring of
``stages`` shared buffers, with a ``full`` and an ``empty`` mbarrier per buffer:

* the producer (lane 0 of the pair's first warp) waits until buffer ``s = k % stages`` is
  ``empty``, arms ``full[s]`` with the tile's bytes (``mbarrier.arrive.expect_tx``) and issues
  the load of the tile into it, completing on ``full[s]``;
* the consumer (lane 0 of the second warp) waits until ``full[s]`` completes and issues the
  store of buffer ``s`` (``.bulk_group``, one group per tile).  Then it waits until at most
  ``store_lag`` stores are still *reading* shared memory (``cp.async.bulk.wait_group.read``;
  it never waits for a store to reach global memory) and marks the buffer of the store
  ``store_lag`` tiles back ``empty``.  ``store_lag < stages``, or the ring deadlocks.

The phase of a buffer at iteration ``k`` is ``(k // stages) % 2``; the producer waits on
``empty`` for the opposite parity, which a fresh barrier reports complete, so the first round
starts at once.  The barriers are the ``mbarrier`` tile family's calls and
``T.cuda.mbarrier_wait_phase``.

What the parameters try (the 0.92x of the first version left the DRAM 80% busy: too few bytes
moving per SM; see issue 14):

* ``ctas_per_sm`` (grid ``ctas_per_sm x SMs``) and ``pairs``: more producers and consumers per
  SM, each with its own ring, so that one waiting thread does not hold the SM's copies back;
* ``box_rows`` x ``stages`` (the same shared memory in finer buffers): a buffer is recycled as
  soon as its own store has read it, so less of the ring waits on a store;
* ``store_lag``: how many stores may be reading at once before a buffer is recycled;
* ``l2_hint``: ``.L2::cache_hint`` with an ``L2::evict_first`` policy (``createpolicy``) on the
  loads (``"load"``) or on loads and stores (``"both"``): every line is touched once;
* ``l2_promotion``: the tensor map's L2 promotion (0 none .. 3 256 B);
* ``engine``: ``"tensor"`` (``cp.async.bulk.tensor.2d``, a ``box_rows x 256`` box) or ``"bulk"``
  (``cp.async.bulk``, the tile as one contiguous run, no tensor map).

A 2-D box already moves up to 256 rows x 1 KiB per instruction (the box limit is 256 per axis);
shared memory (227 KiB per CTA), not the box rank, bounds the bytes per instruction.

    python bench/tma_copy.py          # on a GPU: check and time DEFAULTS at 1 and 4 GiB
    python bench/tma_copy.py --sweep  # on a GPU: the grid at 1 GiB, then the best at 4 GiB
    python bench/tma_copy.py --cpu    # no GPU: compile and assemble each kind of variant
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

from bench._compile import assemble_each, compile_all  # noqa: E402
from bench._timing import table  # noqa: E402

COLS = 256  # the longest box row (256 elements)
#: engine -> (load, store) opcodes without the ``.L2::cache_hint`` qualifier
OPCODES = {
    "tensor": (
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes",
        "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group",
    ),
    "bulk": (
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes",
        "cp.async.bulk.global.shared::cta.bulk_group",
    ),
}
LOAD, STORE = OPCODES["tensor"]
GIB = 1 << 30
H200_SMS = 132
#: Shared memory of one SM and the part each resident CTA reserves (CUDA C++ Programming
#: Guide, "Compute Capability 9.0": 228 KB per SM, 227 KB at most per block, 1 KB per block).
SM_SMEM, CTA_RESERVED, MAX_CTA_SMEM = 228 * 1024, 1024, 227 * 1024


def _transfer(engine: str, store: bool, image, tensor, t, box_rows: int, policy=None, **params):
    """One tile's copy (called while the kernel is parsed): ``image`` is the shared buffer,
    ``tensor`` the global ``(rows, COLS)`` tensor, ``t`` the tile.  The ``"tensor"`` engine
    names the tile by its coordinates, ``"bulk"`` by a view of its contiguous run.  With a
    ``policy`` the ``.L2::cache_hint`` form takes it as ``cache_policy``."""
    opcode = OPCODES[engine][int(store)]
    if policy is not None:
        opcode, params = opcode + ".L2::cache_hint", {**params, "cache_policy": policy}
    if engine == "tensor":
        params["coords"] = (t * box_rows, 0)
        glob = tensor
    else:
        params.pop("l2_promotion", None)  # a map's field: bulk copies have no map
        glob = tensor.view(int(tensor.shape[0]) // box_rows, box_rows * COLS).sub[t, :]
    operands = (glob, image) if store else (image, glob)
    return T.cuda.tile.apply(T.ptx[opcode], *operands, **params)


def _smem_bytes(box_rows: int, stages: int, pairs: int) -> int:
    """Dynamic shared memory of one CTA: the buffers, 16 bytes of barriers per buffer, and
    1 KiB of slack for the 1024-byte alignment of the carve-out."""
    return pairs * stages * (box_rows * COLS * 4 + 16) + 1024


def _check_copy(n, box_rows, stages, pairs, store_lag, l2_hint, engine) -> int:
    """The shared memory of one CTA (bytes) of a :func:`make_tma_copy` configuration.

    Raises
    ------
    ValueError
        ``n`` does not tile, ``store_lag`` is not in ``0 .. stages - 1``, the ring does not fit
        in 227 KiB, or ``l2_hint`` / ``engine`` is unknown.
    """
    if n % COLS or (n // COLS) % box_rows:
        raise ValueError(f"n={n} is not a multiple of {COLS * box_rows}")
    if not 0 <= store_lag < stages:
        raise ValueError(f"store_lag={store_lag} must be in 0..{stages - 1} (stages - 1), or the ring deadlocks")
    smem = _smem_bytes(box_rows, stages, pairs)
    if smem > MAX_CTA_SMEM:
        raise ValueError(f"{smem} bytes of shared memory per CTA; at most {MAX_CTA_SMEM}")
    if l2_hint not in ("none", "load", "both") or engine not in OPCODES:
        raise ValueError(f"l2_hint={l2_hint!r} (none, load, both), engine={engine!r} ({', '.join(OPCODES)})")
    return smem


def make_tma_copy(n: int, box_rows: int = 32, stages: int = 4, ctas: int = H200_SMS, l2_promotion: int = 3, *,
                  store_lag: int = 1, pairs: int = 1, l2_hint: str = "none", engine: str = "tensor"):  # fmt: skip
    """A TMA copy kernel for ``n`` float32 viewed as ``(n // COLS, COLS)`` (see the module).

    ``n // COLS`` must be a multiple of ``box_rows``; ``ctas`` is the grid; the block is
    ``64 * pairs`` threads; shared memory is :func:`_smem_bytes` (a compile-time size).

    Raises
    ------
    ValueError
        As :func:`_check_copy`.
    """
    smem = _check_copy(n, box_rows, stages, pairs, store_lag, l2_hint, engine)
    rows = n // COLS
    tiles = rows // box_rows
    workers = ctas * pairs
    rounds = (tiles + workers - 1) // workers
    tile_elems = box_rows * COLS
    tile_bytes = tile_elems * 4
    image = (pairs, stages, box_rows, COLS) if engine == "tensor" else (pairs, stages, box_rows * COLS)
    hint_load, hint_store = l2_hint != "none", l2_hint == "both"

    @T.function
    def tma_copy(A: T.Tensor((rows, COLS), "float32", align=16), B: T.Tensor((rows, COLS), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=ctas, block=64 * pairs, dynamic_smem_bytes=smem))
        buf = T.alloc_shared(image, "float32", scope="shared.dyn", align=1024)
        full = T.alloc_shared((pairs, stages, 1), "uint64", scope="shared.dyn", align=8)
        empty = T.alloc_shared((pairs, stages, 1), "uint64", scope="shared.dyn", align=8)
        tid = T.cuda.thread_idx("x")
        p = tid // 64
        w = T.cuda.block_idx("x") * pairs + p
        if tid == 0:
            T.cuda.tile.apply(T.ptx["mbarrier.init.shared::cta.b64"], full, count=T.uint32(1))
            T.cuda.tile.apply(T.ptx["mbarrier.init.shared::cta.b64"], empty, count=T.uint32(1))
            T.ptx["fence.mbarrier_init.release.cluster"]()
        T.cuda.cta_sync()
        policy = T.alloc_local((1,), "uint64")
        if tid % 64 == 0:  # the pair's producer
            if hint_load:
                T.ptx["createpolicy.fractional.L2::evict_first.b64"](policy[0], T.float32(1.0))
            for k in T.serial(rounds):
                t = w + k * workers
                s = k % stages
                if t < tiles:
                    T.cuda.mbarrier_wait_phase(empty.sub[p, s, :], (k // stages + 1) % 2)
                    T.cuda.tile.apply(T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"], full.sub[p, s, :], tx=T.uint32(tile_bytes))
                    _transfer(engine, False, buf.sub[p, s], A, t, box_rows, policy[0] if hint_load else None,
                              mbar=full.sub[p, s, :], l2_promotion=l2_promotion)  # fmt: skip
        if tid % 64 == 32:  # the pair's consumer
            if hint_store:
                T.ptx["createpolicy.fractional.L2::evict_first.b64"](policy[0], T.float32(1.0))
            for k in T.serial(rounds):
                t = w + k * workers
                s = k % stages
                if t < tiles:
                    T.cuda.mbarrier_wait_phase(full.sub[p, s, :], (k // stages) % 2)
                    _transfer(engine, True, buf.sub[p, s], B, t, box_rows, policy[0] if hint_store else None, l2_promotion=l2_promotion)
                    T.ptx["cp.async.bulk.commit_group"]()
                    T.ptx["cp.async.bulk.wait_group.read"](store_lag)  # older stores have read their buffers
                    if k >= store_lag:
                        T.cuda.tile.apply(T.ptx["mbarrier.arrive.shared::cta.b64"], empty.sub[p, (k - store_lag) % stages, :])
            T.ptx["cp.async.bulk.wait_group"](0)

    return tma_copy


# -- configurations -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Config:
    """One TMA copy variant (the keyword arguments of :func:`make_tma_copy`, with the grid as
    CTAs per SM).  ``box_rows`` rows of 1 KiB per tile; shared memory per CTA is
    :func:`_smem_bytes`."""

    box_rows: int = 32
    stages: int = 4
    store_lag: int = 1
    ctas_per_sm: int = 1
    pairs: int = 1
    l2_hint: str = "none"
    l2_promotion: int = 3
    engine: str = "tensor"

    def smem(self) -> int:
        """Dynamic shared memory of one CTA, in bytes."""
        return _smem_bytes(self.box_rows, self.stages, self.pairs)

    def resident(self) -> bool:
        """Whether ``ctas_per_sm`` CTAs fit in one SM's shared memory at once."""
        return self.ctas_per_sm * (self.smem() + CTA_RESERVED) <= SM_SMEM

    def name(self) -> str:
        """A short label: box rows x stages, store lag, CTAs/SM, pairs and the options set."""
        label = f"{self.box_rows}x{self.stages} lag{self.store_lag} c{self.ctas_per_sm} p{self.pairs}"
        extras = [self.engine if self.engine != "tensor" else "", f"ef-{self.l2_hint}" if self.l2_hint != "none" else "",
                  f"promo{self.l2_promotion}" if self.l2_promotion != 3 else ""]  # fmt: skip
        return " ".join([label] + [e for e in extras if e])

    def make(self, n: int, sms: int = H200_SMS):
        """The kernel for ``n`` float32 on a GPU of ``sms`` SMs."""
        fields = dataclasses.asdict(self)
        ctas = fields.pop("ctas_per_sm") * sms
        return make_tma_copy(n, ctas=ctas, **fields)


C = Config
#: The first version (0.917x / 0.907x of copy_ on the H200), kept as the reference point.
BASELINE = C(32, 4, 1)
#: The default run: the sweep's fastest on the H200 (0.916x / 0.915x of copy_ at 1 / 4 GiB; every
#: TMA variant landed within 3.56-3.94 TB/s), a two-rings-per-CTA one, and the baseline.
DEFAULTS = [
    C(16, 12, 4, engine="bulk"),
    C(32, 3, 1, ctas_per_sm=2, engine="bulk"),
    C(8, 6, 3, pairs=4),
    BASELINE,
]
#: The sweep's first grid: ring shapes, store lags, CTAs per SM and pairs (all ~96-192 KiB/SM).
GRID = [
    BASELINE, C(32, 4, 2), C(32, 4, 3), C(32, 6, 3), C(32, 6, 5), C(64, 3, 1), C(64, 3, 2),
    C(16, 12, 4), C(16, 12, 8), C(8, 24, 8), C(8, 24, 16),
    C(32, 3, 1, ctas_per_sm=2), C(32, 3, 2, ctas_per_sm=2), C(16, 6, 3, ctas_per_sm=2), C(16, 6, 5, ctas_per_sm=2),
    C(8, 12, 6, ctas_per_sm=2), C(16, 4, 2, ctas_per_sm=3), C(8, 8, 4, ctas_per_sm=3),
    C(16, 3, 1, ctas_per_sm=4), C(8, 6, 3, ctas_per_sm=4),
    C(16, 6, 3, pairs=2), C(32, 3, 2, pairs=2), C(8, 6, 3, pairs=4), C(16, 3, 2, pairs=4), C(8, 6, 3, ctas_per_sm=2, pairs=2),
]  # fmt: skip


def refinements(config: Config) -> list:
    """The second sweep round for one of the best ring shapes: L2 hints, promotion, engine."""
    replace = dataclasses.replace
    return [
        replace(config, l2_hint="load"), replace(config, l2_hint="both"),
        replace(config, l2_promotion=0), replace(config, l2_promotion=2), replace(config, engine="bulk"),
        replace(config, engine="bulk", l2_hint="both"),
    ]  # fmt: skip


def cpu_variants() -> list:
    """One configuration per code path (every option value), for ``--cpu``."""
    return [*DEFAULTS, C(16, 3, 2, pairs=4, l2_hint="load"), C(32, 4, 0, l2_hint="both", l2_promotion=0), C(16, 6, 3, engine="bulk", l2_hint="both")]


# -- running --------------------------------------------------------------------------------------


def build(n: int, sms: int, **fields):
    """The kernel of ``Config(**fields)`` for ``n`` float32 on ``sms`` SMs (a module-level
    function, so that :func:`tvm_tirx.testing.sweep`'s worker processes can run it)."""
    return Config(**fields).make(n, sms)


def compile_configs(configs, n: int, sms: int, arch=None, workers=None) -> list:
    """The compiled kernels of ``configs`` (in parallel worker processes unless ``workers=0``).

    Raises
    ------
    RuntimeError
        A configuration failed to compile (its error text).
    """
    params = [{"n": n, "sms": sms, **dataclasses.asdict(c)} for c in configs]
    return compile_all(build, params, [c.name() for c in configs], "tma copy", arch=arch, workers=workers)


def assemble_all() -> int:
    """``--cpu``: compile and assemble :func:`cpu_variants` for sm_90a at 1 GiB."""
    configs = cpu_variants()
    kernels = compile_configs(configs, GIB // 4, H200_SMS, arch="sm_90a", workers=0)
    cubins = assemble_each(kernels)
    for config, cubin in zip(configs, cubins):
        print(f"tma copy [{config.name()}], {config.smem() // 1024} KiB smem: assembled for sm_90a ({len(cubin)} bytes)")
    return 0


def measure(torch, configs, gib: int, runs: int, sms: int) -> list:
    """Rows of the table for ``configs`` at ``gib`` GiB: torch's copy_, our ld/st copy, each
    TMA variant (checked equal to the source first).  Returns ``[(name, ms, rows)]``."""
    from bench.copy import make_copy_oneshot  # pylint: disable=import-outside-toplevel

    n = gib * GIB // 4
    x = torch.randn(n // COLS, COLS, device="cuda")
    y = torch.empty_like(x)
    oneshot = tvm_tirx.compile(make_copy_oneshot(n), target="cuda")
    calls = [lambda: oneshot(x.view(-1), y.view(-1))]  # the ld/st copy takes flat tensors
    calls += [lambda k=kernel: k(x, y) for kernel in compile_configs(configs, n, sms)]
    torch_ms = testing.do_bench(lambda: y.copy_(x), runs=runs).median
    results = [("torch copy_", torch_ms, None)]
    for label, call in zip(["ld/st copy (one-shot)"] + [c.name() for c in configs], calls):
        y.zero_()
        call()
        torch.cuda.synchronize()
        assert torch.equal(x, y), f"{label} is wrong"
        results.append((label, testing.do_bench(call, runs=runs).median, None))
    del x, y
    torch.cuda.empty_cache()
    gbs = lambda ms: 2 * n * 4 / (ms * 1e-3) / 1e9  # noqa: E731
    return [(label, ms, [f"{gib} GiB", label, f"{ms:.3f}", f"{gbs(ms):.0f}", f"{torch_ms / ms:.3f}"]) for label, ms, _ in results]


HEADERS = ["size", "kernel", "ms", "GB/s", "x copy_"]


def sweep(torch, runs: int, sms: int, keep: int = 3) -> None:
    """The grid at 1 GiB, the L2/engine refinements of its ``keep`` best, then the best
    ``keep + 1`` of both rounds (and the baseline) at 4 GiB."""
    by_name = {c.name(): c for c in GRID}
    first = measure(torch, GRID, 1, runs, sms)
    ranked = sorted((ms, name) for name, ms, _ in first if name in by_name)
    best = [by_name[name] for _, name in ranked[:keep]]
    second_configs = [r for c in best for r in refinements(c)]
    by_name.update({c.name(): c for c in second_configs})
    second = measure(torch, second_configs, 1, runs, sms)
    tma = [(ms, name) for name, ms, _ in first + second if name in by_name]
    finalists = [by_name[name] for _, name in sorted(tma)[: keep + 1]]
    final = measure(torch, ([BASELINE] if BASELINE not in finalists else []) + finalists, 4, runs, sms)
    print(f"TMA copy sweep on {sms} SMs, fp32, median of {runs} runs (CUDA events); kernel = box rows x stages, "
          "store lag, CTAs per SM, pairs per CTA, options")  # fmt: skip
    print(table(HEADERS, [row for _, _, row in first + second[2:] + final]))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpu", action="store_true", help="compile and assemble each kind of variant")
    parser.add_argument("--sweep", action="store_true", help="time the grid at 1 GiB, then the best at 4 GiB")
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args(argv)
    for config in {*DEFAULTS, *GRID}:
        assert config.resident(), f"{config.name()}: {config.ctas_per_sm} CTAs of {config.smem()} bytes do not fit one SM"
    if args.cpu or not testing.has_cuda():
        return assemble_all()

    import torch

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    if args.sweep:
        sweep(torch, args.runs, sms)
        return 0
    rows = [row for gib in (1, 4) for _, _, row in measure(torch, DEFAULTS, gib, args.runs, sms)]
    print(f"fp32 copy on {sms} SMs, median of {args.runs} runs (CUDA events); TMA kernel = box rows x stages, "
          "store lag, CTAs per SM, pairs per CTA, options")  # fmt: skip
    print(table(HEADERS, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
