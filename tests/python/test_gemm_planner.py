"""The GEMM planner (``kernels/gemm/planner.py``) is the one decision of the torch operators
and the Relax offload: an override shows in both, and ``ops.check`` shows the plan."""

import pytest

from tvm_tirx.kernels.gemm import choose_tile, planner
from tvm_tirx.kernels.gemm.planner import SmallMPlan, choose_gemm


@pytest.fixture
def overrides():
    planner.clear_overrides()
    yield planner
    planner.clear_overrides()


def test_an_override_replaces_the_model_for_its_shape_only(overrides):
    assert choose_gemm(128, 8192, 8192) == choose_tile(128, 8192)
    overrides.override(8192, 8192, {"block_n": 256})
    assert choose_gemm(128, 8192, 8192)["block_n"] == 256 and choose_gemm(9999, 8192, 8192)["block_n"] == 256
    assert choose_gemm(128, 8192, 4096) == choose_tile(128, 8192)  # another k: the model
    overrides.override(8192, 8192, SmallMPlan(16, 2, 6), m=16)  # one m only, before the (n, k) one
    assert choose_gemm(16, 8192, 8192) == SmallMPlan(16, 2, 6)
    assert choose_gemm(15, 8192, 8192)["block_n"] == 256
    overrides.clear_overrides()
    assert choose_gemm(128, 8192, 8192) == choose_tile(128, 8192)


@pytest.mark.parametrize("plan", [{"block_n": 100}, {"block_n": 264}, {"block_n": 64, "splits": 0},
                                  {"block_n": 64, "group_m": 2}, (8, 1, 8),
                                  {"block_n": 128, "block_m": 256, "splits": 2},  # split-K: 128-row tiles only
                                  {"block_n": 64, "splits": 2}])  # k = 64: one K tile, two splits
def test_an_override_the_kernels_cannot_take_is_refused(overrides, plan):
    with pytest.raises(ValueError, match="override: "):
        overrides.override(64, 64, plan)


def test_the_torch_ops_and_the_relax_offload_take_the_same_plan(overrides, torch_cpu):
    torch = torch_cpu
    from tvm_tirx import ops
    from tvm_tirx.ops import gemm_kernels, relax_gemm

    x = torch.empty(128, 512, dtype=torch.bfloat16, device="meta")
    w = torch.empty(8192, 512, dtype=torch.bfloat16, device="meta")
    match = relax_gemm.GemmMatch(None, None, False, (128,), 128, 8192, 512, "bfloat16", "bfloat16")
    model = choose_tile(128, 8192)["block_n"]
    assert [key.block_n for key in ops.check(ops.linear, x, w)] == [model]
    assert relax_gemm.tile_options(match, {}).get("block_n", 256) == model
    forced = 128 if model != 128 else 64
    overrides.override(8192, 512, {"block_n": forced})
    gemm_kernels.clear_kernels()  # plans made before the override keep theirs
    assert [key.block_n for key in ops.check(ops.linear, x, w)] == [forced]
    assert relax_gemm.tile_options(match, {})["block_n"] == forced


def test_every_tile_width_is_reachable_by_override_in_both_paths(overrides, torch_cpu):
    # a width make_gemm has but the model may not take (192 until bench/gemm.py --tiles
    # measured its rate) reaches both the operators and the Relax offload, with its ring
    torch = torch_cpu
    from tvm_tirx import ops
    from tvm_tirx.kernels.gemm import BLOCK_NS
    from tvm_tirx.kernels.gemm.config import deepest_ring
    from tvm_tirx.ops import gemm_kernels, relax_gemm

    x = torch.empty(128, 512, dtype=torch.bfloat16, device="meta")
    w = torch.empty(8192, 512, dtype=torch.bfloat16, device="meta")
    match = relax_gemm.GemmMatch(None, None, False, (128,), 128, 8192, 512, "bfloat16", "bfloat16")
    for block_n in BLOCK_NS:
        overrides.override(8192, 512, {"block_n": block_n})
        gemm_kernels.clear_kernels()
        (key,) = ops.check(ops.linear, x, w)
        assert (key.block_n, key.stages) == (block_n, deepest_ring(block_n, "bfloat16"))
        assert relax_gemm.match_spec(match) == key  # the offload's kernel is the operators'


def test_check_shows_the_small_m_plan(overrides, torch_cpu):
    torch = torch_cpu
    from tvm_tirx import ops
    from tvm_tirx.ops import gemm_kernels
    from tvm_tirx.ops.gemm_kernels import SmallMSpec

    x = torch.empty(4, 4096, dtype=torch.bfloat16, device="meta")
    w = torch.empty(4096, 4096, dtype=torch.bfloat16, device="meta")
    overrides.override(4096, 4096, SmallMPlan(8, 4, 8))
    gemm_kernels.clear_kernels()
    assert ops.check(ops.linear, x, w) == [SmallMSpec(4096, 4096, "bfloat16", "sm_90a", 8, 4, 8)]


