"""Split-K in the tile kernel (``make_gemm(splits=...)``, ``kernels/parts/split_k.py``) and the
planner's choice of it (``planner.choose_split``).

CPU: the options split-K refuses; the name and launch (a 2-d grid, the split as
``blockIdx.y``); the kernel compiles and assembles with bf16 and float32 output and ragged
sizes, each CTA loads only its split's K tiles, stores every accumulator into its slab once
and the last CTA reads every slab back and adds all but the first in order (a group of
reads before its adds) before the one epilogue store; a kernel without splits has none of it; the planner splits only where the
wave model says so, never a fused product or the Relax offload's.
GPU (marker ``gpu``): against the fp32 product into NaN-filled outputs with a NaN-filled
``Partial``, odd m, n and k, a run-time m past one row tile; repeated launches bitwise
equal and the counters left zero; ``ops.linear`` on the route against ``F.linear``.
"""

import re

import pytest

import tvm_tirx
from tvm_tirx import testing
from tvm_tirx.kernels.gemm import GemmSpec, make_gemm, planner
from tvm_tirx.kernels.gemm.planner import choose_gemm, choose_split
from tvm_tirx.kernels.gemm.tiles import choose_tile
from tvm_tirx.kernels.parts import split_k
from tvm_tirx.script import tirx as T


def _body(source: str) -> str:
    return source[source.index("__global__"):]


def _calls(source: str, name: str) -> int:
    return len(re.findall(rf"\b\w*{name}\w*\(", _body(source)))


def gather_order(source: str) -> str:
    """The slab reads (``L``, one per ``ld``, scalar or ``.v2``) and adds (``A``, one per
    register) of the kernel, in the order it issues them."""
    calls = re.findall(r"\b\w*(?:ld_(?:vec_)?relaxed_gpu_global_(?:v2_)?f32|add_rn_f32)\w*\(", _body(source))
    return "".join("L" if "ld_" in call else "A" for call in calls)


