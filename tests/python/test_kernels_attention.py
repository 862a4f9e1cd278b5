"""``tvm_tirx.kernels.attention.make_attention``: the fused attention forward.

CPU: every head_dim (64, 128, 256), causal or not, bf16 and f16, compiles and assembles
for sm_90a with a run-time sequence length; the kernel's instructions are the ones its
design names (ss wgmma for Q K^T, rs wgmma for P V, 4-d TMA loads, lane shuffles for the
row maxima and sums); sizes and options it does not take are ValueErrors.
GPU (marker ``gpu``): O and the log-sum-exp against a float32 reference, NaN-filled
outputs, several sequence lengths from one compiled kernel, GQA.
"""

import math
import re

import pytest

import tvm_tirx
from tvm_tirx import testing
from tvm_tirx.kernels.attention import AttentionConfig, choose_attention, choose_schedule, make_attention
from tvm_tirx.kernels.attention.schedules import KV_STAGING_FULL_ROWS, PERSISTENT_ROWS
from tvm_tirx.script import tirx as T

_BUILT = {}


def _kernel(head_dim, causal, dtype="bfloat16", **options):
    """Compiled for sm_90a (and assembled) once per test session."""
    if not testing.has_nvcc():
        pytest.skip("compiles for sm_90a: needs nvcc on the PATH")
    key = (head_dim, causal, dtype, tuple(sorted(options.items())))
    if key not in _BUILT:
        func = make_attention(T.dynamic("B"), T.dynamic("L"), 4, head_dim, kv_heads=2, causal=causal, dtype=dtype,
                              **options)
        kernel = tvm_tirx.compile(func, target="cuda", arch="sm_90a")
        assert len(testing.assemble(kernel)) > 0
        _BUILT[key] = kernel
    return _BUILT[key]


def _calls(kernel, name):
    body = kernel.cuda_source[kernel.cuda_source.index("__global__") :]
    return len(re.findall(rf"\b{name}\(", body))


@pytest.mark.parametrize("head_dim,causal", [(64, False), (128, False), (128, True), (256, True)])
def test_every_head_dim_compiles_and_assembles_with_its_instructions(head_dim, causal):
    kernel = _kernel(head_dim, causal)
    bn, chunks = {64: 128, 128: 128, 256: 80}[head_dim], head_dim // 64
    t = "bf16"
    # Q K^T: one ss call per 64 columns of head_dim, 4 k16 steps each
    assert _calls(kernel, f"tvm_builtin_ptx_wgmma_{t}_ss_mma_async_sync_aligned_m64n{bn}k16_f32_{t}_{t}_1_1_0_0") == chunks * 4
    # P V: one rs call of N = head_dim per k16 step (bn / 16), V transposed (MN-major)
    assert _calls(kernel, f"tvm_builtin_ptx_wgmma_{t}_rs_mma_async_sync_aligned_m64n{head_dim}k16_f32_{t}_{t}_1_1_1") == bn // 16
    load = "tvm_builtin_ptx_cp_async_bulk_tensor_g2s_cluster_async_bulk_tensor_4d_shared__cluster_global_mbarrier__complete_tx__bytes"
    assert _calls(kernel, load) == 3 * chunks  # Q, K and V boxes of 64 columns
    # row maxima (masked and unmasked softmax) and the final row sums: 2 butterfly steps x 2 rows
    assert _calls(kernel, "tvm_builtin_ptx_shfl_sync_bfly_b32_f32_f32_u32_u32_u32") == 3 * 4
    # each score exponentiated by one ex2.approx (masked and unmasked softmax), bn / 2 per thread
    assert _calls(kernel, "tvm_builtin_ptx_ex2_approx_ftz_f32") == 2 * bn // 2


def test_float16_uses_the_f16_forms():
    kernel = _kernel(128, False, dtype="float16")
    assert _calls(kernel, "tvm_builtin_ptx_wgmma_f16_rs_mma_async_sync_aligned_m64n128k16_f32_f16_f16_1_1_1") == 8