@pytest.mark.parametrize("itemsize", [1, 2])
def test_k_padding_makes_every_padded_row_pitch_a_multiple_of_row_pitch_bytes(itemsize):
    step = 16 // itemsize  # the operators' rule: rows of a multiple of 16 bytes
    for k in range(step, 4096 + step, step):
        pad = planner.k_padding(4096, 4096, k, itemsize)
        assert ((k + pad) * itemsize) % planner.ROW_PITCH_BYTES == 0
        assert 0 <= pad * itemsize < planner.ROW_PITCH_BYTES  # the fewest columns that do it


def test_k_padding_only_where_the_copy_pays():
    assert planner.k_padding(5000, 5000, 5000, 2) == (-10000 % planner.ROW_PITCH_BYTES) // 2 > 0
    assert planner.k_padding(1000, 1000, 1000, 2) == 0  # 1000 * 1000 / 2000 = 500 < PAD_MIN_ROWS
    assert planner.k_padding(64, 4096, 4104, 2) == 0  # decode: the small-M kernel's, and too few rows
    edge = planner.PAD_MIN_ROWS * 2
    assert planner.k_padding(edge, edge, 1000, 2) > 0 and planner.k_padding(edge - 1, edge, 1000, 2) == 0
    with pytest.raises(ValueError, match="itemsize"):
        planner.k_padding(8, 8, 8, 0)


def test_the_operators_pad_k_and_check_shows_the_padded_kernel(torch_cpu):
    torch = torch_cpu
    from tvm_tirx import ops

    x = torch.empty(5000, 5000, dtype=torch.bfloat16, device="meta")
    w = torch.empty(4096, 5000, dtype=torch.bfloat16, device="meta")
    (key,) = ops.check(ops.linear, x, w)
    assert key.k == 5000 + planner.k_padding(5000, 4096, 5000, 2) > 5000 and key.n == 4096
    (key,) = ops.check(ops.linear, x, w.t().contiguous().t())  # B stored N-major: its rows are not K's
    assert key.k == 5000


def test_an_override_of_the_callers_k_serves_the_padded_call_as_in_relax(torch_cpu):
    torch = torch_cpu
    from tvm_tirx import ops
    from tvm_tirx.ops import gemm_kernels

    x = torch.empty(5000, 5000, dtype=torch.bfloat16, device="meta")
    w = torch.empty(4096, 5000, dtype=torch.bfloat16, device="meta")
    (unforced,) = ops.check(ops.linear, x, w)
    other = 64 if unforced.block_n != 64 else 128
    planner.override(4096, 5000, {"block_n": other})  # the k the user's tensors have
    try:
        (key,) = ops.check(ops.linear, x, w)
        assert key.k > 5000 and key.block_n == other  # the padded kernel, with the override's tile
        # the Relax offload asks the planner with the same k (relax_gemm.tile_options)
        assert planner.choose_gemm(5000, 4096, 5000, small_m=False, split_k=False)["block_n"] == other
        # a small-M override of the padded k is not the caller's: the tile kernel keeps the call
        planner.clear_overrides()
        planner.override(4096, key.k, planner.SmallMPlan(64, 1, 4))
        gemm_kernels.clear_kernels()
        (key,) = ops.check(ops.linear, x, w)
        assert not isinstance(key, gemm_kernels.SmallMSpec) and key.k > 5000
    finally:
        planner.clear_overrides()
        gemm_kernels.clear_kernels()


def test_a_padded_plan_appends_zero_columns_to_copies_and_runs_its_inner_plan(torch_cpu):
    torch = torch_cpu
    from tvm_tirx.ops.gemm_plans import PaddedK

    seen = []
    plan = PaddedK(8, lambda *args: seen.append(args) or "out")
    x, w = torch.randn(2, 3, 40), torch.randn(5, 40)
    x0, w0 = x.clone(), w.clone()
    assert plan(x, w, None, "residual") == "out"
    (xp, wp, bias, residual), = seen
    assert xp.shape == (2, 3, 48) and wp.shape == (5, 48) and xp.is_contiguous() and wp.is_contiguous()
    assert torch.equal(xp[..., :40], x0) and torch.equal(wp[:, :40], w0)
    assert not xp[..., 40:].any() and not wp[:, 40:].any()
    assert torch.equal(x, x0) and torch.equal(w, w0) and (bias, residual) == (None, "residual")
    assert torch.equal(xp @ wp.t(), x @ w.t())  # zeros times anything add nothing