def expected_gather(registers: int, splits: int, width: int = 1) -> str:
    """Slab 0 read into the registers, then each further slab read and added a group of
    ``4 * split_k.GROUP`` registers at a time (every read of a group before its adds), with
    ``width`` registers per read."""
    group = 4 * split_k.GROUP
    spans = [min(group, registers - start) for start in range(0, registers, group)]
    return "L" * (registers // width) + "".join("L" * (size // width) + "A" * size for size in spans) * (splits - 1)


def slab_accesses(source: str) -> list:
    """The kernel's statements that store into or load from ``Partial``: ``(callee, the
    statement)``."""
    statements = [st.strip() for st in _body(source).split(";") if "Partial_ptr[" in st]
    return [(re.search(r"(\w+)\(", st).group(1), st) for st in statements]


# -- CPU: options --------------------------------------------------------------------------------

@pytest.mark.parametrize("options,match", [
    (dict(splits=0), "splits must be a positive int"),
    (dict(splits=2, bias="float32"), r"splits=2 needs .* no fused epilogue, .* fused \['bias'\]"),
    (dict(splits=2, residual=True), r"fused \['residual'\]"),
    (dict(splits=2, persistent=True), "persistent=False"),
    (dict(splits=2, block_m=256, block_n=128), "block_m=128"),
    (dict(splits=2, cluster=2), "cluster=1"),
    (dict(splits=5), "leave no split without one"),  # 4 K tiles of 64: splits of 1 leave the fifth empty
])
def test_what_split_k_refuses(options, match):
    with pytest.raises(ValueError, match=match):
        make_gemm(T.dynamic("m"), 256, 256, **{"block_n": 128, "persistent": False, **options})


def test_split_k_needs_a_static_k():
    with pytest.raises(ValueError, match="needs a static k"):
        make_gemm(T.dynamic("m"), 256, T.dynamic("k"), block_n=128, splits=2, persistent=False)


def test_the_name_shows_the_splits_and_the_launch_puts_them_on_y():
    assert GemmSpec(1000, 1024, block_n=128, splits=2).name == "tvm_tirx_gemm_n1000_k1024_bf16_bf16_bn128_split2"
    assert "split" not in GemmSpec(1000, 1024, block_n=128).name
    cfg = GemmSpec(1000, 1024, block_n=128, splits=2).config(300)
    assert cfg.launch_grid == (cfg.n_tiles, 2) and cfg.split_tiles == 8 and cfg.k_tiles == 16
    assert GemmSpec(1000, 1024, block_n=128).config(300).launch_grid == cfg.n_tiles


# -- CPU: what the kernel issues -----------------------------------------------------------------

SPLIT_CASES = [  # (n, k, block_n, splits, out_dtype)
    (1000, 1000, 128, 2, "bfloat16"),  # ragged n and k: the last split's tail zero-filled
    (4096, 4096, 128, 4, "float32"),
    (1000, 1024, 64, 3, "bfloat16"),  # 16 K tiles in splits of 6: 6, 6, 4
]


@pytest.mark.parametrize("n,k,block_n,splits,out_dtype", SPLIT_CASES)
def test_the_split_kernel_assembles_and_meets_in_slabs(n, k, block_n, splits, out_dtype):
    if not testing.has_nvcc():
        pytest.skip("compiles for sm_90a: needs nvcc on the PATH")
    spec = GemmSpec(n, k, out_dtype=out_dtype, block_n=block_n, splits=splits)
    kernel = tvm_tirx.compile(spec.prim_func(), target="cuda", arch="sm_90a")
    assert len(testing.assemble(kernel)) > 0
    source = kernel.cuda_source
    per_thread = block_n // 2  # accumulators of a consumer thread (64 rows x block_n)
    assert "blockIdx.y" in _body(source) and _calls(source, "red_global") == 0
    # each thread stores each accumulator into its slab once; the last CTA reads slab 0 into
    # them and adds each other slab in order; one count; then the epilogue's own stores
    # (n even: a thread's register pairs lie side by side in C's rows, so they move as .v2)
    assert gather_order(source) == expected_gather(per_thread, splits, width=2)
    assert _calls(source, "atom_global_inc_u32") == 1
    # every slab access is one predicated instruction (PTX @p: no branch around it), under
    # row < m and col + 1 < n
    accesses = slab_accesses(source)
    stores = [name for name, _ in accesses if "st_vec_global_v2_f32_pred" in name]
    assert len(stores) == per_thread // 2 and len(accesses) == per_thread // 2 * (1 + splits)
    assert all(name.endswith(("_pred", "_pred_undef")) and re.search(rf"&& \(col_ptr_?\d*\[0\] < {n - 1}\)\)\)$", st)
               for name, st in accesses)
    if out_dtype == "bfloat16":  # the last CTA's stores of C: predicated too (GuardedStore(predicated=True))
        assert _calls(source, "st_global_b32_pred") == _calls(source, "st_global_b32") == per_thread // 2
    # split j's K tiles start at j * split_tiles: the TMA's K coordinate holds blockIdx.y
    tiles = -(-(-(-k // 64)) // splits)
    assert f"((int)blockIdx.y) * {tiles * 64}" in source or f"((int)blockIdx.y) * {tiles}" in source


def test_a_kernel_without_splits_has_no_reduction():
    if not testing.has_nvcc():
        pytest.skip("compiles for sm_90a: needs nvcc on the PATH")
    kernel = tvm_tirx.compile(GemmSpec(1000, 1000, block_n=128).prim_func(), target="cuda", arch="sm_90a")
    source = kernel.cuda_source
    assert "Partial" not in source and "blockIdx.y" not in _body(source)
    assert _calls(source, "atom_global_inc_u32") == 0 and _calls(source, "ld_relaxed_gpu_global_f32") == 0


# -- CPU: the planner ----------------------------------------------------------------------------


def test_the_planner_splits_where_waves_are_short():
    # 100 x 4096 x 4096: 64 tiles of 128 x 64 on 132 SMs; 4 splits of 128 x 128 tiles make 128 CTAs
    assert choose_split(100, 4096, 4096, choose_tile(100, 4096)) == {"block_n": 128, "stages": 6, "splits": 4}
    # 1000^3: 128 x 64 tiles fill the SMs already, at 0.55 of the wide tile's rate: 2 splits of 128 x 128
    assert choose_split(1000, 1000, 1000, choose_tile(1000, 1000))["splits"] == 2
    # full waves of wide tiles, or too few K tiles to split: the tile as it was
    assert choose_split(4096, 4096, 4096, choose_tile(4096, 4096)) == choose_tile(4096, 4096)
    # 512^3: 64 tiles of 64 x 64 (tiles.ROW64_RATE) outscore 2 splits of 32 tiles of 128 x 64 (on an
    # H100, 2026-12-06: 50 against 25 TFLOP/s)
    assert choose_split(512, 512, 512, choose_tile(512, 512)) == choose_tile(512, 512) == {
        "block_n": 64, "stages": 8, "block_m": 64}
    assert choose_split(100, 4096, 256, choose_tile(100, 4096)) == choose_tile(100, 4096)


def test_every_split_the_planner_gives_is_one_the_kernel_takes():
    for m, n, k in [(100, 4096, 4096), (1000, 1000, 1000), (300, 1024, 8192), (128, 11008, 4096), (700, 700, 320)]:
        plan = choose_split(m, n, k, choose_tile(m, n))
        GemmSpec(n, k, block_n=plan["block_n"], splits=plan.get("splits", 1),
                 block_m=plan.get("block_m", 128)).config(m)  # raises if refused


def test_choose_gemm_splits_only_on_the_route_and_never_a_fused_product(monkeypatch):
    monkeypatch.setattr(planner, "SMALL_M_ROUTE", False)
    assert "splits" not in choose_gemm(100, 4096, 4096, split_k=False)
    assert choose_gemm(100, 4096, 4096, split_k=True)["splits"] == 4
    assert "splits" not in choose_gemm(100, 4096, 4096, split_k=True, fused=True)
    monkeypatch.setattr(planner, "SPLIT_K_ROUTE", True)
    assert choose_gemm(100, 4096, 4096)["splits"] == 4
    planner.override(4096, 4096, {"block_n": 64, "splits": 2})
    try:
        assert choose_gemm(100, 4096, 4096) == {"block_n": 64, "stages": 8, "splits": 2}
    finally:
        planner.clear_overrides()


def test_the_relax_offload_never_splits_k(monkeypatch):
    # the offload passes no workspaces: its tile is the model's unsplit one even on the route
    pytest.importorskip("tvm.relax")
    from tvm_tirx.ops import relax_gemm

    monkeypatch.setattr(planner, "SPLIT_K_ROUTE", True)
    monkeypatch.setattr(planner, "SMALL_M_ROUTE", False)
    match = relax_gemm.GemmMatch(x=None, b=None, transpose_b=False, batch=(100,), m=100, n=4096, k=4096,
                                 in_dtype="bfloat16", out_dtype="bfloat16")
    spec = relax_gemm.match_spec(match)
    assert spec.splits == 1 and spec.block_n == choose_tile(100, 4096)["block_n"]


# -- GPU -----------------------------------------------------------------------------------------

GPU_CASES = [  # (n, k, block_n, splits, out_dtype, rows tried)
    (4096, 4096, 128, 4, "bfloat16", (100, 128)),
    (1000, 1000, 128, 2, "bfloat16", (1000, 7)),  # ragged n and k
    (1000, 1024, 64, 3, "float32", (129, 300)),  # uneven splits: 6, 6, 4 K tiles
    (4104, 4096, 128, 2, "float32", (257,)),
]


@pytest.mark.gpu
@pytest.mark.parametrize("n,k,block_n,splits,out_dtype,rows", GPU_CASES)
def test_split_k_on_gpu(torch_cuda, n, k, block_n, splits, out_dtype, rows):
    torch = torch_cuda
    spec = GemmSpec(n, k, out_dtype=out_dtype, block_n=block_n, splits=splits)
    kernel = tvm_tirx.compile(spec.prim_func(), target="cuda")
    dtype = getattr(torch, out_dtype)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    for m in rows:
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        ref = x.float() @ w.float().t()
        partial = torch.full((m, splits * n), float("nan"), device="cuda")  # needs no initial value
        counters = torch.zeros(m, -(-n // block_n), device="cuda", dtype=torch.int32).view(torch.uint32)
        results = []
        for _ in range(2):
            c = torch.full((m, n), float("nan"), device="cuda", dtype=dtype)
            kernel(x, w, partial, counters, c)
            torch.cuda.synchronize()
            err = ((c.float() - ref).abs().max() / ref.abs().max()).item()  # NaN (unwritten) fails too
            assert err < (1e-2 if out_dtype == "bfloat16" else 1e-5), (m, err)
            results.append(c)
        assert torch.equal(results[0], results[1])  # the slabs add in one order
        assert not counters.view(torch.int32).any()


@pytest.mark.gpu
def test_linear_on_the_split_k_route_on_gpu(torch_cuda, monkeypatch):
    torch = torch_cuda
    from tvm_tirx import ops
    from tvm_tirx.ops import gemm_kernels

    monkeypatch.setattr(planner, "SPLIT_K_ROUTE", True)
    monkeypatch.setattr(planner, "SMALL_M_ROUTE", False)
    gemm_kernels.clear_kernels()
    try:
        for m in (100, 1000):
            x = torch.randn(m, 4096, device="cuda", dtype=torch.bfloat16)
            w = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16) / 64
            for _ in range(2):
                torch.testing.assert_close(ops.linear(x, w).float(), torch.nn.functional.linear(x, w).float(),
                                           rtol=2e-2, atol=2e-2)
        assert any(isinstance(key, GemmSpec) and key.splits > 1 for key in gemm_kernels.cached_kernels())
    finally:
        gemm_kernels.clear_kernels()