def test_the_pingpong_schedule_hands_turns_over_on_named_barriers():
    kernel = _kernel(128, True, pingpong=True)
    # each consumer waits for its turn (bar.sync on 1 + c) and hands it over (bar.arrive on
    # 2 - c); consumer 1 also grants the first turn
    assert _calls(kernel, "tvm_builtin_ptx_bar_sync_count_sync") == 1
    assert _calls(kernel, "tvm_builtin_ptx_bar_arrive_arrive") == 2
    assert _calls(_kernel(128, True), "tvm_builtin_ptx_bar_arrive_arrive") == 0


def test_the_overlapped_schedule_issues_both_products_before_it_waits():
    kernel = _kernel(128, True, overlap=True, stages=3)
    body = kernel.cuda_source[kernel.cuda_source.index("__global__") :]
    qk = "tvm_builtin_ptx_wgmma_bf16_ss_mma_async_sync_aligned_m64n128k16_f32_bf16_bf16_1_1_0_0"
    pv = "tvm_builtin_ptx_wgmma_bf16_rs_mma_async_sync_aligned_m64n128k16_f32_bf16_bf16_1_1_1"
    # Q K^T for the first block and in the loop; P V in the loop and for the last block
    assert _calls(kernel, qk) == 2 * 8 and _calls(kernel, pv) == 2 * 8
    # in the loop: Q K_j^T, then P_{j-1} V_{j-1}, then wait_group 1 (the softmax of j runs under P V)
    loop = body[body.index("wait_group_sync_aligned_0();") :]
    first_qk, first_pv = loop.index(qk + "("), loop.index(pv + "(")
    assert first_qk < first_pv < loop.index("wgmma_wait_group_wait_group_sync_aligned_1();")
    # with the ping-pong turns too: each consumer still syncs once and hands over twice in the code
    both = _kernel(128, False, overlap=True, pingpong=True, stages=3)
    assert _calls(both, "tvm_builtin_ptx_bar_sync_count_sync") == 2 and _calls(both, "tvm_builtin_ptx_bar_arrive_arrive") == 3


def test_the_persistent_grid_walks_the_tiles_and_hands_q_back():
    kernel = _kernel(128, True, overlap=True, pingpong=True, stages=3, persistent=True)
    body = kernel.cuda_source[kernel.cuda_source.index("__global__") :]
    # min(132, tiles) CTAs, each walking its tiles; with B and L at run time both are run-time values
    lowered = testing.lower(make_attention(T.dynamic("B"), T.dynamic("L"), 4, 128, persistent=True, ctas=7)).script()
    assert "v = T.cta_id([T.min(7, (L + 128 - 1) // 128 * 4 * B)])" in lowered
    # the producer waits for each consumer's Q rows to be released (q_empty, two barriers at 28674..) before it
    # loads the next tile's; each consumer waits for its own rows (q_full[c]) and releases them (q_empty[c])
    assert "tvm_builtin_cuda_mbarrier_wait((&(((uint64_t*)dyn_smem_ptr)[28674])), ((i + 1) & 1));" in body
    assert "tvm_builtin_cuda_mbarrier_wait((&(((uint64_t*)dyn_smem_ptr)[28675])), ((i + 1) & 1));" in body
    assert "tvm_builtin_cuda_mbarrier_wait((&(((uint64_t*)dyn_smem_ptr)[(c_ptr[0] + 28672)])), (i_1 & 1));" in body
    assert "arrive_shared__cta_b64(tvm_builtin_cuda_cvta_generic_to_shared((&(((uint64_t*)dyn_smem_ptr)[(c_ptr[0] + 28674)]" in body
    # the ping-pong turns run on across tiles: consumer 1 grants the CTA's first turn only, and skips its hand-over
    # only after the last block of the CTA's last tile
    assert "if ((c_ptr[0] == 1) && (i_1 == 0)) {" in body
    assert "if (((c_ptr[0] == 0) || (1 < n_kv_ptr_1[0])) || !last_ptr[0]) {" in body
    # the ring's stage runs on across tiles: indexed by the blocks of earlier tiles plus j
    assert "done_ptr[0] = (done_ptr[0] + n_kv_ptr[0]);" in body
    # a static grid of fewer tiles than SMs launches one CTA per tile
    small = testing.lower(make_attention(1, 300, 2, 64, persistent=True)).script()
    assert "v = T.cta_id([6])" in small  # 3 query blocks x 2 heads


@pytest.mark.parametrize("batch,seq_len,heads", [(2, 1000, 4), (3, 300, 5), (1, 4097, 6)])
def test_the_persistent_walk_visits_every_tile_once_longest_rows_first(batch, seq_len, heads):
    import tvm
    from tvm_tirx.kernels.attention.kernel import _tile_order

    cfg = AttentionConfig(batch, seq_len, heads, heads, 128, persistent=True)
    analyzer = tvm.sym.Analyzer()
    order = [tuple(int(analyzer.simplify(x)) for x in _tile_order(cfg, T.int32(t))) for t in range(cfg.tiles)]
    every = [(qb, h, b) for qb in range(cfg.q_blocks) for h in range(heads) for b in range(batch)]
    assert sorted(order) == every  # each tile once
    # the first head's query blocks, longest causal rows first, then the next head's
    assert order[: cfg.q_blocks] == [(qb, 0, 0) for qb in reversed(range(cfg.q_blocks))]
    assert order[cfg.q_blocks] == (cfg.q_blocks - 1, 1 % heads, 1 // heads)


@pytest.mark.parametrize("batch,seq_len,heads", [(16, 1024, 32), (8, 2048, 64), (2, 16384, 16)])
def test_the_persistent_rounds_deal_causal_work_evenly(batch, seq_len, heads):
    import tvm
    from tvm_tirx.kernels.attention.kernel import _round_robin, _tile_order

    cfg = AttentionConfig(batch, seq_len, heads, heads, 128, causal=True, persistent=True)
    analyzer = tvm.sym.Analyzer()
    grid, q = min(cfg.ctas, cfg.tiles), cfg.q_blocks
    work, seen = [0] * grid, []
    for x in range(grid):
        for i in range(-(-cfg.tiles // grid)):
            t = int(analyzer.simplify(_round_robin(T.int32(x), T.int32(i), grid)))
            if t < cfg.tiles:
                seen.append(t)
                work[x] += int(analyzer.simplify(_tile_order(cfg, T.int32(t))[0])) + 1  # key/value blocks
    assert sorted(seen) == list(range(cfg.tiles))  # each tile once
    # the busiest CTA has at most 4% more key/value blocks than the mean (dealt one way only: 37% and 21% at the
    # first two shapes)
    assert max(work) <= 1.04 * sum(work) / grid


def test_the_consumers_take_registers_from_the_producer():
    source = _kernel(128, False).cuda_source
    assert "setmaxnreg.dec.sync.aligned.u32 40;" in source and "setmaxnreg.inc.sync.aligned.u32 232;" in source


@pytest.mark.parametrize(
    "args,options,match",
    [((2, 128, 4, 96), {}, r"head_dim: expected one of \[64, 128, 256\] \(an int\), found 96"),
     ((2, 128, 6, 128), dict(kv_heads=4), r"heads=6: expected a multiple of kv_heads=4"),
     ((2, 128, 4, 128), dict(dtype="float32"), r"dtype: expected one of"),
     ((2, 0, 4, 128), {}, r"seq_len: expected a positive int"),
     ((True, 128, 4, 128), {}, r"batch: expected a positive int"),
     ((2, 128, 4, 128), dict(scale=0.0), r"scale: expected a positive finite number"),
     ((2, 128, 4, 256), dict(stages=4), r"stages=4: the kernel needs \d+ bytes of shared memory"),
     ((2, 128, 4, 128), dict(causal=1), r"causal: expected a bool"),
     ((2, 128, 4, 128), dict(pingpong="yes"), r"pingpong: expected a bool"),
     ((2, 128, 4, 128), dict(overlap=None), r"overlap: expected a bool"),
     ((2, 128, 4, 64), dict(kv_heads=0), r"kv_heads: expected an int in 1..65535"),
     ((2, 128, 4, 64), dict(scale=True), r"scale: expected a positive finite number"),
     ((2, 128, 4, 64), dict(scale=float("inf")), r"scale: expected a positive finite number"),
     ((2, 128, 4, 64), dict(scale=1e300), r"scale: expected a positive finite number \(times log2\(e\) within float32\)"),
     ((2, 128, 4, 64), dict(stages=True), r"stages: expected an int in 1..4, found True"),
     ((2, 128, 4, 128.0), {}, r"head_dim: expected one of \[64, 128, 256\] \(an int\), found 128.0"),
     ((2, 128, 4, 64), dict(overlap=True, stages=1), r"stages=1: overlap=True needs at least 2 stages"),
     ((1, 2**20, 64, 128), {}, r"batch x seq_len x heads x head_dim = 8589934592 elements: .* at most 2147483647"),
     ((65536, 16, 1, 64), {}, r"batch: expected at most 65535 \(the grid's z axis; .*\), found 65536"),
     ((2, 128, 4, 64), dict(persistent=1), r"persistent: expected a bool"),
     ((2, 128, 4, 64), dict(persistent=True, ctas=0), r"ctas: expected a positive int \(the persistent grid\), found 0"),
     ((2, 128, 4, 64), dict(persistent=True, ctas=8.0), r"ctas: expected a positive int .*found 8.0"),
     ((2, 128, 4, 64), dict(persistent=True, persistent_rows=-1),
      r"persistent_rows: expected None or a non-negative int \(keys per query\), found -1"),
     ((2, 128, 4, 64), dict(persistent_rows=4096), r"persistent_rows=4096: .* needs persistent=True")],
    ids=["head-dim", "gqa-ratio", "dtype", "seq-len", "batch-bool", "scale", "smem", "causal", "pingpong", "overlap",
         "kv-heads-0", "scale-bool", "scale-inf", "scale-float32", "stages-bool", "head-dim-float", "overlap-1-stage",
         "int32-elements", "batch-grid-z", "persistent-int", "ctas-0", "ctas-float", "rows-negative", "rows-without-persistent"],
)
def test_sizes_and_options_it_does_not_take_are_value_errors(args, options, match):
    with pytest.raises(ValueError, match=match):
        make_attention(*args, **options)


def test_a_run_time_length_of_another_dtype_is_refused():
    with pytest.raises(ValueError, match="seq_len: expected a positive int .* or an int32 run-time extent .*found L "
                                         "of dtype int64"):
        make_attention(2, T.dynamic("L", "int64"), 4, 128)


# -- on the GPU --------------------------------------------------------------------------------


def reference(torch, q, k, v, causal, scale):
    """O and LSE in float32: q (B, L, H, D), k and v (B, L, Hkv, D)."""
    group = q.shape[2] // k.shape[2]
    qf, kf, vf = (x.float().transpose(1, 2) for x in (q, k, v))  # (B, H, L, D)
    kf, vf = kf.repeat_interleave(group, dim=1), vf.repeat_interleave(group, dim=1)
    s = (qf @ kf.transpose(-1, -2)) * scale
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    o = torch.softmax(s, dim=-1) @ vf
    return o.transpose(1, 2), lse


def check(torch, kernel, batch, seq_len, heads, kv_heads, head_dim, causal, dtype, seed=0):
    """Run ``kernel`` into NaN-filled O and LSE; max |O - ref| <= 2e-2, max |LSE - ref| <= 1e-3."""
    torch.manual_seed(seed)
    tdtype = getattr(torch, dtype)
    q = torch.randn(batch, seq_len, heads, head_dim, device="cuda", dtype=tdtype)
    k = torch.randn(batch, seq_len, kv_heads, head_dim, device="cuda", dtype=tdtype)
    v = torch.randn(batch, seq_len, kv_heads, head_dim, device="cuda", dtype=tdtype)
    o = torch.full_like(q, float("nan"))
    lse = torch.full((batch, heads, seq_len), float("nan"), device="cuda")
    kernel(q, k, v, o, lse)
    torch.cuda.synchronize()
    ref_o, ref_lse = reference(torch, q, k, v, causal, 1 / math.sqrt(head_dim))
    err_o = (o.float() - ref_o).abs().max().item()
    err_lse = (lse - ref_lse).abs().max().item()
    where = (batch, seq_len, heads, kv_heads, head_dim, causal, dtype)
    assert err_o <= 2e-2 and err_lse <= 1e-3, f"{where}: max error O {err_o:.2e}, LSE {err_lse:.2e}"
    return err_o, err_lse


@pytest.mark.gpu
@pytest.mark.parametrize("schedule", [{}, dict(pingpong=True), dict(overlap=True, stages=3),
                                      dict(overlap=True, pingpong=True, stages=3)],
                         ids=["serial", "pingpong", "overlap", "overlap-pingpong"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_every_length_from_one_kernel_on_gpu(torch_cuda, causal, schedule):
    func = make_attention(T.dynamic("B"), T.dynamic("L"), 4, 128, kv_heads=2, causal=causal, **schedule)
    kernel = tvm_tirx.compile(func, target="cuda")
    for seq_len in (1, 100, 128, 1000, 4097):
        check(torch_cuda, kernel, 2, seq_len, 4, 2, 128, causal, "bfloat16", seed=seq_len)


@pytest.mark.gpu
@pytest.mark.parametrize("schedule", [dict(overlap=True, pingpong=True, stages=3), dict(pingpong=True)],
                         ids=["overlap-pingpong", "pingpong"])
@pytest.mark.parametrize("ctas", [3, 132])
def test_the_persistent_grid_at_every_length_on_gpu(torch_cuda, schedule, ctas):
    # 3 CTAs walk many tiles each (the ring's phases and Q's hand-over run on for dozens of
    # tiles); waits are bounded (detect_hangs), so a broken protocol fails instead of hanging
    for causal in (False, True):
        # with 3 CTAs, rows past 1000 keys launch one CTA per tile: the same code on the other grid
        rows = 1000 if ctas == 3 else None
        func = make_attention(T.dynamic("B"), T.dynamic("L"), 4, 128, kv_heads=2, causal=causal, persistent=True,
                              ctas=ctas, persistent_rows=rows, **schedule)
        kernel = tvm_tirx.compile(func, target="cuda", options={"detect_hangs": True})
        for seq_len in (1, 100, 1000, 4097):
            check(torch_cuda, kernel, 2, seq_len, 4, 2, 128, causal, "bfloat16", seed=seq_len)


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim,dtype", [(64, "bfloat16"), (256, "bfloat16"), (128, "float16")])
def test_head_dims_and_float16_on_gpu(torch_cuda, head_dim, dtype):
    for causal in (False, True):
        for options in ({}, choose_schedule(head_dim, causal, 1000)):  # the default and the table's schedule
            kernel = tvm_tirx.compile(make_attention(1, T.dynamic("L"), 8, head_dim, kv_heads=1, causal=causal,
                                                     dtype=dtype, **options), target="cuda")
            for seq_len in (77, 1000):
                check(torch_cuda, kernel, 1, seq_len, 8, 1, head_dim, causal, dtype, seed=seq_len)


@pytest.mark.parametrize("head_dim,causal,overlap,pingpong,persistent", [
    (64, False, True, False, True), (128, False, True, True, True), (256, False, False, True, False),
    (64, True, True, False, True), (128, True, True, True, True), (256, True, False, True, False)])
def test_the_schedule_table_overlaps_where_three_stages_fit_and_ping_pongs_at_128_and_256(head_dim, causal, overlap,
                                                                                          pingpong, persistent):
    from tvm_tirx.ops.attention_kernels import attention_prim_func

    options = choose_schedule(head_dim, causal)
    assert options["overlap"] is overlap and options["pingpong"] is pingpong and options["persistent"] is persistent
    assert options["stages"] == (3 if overlap else 2)
    # rows of unknown length: head_dim 128 picks its grid at launch
    assert options["persistent_rows"] == (PERSISTENT_ROWS if head_dim == 128 else None)
    make_attention(2, 300, 4, head_dim, causal=causal, **options)  # every choice is a kernel the generator takes
    func = attention_prim_func(4, 4, head_dim, causal, "bfloat16", 1.0 / head_dim**0.5)
    # the op's kernel takes the table's schedule: its shared memory holds that many stages
    smem = AttentionConfig(T.dynamic("B"), T.dynamic("L"), 4, 4, head_dim, causal=causal, **options).smem_bytes
    assert f'"tirx.dyn_smem_bytes": {smem}' in func.script()


@pytest.mark.parametrize("kv_staging", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_the_schedule_table_puts_short_rows_of_head_dim_128_on_the_persistent_grid(causal, kv_staging, monkeypatch):
    from tvm_tirx.kernels.attention import schedules
    from tvm_tirx.ops.attention_kernels import attention_prim_func

    monkeypatch.setattr(schedules, "KV_STAGING", kv_staging)
    assert [choose_schedule(128, causal, n)["persistent"] for n in (0, 1000, PERSISTENT_ROWS, PERSISTENT_ROWS + 1)] == [
        True, True, True, False]
    # head_dim 64: full rows persistent at every length; causal rows past PERSISTENT_ROWS on one CTA per tile
    assert choose_schedule(64, causal, 10**6)["persistent"] is not causal
    assert not choose_schedule(256, causal, 100)["persistent"]
    assert all(choose_schedule(128, causal, n)["persistent_rows"] is None for n in (0, PERSISTENT_ROWS + 1))
    # the op's head_dim 128 kernels: the table's for rows of unknown length (persistent up to
    # PERSISTENT_ROWS keys, chosen at launch) serves the short rows (with KV_STAGING, full rows of at
    # most KV_STAGING_FULL_ROWS keys get the same with O staged in K's stage); the long ones get one CTA per tile
    plans = (None, choose_attention(128, causal, 1000), choose_attention(128, causal, PERSISTENT_ROWS + 1),
             choose_attention(128, causal, KV_STAGING_FULL_ROWS))
    plain, short, long, shortest = (attention_prim_func(4, 4, 128, causal, "bfloat16", 128**-0.5, p) for p in plans)
    mask = "causal" if causal else "full"
    staged = "_okv" if causal and kv_staging else ""  # causal rows: K's stage at every persistent length
    assert short is plain and str(plain.attrs["global_symbol"]) == f"tvm_tirx_attention_h4_kv4_d128_{mask}_bf16{staged}"
    assert (shortest is plain) is (causal or not kv_staging)
    if not causal and kv_staging:
        assert str(shortest.attrs["global_symbol"]) == "tvm_tirx_attention_h4_kv4_d128_full_bf16_okv"
    # one CTA per tile: O in Q's rows, the kernel's default
    assert str(long.attrs["global_symbol"]) == f"tvm_tirx_attention_h4_kv4_d128_{mask}_bf16_per_tile"
    assert (choose_schedule(128, causal, 512)["o_staging"] == "kv") is kv_staging
    assert choose_schedule(128, causal, PERSISTENT_ROWS + 1)["o_staging"] is None
    assert f"T.cta_id([T.Select(L <= {PERSISTENT_ROWS}, T.min(132, " in plain.script()
    assert "T.min(132, " not in long.script()


@pytest.mark.parametrize("seq_len,rows,persistent", [(4096, 4096, True), (4097, 4096, False), (1, 0, False),
                                                     (10**5, None, True)])
def test_persistent_rows_gives_long_rows_one_cta_per_tile(seq_len, rows, persistent):
    from tvm_tirx.kernels.attention.kernel import _walk

    cfg = AttentionConfig(2, seq_len, 8, 8, 128, persistent=True, persistent_rows=rows)
    grid, rounds, _ = _walk(cfg)
    assert grid == (min(132, cfg.tiles) if persistent else cfg.tiles)
    assert rounds == -(-cfg.tiles // grid)


def test_the_schedule_table_checks_its_arguments():
    with pytest.raises(ValueError, match=r"head_dim must be one of \[64, 128, 256\], found 96"):
        choose_schedule(96, False)
    with pytest.raises(ValueError, match="causal must be a bool, found 1"):
        choose_schedule(64, 1)
    with pytest.raises(ValueError, match="seq_len must be None or a non-negative int, found -1"):
        choose_schedule(64, True, -1)


def test_run_time_sizes_are_checked_against_int32_offsets_on_the_host_before_the_launch():
    from tvm_tirx.kernels.attention.kernel import ELEMENTS_MESSAGE

    lowered = testing.lower(make_attention(T.dynamic("B"), T.dynamic("L"), 4, 64)).script()
    host = lowered[: lowered.index("tirx.device_entry")]  # the assert precedes the device code
    assert 'T.Cast("int64", B) * T.Cast("int64", L) * T.int64(4) * T.int64(64) <= T.int64(2147483647)' in host
    assert ELEMENTS_MESSAGE in host and '"ValueError"' in host
    static = testing.lower(make_attention(2, 300, 4, 64)).script()
    assert ELEMENTS_MESSAGE not in static  # checked when made (a ValueError from make_attention)
