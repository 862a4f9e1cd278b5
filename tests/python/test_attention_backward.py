"""``tvm_tirx.kernels.attention_backward.make_attention_backward``: the fused attention backward.

CPU: every configuration it takes (head_dim 64 / 128, causal or not, bf16 / f16, GQA or
not, static or run-time sizes) compiles with the tile checker accepting it and assembles
for sm_90a with no register spills; the kernel issues the products its design names (ss
wgmma for ``S^T`` / ``dP^T``, rs wgmma with a transposed B for ``dV`` / ``dK``, ss wgmma
with both operands transposed for ``dQ``), one TMA reduce-add per 32 columns of ``dQ`` per
query block and warpgroup, and a causal kernel walks only the query blocks its keys meet;
sizes and options it does not take are ValueErrors.  ``dq_split="columns"`` (each consumer
computes half of dQ's columns over all 128 keys): the same checks at head_dim 64 and 128,
causal or not, 2 and 3 stages, half the TMA reduce boxes per consumer, the 256-thread barriers.
``dq_split="rows"`` (head_dim 64, query blocks of 128): compiles without spills, in sections too; the
mask's per-register test against each pair's rule.
GPU (marker ``gpu``): dQ, dK and dV against float32 autograd of a torch reference, NaN-filled
dK / dV, several lengths (1000: not a multiple of the blocks) from one compiled kernel, GQA.
"""

import math
import re

import pytest

import tvm_tirx
from tvm_tirx import testing
from tvm_tirx.kernels.attention_backward import BackwardConfig, make_attention_backward, wave_section
from tvm_tirx.kernels.attention_backward.config import BK, BQ, FILLS
from tvm_tirx.script import tirx as T

_BUILT = {}


def _kernel(head_dim, causal, dtype="bfloat16", kv_heads=2, static=False, **options):
    """Compiled for sm_90a (8 query heads) and assembled, once per test session."""
    if not testing.has_nvcc():
        pytest.skip("compiles for sm_90a: needs nvcc on the PATH")
    key = (head_dim, causal, dtype, kv_heads, static, tuple(sorted(options.items())))
    if key not in _BUILT:
        batch, seq_len = (2, 1000) if static else (T.dynamic("B"), T.dynamic("L"))
        func = make_attention_backward(batch, seq_len, 8, head_dim, kv_heads=kv_heads, causal=causal, dtype=dtype,
                                       **options)
        kernel = tvm_tirx.compile(func, target="cuda", arch="sm_90a")
        assert len(testing.assemble(kernel)) > 0
        _BUILT[key] = kernel
    return _BUILT[key]


def _body(kernel):
    return kernel.cuda_source[kernel.cuda_source.index("__global__") :]


def _calls(kernel, name):
    return len(re.findall(rf"\b{name}\(", _body(kernel)))


WGMMA = "tvm_builtin_ptx_wgmma_{t}_{form}_mma_async_sync_aligned_m64n{n}k16_f32_{t}_{t}_1_1{trans}"
LOAD = ("tvm_builtin_ptx_cp_async_bulk_tensor_g2s_cluster_async_bulk_tensor_4d_shared__cluster_global_mbarrier"
        "__complete_tx__bytes")
REDUCE = ("tvm_builtin_ptx_cp_reduce_async_bulk_tensor_reduce_async_bulk_tensor_4d_global_shared__cta_add_tile"
          "_bulk_group")

#: (head_dim, causal, dtype, kv_heads, static): a set covering each value of each axis
COVER = [(128, True, "bfloat16", 2, False), (64, False, "float16", 8, True), (64, True, "bfloat16", 2, True),
         (128, False, "float16", 8, False)]
EVERY = [(d, c, t, kv, s) for d in (64, 128) for c in (False, True) for t in ("bfloat16", "float16")
         for kv in (2, 8) for s in (False, True)]


def _check_configuration(head_dim, causal, dtype, kv_heads, static, **options):
    kernel = _kernel(head_dim, causal, dtype, kv_heads, static, **options)
    report = testing.ptxas_report(kernel)
    assert "0 bytes spill stores, 0 bytes spill loads" in report, report
    assert not re.search(r"C75\d\d", report), report  # wgmma serialised (C7510, C7511, C7512, C7520, ...)


@pytest.mark.parametrize("head_dim,causal,dtype,kv_heads,static", COVER)
def test_a_covering_set_compiles_and_assembles_without_spills(head_dim, causal, dtype, kv_heads, static):
    _check_configuration(head_dim, causal, dtype, kv_heads, static)


@pytest.mark.slow
@pytest.mark.parametrize("head_dim,causal,dtype,kv_heads,static", [c for c in EVERY if c not in COVER])
def test_every_configuration_compiles_and_assembles_without_spills(head_dim, causal, dtype, kv_heads, static):
    _check_configuration(head_dim, causal, dtype, kv_heads, static)


#: (head_dim, causal, dtype, kv_heads, static, stages) of dq_split="columns": both head_dims, causal or
#: not, 2 and 3 stages (3 fits head_dim 128 only with "columns"), both dtypes, static and run-time sizes
COLUMNS = [(128, True, "bfloat16", 2, False, 2), (128, False, "float16", 8, True, 2),
           (128, True, "bfloat16", 2, False, 3), (128, False, "bfloat16", 2, False, 3),
           (64, False, "bfloat16", 2, False, 2), (64, True, "float16", 8, True, 2), (64, True, "bfloat16", 2, False, 3)]


@pytest.mark.parametrize("head_dim,causal,dtype,kv_heads,static,stages", COLUMNS)
def test_dq_split_by_columns_compiles_and_assembles_without_spills(head_dim, causal, dtype, kv_heads, static, stages):
    _check_configuration(head_dim, causal, dtype, kv_heads, static, stages=stages, dq_split="columns")


#: (causal, dtype, kv_heads, static, stages) of dq_split="rows" (head_dim 64, query blocks of 128)
ROWS = [(True, "bfloat16", 2, False, 2), (False, "float16", 8, True, 2), (True, "bfloat16", 2, True, 3),
        (False, "bfloat16", 2, False, 3)]


@pytest.mark.parametrize("causal,dtype,kv_heads,static,stages", ROWS)
def test_dq_split_by_rows_compiles_and_assembles_without_spills(causal, dtype, kv_heads, static, stages):
    _check_configuration(64, causal, dtype, kv_heads, static, stages=stages, dq_split="rows")


def test_the_operators_head_dim_64_causal_kernel_compiles_and_assembles_without_spills():
    # rows, 2 stages, longest first in sections (PLANS[64], SECTION_HEAD_DIMS)
    _check_configuration(64, True, "bfloat16", 8, False, stages=2, dq_split="rows", longest_first=True, section=4)


@pytest.mark.parametrize("head_dim,dtype", [(128, "bfloat16"), (64, "float16")])
def test_the_kernel_issues_the_products_of_its_design(head_dim, dtype):
    kernel = _kernel(head_dim, True, dtype)
    t, chunks = {"bfloat16": "bf16", "float16": "f16"}[dtype], head_dim // 64
    # S^T = K Q^T and dP^T = V dO^T: 64 x 64, both operands K-major; one call per 64 columns of head_dim
    assert _calls(kernel, WGMMA.format(t=t, form="ss", n=BQ, trans="_0_0")) == 2 * chunks * 4
    # dV += P^T dO and dK += dS^T Q: A in registers, B (dO, Q) read N-major; one instruction per k16 step
    assert _calls(kernel, WGMMA.format(t=t, form="rs", n=head_dim, trans="_1")) == 2 * BQ // 16
    # dQ = dS K: A (dS^T in shared memory) read M-major, B (K) N-major: both transposed
    assert _calls(kernel, WGMMA.format(t=t, form="ss", n=head_dim, trans="_1_1")) == BK // 2 // 16
    assert _calls(kernel, "tvm_builtin_ptx_wgmma_wait_group_wait_group_sync_aligned_0") == 3
    # K and V once (two 64-key boxes per 64 columns each), then a Q and a dO box per 64 columns per iteration
    assert _calls(kernel, LOAD) == 2 * 2 * chunks + 2 * chunks
    # each score exponentiated once (32 per thread); the rows' LSE and Dsum through shared memory
    assert _calls(kernel, "tvm_builtin_ptx_ex2_approx_ftz_f32") == BQ * BK // 2 // 128
    source = kernel.cuda_source
    assert "setmaxnreg.dec.sync.aligned.u32 40;" in source and "setmaxnreg.inc.sync.aligned.u32 232;" in source


def test_the_function_takes_the_tensors_in_the_documented_order_and_shapes():
    func = make_attention_backward(T.dynamic("B"), T.dynamic("L"), 8, 64, kv_heads=2)
    names = [str(p.name) for p in func.params]
    assert names == ["Q", "K", "V", "dO", "LSE", "Dsum", "dQacc", "dK", "dV"]
    shapes = {str(p.name): (tuple(str(x) for x in p.shape), str(p.dtype)) for p in func.params}
    assert shapes["Q"] == shapes["dO"] == (("B", "L", "8", "64"), "bfloat16")
    assert shapes["K"] == shapes["V"] == shapes["dK"] == shapes["dV"] == (("B", "L", "2", "64"), "bfloat16")
    assert shapes["LSE"] == shapes["Dsum"] == (("B", "8", "L"), "float32")
    assert shapes["dQacc"] == (("B", "L", "8", "64"), "float32")


@pytest.mark.parametrize("head_dim,dq_split", [(128, "keys"), (128, "columns"), (64, "columns")])
def test_the_debug_build_of_the_gpu_tests_assembles(head_dim, dq_split):
    # what the GPU tests compile: every mbarrier wait bounded (a broken protocol fails instead of hanging)
    if not testing.has_nvcc():
        pytest.skip("needs nvcc")
    func = make_attention_backward(T.dynamic("B"), T.dynamic("L"), 8, head_dim, kv_heads=2, causal=True,
                                   dq_split=dq_split)
    kernel = tvm_tirx.compile(func, target="cuda", arch="sm_90a", options={"detect_hangs": True})
    assert len(testing.assemble(kernel)) > 0
    assert "clock64()" in kernel.cuda_source


def test_dq_is_reduced_once_per_query_block_by_tma_boxes_of_32_columns():
    for head_dim in (64, 128):
        kernel = _kernel(head_dim, False)
        body = _body(kernel)
        # one reduce per 32 float32 columns, issued by one thread per warpgroup, then one commit
        assert _calls(kernel, REDUCE) == head_dim // 32
        assert _calls(kernel, "tvm_builtin_ptx_cp_async_bulk_commit_group_async_bulk_commit_group") == 1
        loop = body[body.rindex("for (int g_") :]
        assert loop.index(REDUCE) < loop.index("async_bulk_commit_group()")  # inside the consumers' loop
        for box in range(head_dim // 32):  # at columns 32 i of dQacc
            assert f"{REDUCE}(((void*)((unsigned long long)(&(dQacc_tmap)))), {32 * box}, " in body
        # before sdq is written again: the reduce has read it (wait_group.read 0, then the warpgroup's barrier);
        # at the end the reduces are complete before the CTA exits
        assert _calls(kernel, "tvm_builtin_ptx_cp_async_bulk_wait_group_async_bulk_wait_group_read_0") == 1
        assert _calls(kernel, "tvm_builtin_ptx_cp_async_bulk_wait_group_async_bulk_wait_group_0") == 1
        assert "tvm_builtin_ptx_barrier_sync_count_sync_aligned(((uint)(c_ptr[0] + 1)), (uint)128);" in body


@pytest.mark.parametrize("head_dim", [64, 128])
def test_dq_split_by_columns_reduces_half_the_boxes_per_consumer(head_dim):
    keys, columns = _kernel(head_dim, True), _kernel(head_dim, True, dq_split="columns")
    half = head_dim // 2
    # per consumer: head_dim / 32 boxes ("keys"), head_dim / 64 ("columns"); at head_dim 64 the consumer is
    # compiled once per warpgroup (a static column offset), so the source holds both copies
    copies = 2 if head_dim == 64 else 1
    assert _calls(keys, REDUCE) == head_dim // 32
    assert _calls(columns, REDUCE) == copies * head_dim // 64
    ptx = lambda k: len(re.findall(r"cp\.reduce\.async\.bulk\.tensor\.4d", k.ptx))  # noqa: E731
    assert ptx(columns) * 2 == ptx(keys) * copies
    body = _body(columns)
    if head_dim == 128:  # consumer c's boxes at columns 64 c and 64 c + 32 of dQacc
        assert f"{REDUCE}(((void*)((unsigned long long)(&(dQacc_tmap)))), (c_ptr[0] * {half}), " in body
        assert f"{REDUCE}(((void*)((unsigned long long)(&(dQacc_tmap)))), ((c_ptr[0] * {half}) + 32), " in body
    else:  # one box per consumer, at column 0 or 32
        for c in (0, 1):
            assert f"{REDUCE}(((void*)((unsigned long long)(&(dQacc_tmap)))), {c * half}, " in body
    # dQ = dS K over all 128 keys: one call of N = head_dim / 2, 8 k16 steps (both dS^T tiles)
    t = "bf16"
    assert _calls(columns, WGMMA.format(t=t, form="ss", n=half, trans="_1_1")) == copies * BK // 16
    assert _calls(columns, WGMMA.format(t=t, form="ss", n=head_dim, trans="_1_1")) == 0
    # dS^T shared by both warpgroups (barrier 3, 256 threads); each tile freed for its writer (4 + c)
    assert "tvm_builtin_ptx_barrier_sync_count_sync_aligned((uint)3, (uint)256);" in body
    assert re.search(r"barrier_arrive_arrive_aligned\(.*\(uint\)256\);", body)
    report = testing.ptxas_report(columns)
    assert "0 bytes spill stores, 0 bytes spill loads" in report, report


def test_dq_split_by_columns_needs_less_shared_memory():
    # the fp32 dQ tiles halve (2 x 64 x head_dim / 2 x 4 bytes fewer); sds stays one tile per consumer
    for head_dim, stages in ((128, 1), (128, 2), (64, 1), (64, 4)):
        keys = BackwardConfig(2, 128, 4, 4, head_dim, stages=stages).smem_bytes
        columns = BackwardConfig(2, 128, 4, 4, head_dim, stages=stages, dq_split="columns").smem_bytes
        assert keys - columns == 2 * 64 * head_dim // 2 * 4
    # the budgets the config's docstring states: 3 stages fit head_dim 128, 4 do not
    assert BackwardConfig(2, 128, 4, 4, 128, dq_split="columns").smem_bytes == 182312
    assert BackwardConfig(2, 128, 4, 4, 128, stages=3, dq_split="columns").smem_bytes == 215608
    with pytest.raises(ValueError, match=r"stages=4: the kernel needs 248904 bytes of shared memory"):
        BackwardConfig(2, 128, 4, 4, 128, stages=4, dq_split="columns")
    assert '"tirx.dyn_smem_bytes": 215608' in testing.lower(
        make_attention_backward(2, 128, 4, 128, stages=3, dq_split="columns")).script()


def test_the_ring_is_filled_by_the_tma_thread_and_the_lanes_copying_lse_and_dsum():
    body = _body(_kernel(128, False))
    # full: one arrive.expect_tx and 32 lane arrivals; empty: one arrival per consumer; kv_full: one
    inits = re.findall(r"mbarrier_init_init_shared__cta_b64\(.*?\), \(uint\)(\d+)\);", body)
    assert sorted(int(n) for n in inits) == [1, 2, 2, FILLS, FILLS]
    assert "if ((((int)threadIdx.x) >> 5) == 1) {" in body  # warp 1 copies the rows


@pytest.mark.parametrize("seq_len", [1, 64, 127, 128, 1000, 4097])
@pytest.mark.parametrize("causal", [False, True])
def test_the_walk_meets_every_block_of_keys_and_queries_that_counts(seq_len, causal):
    import tvm

    cfg = BackwardConfig(2, seq_len, 6, 2, 128, causal=causal)
    analyzer = tvm.sym.Analyzer()
    q_blocks = -(-seq_len // BQ)
    for kb in range(cfg.key_blocks):
        steps = cfg.group * int(analyzer.simplify(cfg.query_blocks(T.int32(kb), T.int32(seq_len))))
        visited = [tuple(int(analyzer.simplify(x)) for x in cfg.step(T.int32(g), T.int32(kb), T.int32(1),
                                                                      T.int32(seq_len))) for g in range(steps)]
        # every head of key/value head 1's group (heads 3, 4, 5) once per query block walked
        assert sorted(visited) == sorted({(h, qb) for h, qb in visited}) and {h for h, _ in visited} == {3, 4, 5}
        walked = {qb for _, qb in visited}
        for qb in range(q_blocks):
            keys, queries = range(kb * BK, min(kb * BK + BK, seq_len)), range(qb * BQ, min(qb * BQ + BQ, seq_len))
            counts = any(k <= q for k in keys for q in queries) if causal else True
            if counts:
                assert qb in walked, (kb, qb)
        if causal:  # the blocks wholly before the block's first key are skipped
            assert min(walked) == 2 * kb and len(walked) == q_blocks - 2 * kb
        else:
            assert walked == set(range(q_blocks))


def test_a_causal_kernel_starts_its_walk_at_its_own_keys():
    causal, full = _body(_kernel(128, True, longest_first=False)), _body(_kernel(128, False))
    # iterations: group (4) x query blocks from 2 kb on (causal), or all of them
    assert "for (int g = 0; g < ((((L + 63) >> 6) * 4) - (((int)blockIdx.x) * 8)); ++g) {" in causal
    assert "for (int g = 0; g < (((L + 63) >> 6) * 4); ++g) {" in full
    # the mask where a block crosses seq_len or, causal, holds a key after a query: q0 < k0 + 63
    diagonal = r"\(qb_ptr_\d+\[0\] \* 64\) < \(\(\(\(\(int\)blockIdx.x\) \* 128\) \+ \(c_ptr\[0\] \* 64\)\) \+ 63\)"
    assert re.search(diagonal, causal) and not re.search(diagonal, full)


def test_longest_first_puts_the_key_blocks_on_the_middle_axis():
    causal = _body(_kernel(128, True, longest_first=True))
    # one section per batch entry: (b, hk, kb) = (blockIdx.z, blockIdx.x, blockIdx.y); the walk shortens with y
    assert all(f"int keys_{i} = ((int)blockIdx.{axis});" in causal for i, axis in enumerate("zxy"))
    assert "for (int g = 0; g < ((((L + 63) >> 6) * 4) - (((int)blockIdx.y) * 8)); ++g) {" in causal
    assert "int keys_2 = ((int)blockIdx.x);" in _body(_kernel(128, True))  # the default: off
    # sections of one key/value head (kv_heads=2): blockIdx.z is (batch entry, section)
    sectioned = _body(_kernel(128, True, longest_first=True, section=1))
    assert re.search(r"keys_0(_ptr\[0\])? = \(\(\(int\)blockIdx.z\) >> 1\);", sectioned)  # b = z // 2
    assert re.search(r"keys_1(_ptr\[0\])? = \(\(\(int\)blockIdx.z\) & 1\);", sectioned)  # hk = z % 2 + x, x < 1


def _launch_order(cfg):
    gx, gy, gz = cfg.grid
    return [cfg.block(x, y, z) for z in range(gz) for y in range(gy) for x in range(gx)]


@pytest.mark.parametrize("batch,kv_heads,seq_len,section", [(3, 2, 1000, None), (1, 1, 128, None),
                                                            (2, 5, 129, None), (2, 6, 700, 2), (3, 4, 300, 1)])
def test_longest_first_launches_every_block_once_key_block_by_key_block(batch, kv_heads, seq_len, section):
    every = {(b, hk, kb) for b in range(batch) for hk in range(kv_heads) for kb in range(math.ceil(seq_len / 128))}
    cfg = BackwardConfig(batch, seq_len, kv_heads * 2, kv_heads, 64, causal=True)
    linear = _launch_order(cfg)
    assert len(linear) == len(every) and set(linear) == every
    assert [kb for _, _, kb in linear] == [kb for _ in range(batch * kv_heads) for kb in range(cfg.key_blocks)]
    cfg = BackwardConfig(batch, seq_len, kv_heads * 2, kv_heads, 64, causal=True, longest_first=True, section=section)
    linear = _launch_order(cfg)
    assert len(linear) == len(every) and set(linear) == every
    per = kv_heads if section is None else section  # each section's CTAs together, key blocks in order
    chunks = [linear[i:i + per * cfg.key_blocks] for i in range(0, len(linear), per * cfg.key_blocks)]
    assert len(chunks) == batch * kv_heads // per
    for chunk in chunks:
        assert len({(b, hk // per) for b, hk, _ in chunk}) == 1
        assert [kb for _, _, kb in chunk] == sorted(kb for _, _, kb in chunk)


@pytest.mark.parametrize("kv_heads,seq_len,sms,expected", [(8, 2048, 132, 8), (32, 8192, 132, 2), (32, 3000, 132, 4),
                                                          (8, 16384, 132, 1), (6, 2048, 64, 3), (5, 100, 4, 1)])
def test_wave_section_is_the_largest_divisor_whose_key_blocks_fit_one_wave(kv_heads, seq_len, sms, expected):
    assert wave_section(kv_heads, seq_len, sms) == expected
    assert kv_heads % expected == 0 and (expected == 1 or expected * math.ceil(seq_len / BK) <= sms)


def test_longest_first_refuses_more_key_blocks_than_the_grid_takes():
    with pytest.raises(ValueError, match=r"longest_first=True: seq_len must be at most 8388480 keys"):
        make_attention_backward(1, 8388481, 1, 64, causal=True, longest_first=True)
    # a run-time length: the launch-size check every run-time grid gets, before the launch
    from types import SimpleNamespace

    from tvm_tirx.build.launch_sizes import LaunchSizes
    from tvm_tirx.tile.ir.views import int_or_none

    func = make_attention_backward(1, T.dynamic("L"), 1, 64, causal=True, longest_first=True)
    sizes = LaunchSizes.of(func, "backward", "sm_90a")

    def args(seq_len):  # every parameter a tensor whose only run-time extent is L
        return [SimpleNamespace(shape=tuple(n if isinstance(n, int) else seq_len
                                            for n in (int_or_none(e) for e in p.shape))) for p in func.params]

    sizes(args(8388480))  # 65535 key blocks: accepted (no error)
    with pytest.raises(ValueError, match=r"grid.y = .* = 65536 with L = 8388481: a CUDA grid has 1 to 65535"):
        sizes(args(8388481))


@pytest.mark.parametrize("causal", [False, True])
def test_the_mask_covers_every_pair_that_needs_one(causal):
    import tvm
    from tvm_tirx.kernels.attention_backward.gradients import _needs_mask

    cfg = BackwardConfig(1, 1000, 1, 1, 64, causal=causal)
    analyzer = tvm.sym.Analyzer()
    for seq_len in (1000, 1024):
        for k0 in range(0, 1024, 64):
            for q0 in range(0, 1024, 64):
                needed = any(k >= seq_len or q >= seq_len or (causal and k > q)
                             for k in range(k0, k0 + 64) for q in range(q0, q0 + 64))
                found = bool(analyzer.simplify(_needs_mask(cfg, T.int32(k0), T.int32(q0), T.int32(seq_len))))
                assert found == needed, (seq_len, k0, q0)


@pytest.mark.parametrize("causal", [False, True])
def test_the_mask_keeps_exactly_the_pairs_that_count(causal):
    # the mask's per-register test (an offset against three values computed once per block) against the pair's own
    # rule, for every register of every thread of a consumer warpgroup, on blocks at, inside and past the diagonal
    # and the end; 64 registers: the 128 queries of dq_split="rows"
    import tvm
    from tvm_tirx.kernels.attention_backward.gradients import _keep_at, register_offsets
    from tvm_tirx.tile.families.wgmma import accumulator_col, accumulator_row

    analyzer = tvm.sym.Analyzer()
    for k0, q0, seq_len in ((0, 0, 1000), (64, 0, 100), (64, 128, 150), (128, 128, 1000), (192, 128, 200)):
        for tid in range(128, 256):
            key0, query0 = accumulator_row(k0, tid, 0), accumulator_col(q0, tid, 0, 0)
            room = (seq_len - key0, seq_len - query0, query0 - key0)
            for r in range(64):
                key, query = accumulator_row(k0, tid, r // 2 % 2), accumulator_col(q0, tid, r // 4, r % 2)
                want = key < seq_len and query < seq_len and (key <= query or not causal)
                got = analyzer.simplify(_keep_at(causal, room, *register_offsets(r)))  # the kernel's own test
                assert bool(got) == want, (k0, q0, seq_len, tid, r)


def _dense_gradients(np, q, k, v, do, causal, scale):
    """float64 gradients of attention from the textbook formulas, per query head (k and v
    repeated over each group), and the forward's LSE and Dsum: ``(dq, dk, dv, lse, dsum)``."""
    group = q.shape[2] // k.shape[2]
    kr, vr = np.repeat(k, group, axis=2), np.repeat(v, group, axis=2)
    s = np.einsum("bqhd,bkhd->bhqk", q, kr) * scale
    n = s.shape[-1]
    if causal:
        s = np.where(np.triu(np.ones((n, n), dtype=bool), 1), -np.inf, s)
    lse = np.log(np.exp(s - s.max(-1, keepdims=True)).sum(-1)) + s.max(-1)
    p = np.exp(s - lse[..., None])
    o = np.einsum("bhqk,bkhd->bqhd", p, vr)
    dsum = np.einsum("bqhd,bqhd->bhq", do, o)
    dp = np.einsum("bqhd,bkhd->bhqk", do, vr)
    ds = p * (dp - dsum[..., None])
    dq = np.einsum("bhqk,bkhd->bqhd", ds, kr) * scale
    dk = np.einsum("bhqk,bqhd->bkhd", ds, q) * scale
    dv = np.einsum("bhqk,bqhd->bkhd", p, do)
    b, _, hkv, d = k.shape
    return dq, dk.reshape(b, n, hkv, group, d).sum(3), dv.reshape(b, n, hkv, group, d).sum(3), lse, dsum


def _blocked_gradients(np, cfg, inputs):
    """The kernel's algorithm in float64, block by block, with the kernel's own walk
    (:meth:`BackwardConfig.step`), mask rule and scale folding: per CTA (key block kb, key/value
    head hk, batch entry b) and consumer c (64 keys), per iteration the Q / dO block
    (zero-filled past seq_len, as the TMA loads it) and its LSE / Dsum rows (0 past seq_len)."""
    import tvm
    from tvm_tirx.kernels.attention_backward.gradients import _keep

    q, k, v, do, lse, dsum = inputs
    (batch, n, _, d), analyzer = q.shape, tvm.sym.Analyzer()
    pad = lambda x, rows: np.concatenate([x, np.zeros((rows,) + x.shape[1:])])[:rows]  # noqa: E731
    dq, dk, dv = np.zeros(q.shape), np.zeros(k.shape), np.zeros(v.shape)
    for b, hk, kb, c in np.ndindex(batch, cfg.kv_heads, cfg.key_blocks, 2):
        k0 = kb * BK + c * 64
        kc, vc = pad(k[b, k0:, hk], 64), pad(v[b, k0:, hk], 64)
        acc_dk, acc_dv = np.zeros((64, d)), np.zeros((64, d))
        steps = cfg.group * int(analyzer.simplify(cfg.query_blocks(T.int32(kb), T.int32(n))))
        for g in range(steps):
            h, qb = (int(analyzer.simplify(x)) for x in cfg.step(T.int32(g), T.int32(kb), T.int32(hk), T.int32(n)))
            q0 = qb * BQ
            qs, dos = pad(q[b, q0:, h], BQ), pad(do[b, q0:, h], BQ)
            rows = [pad(x[b, h, q0:, None], BQ)[:, 0] for x in (lse, dsum)]
            p = np.exp((kc @ qs.T) * cfg.softmax_scale - rows[0][None, :])  # P^T: keys x queries
            keep = np.array([[bool(analyzer.simplify(_keep(cfg.causal, T.int32(k0 + i), T.int32(q0 + j), T.int32(n))))
                              for j in range(BQ)] for i in range(64)])
            p = np.where(keep, p, 0.0)
            ds = p * ((vc @ dos.T) - rows[1][None, :]) * cfg.softmax_scale
            acc_dv += p @ dos
            acc_dk += ds @ qs
            block = ds.T @ kc  # dQ of the block's queries: this consumer's share
            dq[b, q0 : q0 + BQ, h] += block[: max(0, min(BQ, n - q0))]
        dk[b, k0 : k0 + 64, hk] = acc_dk[: max(0, min(64, n - k0))]
        dv[b, k0 : k0 + 64, hk] = acc_dv[: max(0, min(64, n - k0))]
    return dq, dk, dv


@pytest.mark.parametrize("seq_len,causal", [(150, False), (150, True), (64, True), (200, True)])
def test_the_blocked_algorithm_gives_the_gradients(seq_len, causal):
    # the kernel's decomposition (walk, skipped causal blocks, masks, zero-filled tails, dS scaled, each
    # consumer's dQ share added once) against the dense formulas, in float64 on the CPU
    np = pytest.importorskip("numpy")
    cfg = BackwardConfig(1, seq_len, 4, 2, 64, causal=causal)
    rng = np.random.default_rng(seq_len)
    q, do = (rng.standard_normal((1, seq_len, 4, 64)) for _ in range(2))
    k, v = (rng.standard_normal((1, seq_len, 2, 64)) for _ in range(2))
    dq, dk, dv, lse, dsum = _dense_gradients(np, q, k, v, do, causal, cfg.softmax_scale)
    got = _blocked_gradients(np, cfg, (q, k, v, do, lse, dsum))
    for name, ours, ref in zip(("dQ", "dK", "dV"), got, (dq, dk, dv)):
        assert np.abs(ours - ref).max() <= 1e-9 * np.abs(ref).max(), name


def test_shared_memory_fits_and_is_stated():
    assert BackwardConfig(2, 128, 4, 4, 128).smem_bytes == 215080  # 2 stages at head_dim 128
    assert BackwardConfig(2, 128, 4, 4, 64, stages=4).smem_bytes <= 227 * 1024
    kernel = _kernel(128, False)
    assert f'"tirx.dyn_smem_bytes": {BackwardConfig(2, 128, 4, 4, 128).smem_bytes}' in testing.lower(
        make_attention_backward(2, 128, 4, 128)).script()
    assert kernel is not None


@pytest.mark.parametrize(
    "args,options,match",
    [((2, 128, 4, 256), {}, r"head_dim: expected one of \[64, 128\] \(an int\), found 256 \(256: the fp32 dK and dV"),
     ((2, 128, 4, 96), {}, r"head_dim: expected one of \[64, 128\] \(an int\), found 96$"),
     ((2, 128, 4, 64.0), {}, r"head_dim: expected one of \[64, 128\] \(an int\), found 64.0"),
     ((2, 128, 6, 128), dict(kv_heads=4), r"heads=6: expected a multiple of kv_heads=4"),
     ((2, 128, 4, 128), dict(dtype="float32"), r"dtype: expected one of \['bfloat16', 'float16'\], found 'float32'"),
     ((2, 0, 4, 128), {}, r"seq_len: expected a positive int"),
     ((True, 128, 4, 128), {}, r"batch: expected a positive int"),
     ((65536, 16, 1, 64), {}, r"batch: expected at most 65535 \(the grid's z axis\), found 65536"),
     ((2, 128, 0, 64), {}, r"heads: expected an int in 1..65535"),
     ((2, 128, 4, 64), dict(kv_heads=0), r"kv_heads: expected an int in 1..65535"),
     ((2, 128, 4, 128), dict(scale=0.0), r"scale: expected a positive finite number"),
     ((2, 128, 4, 128), dict(scale=float("nan")), r"scale: expected a positive finite number"),
     ((2, 128, 4, 128), dict(causal=1), r"causal: expected a bool, found 1"),
     ((2, 128, 4, 128), dict(stages=0), r"stages: expected an int in 1..4, found 0"),
     ((2, 128, 4, 128), dict(stages=3), r"stages=3: the kernel needs 248376 bytes of shared memory at head_dim 128, "
                                        r"more than the 232448"),
     ((1, 2**20, 64, 128), {}, r"batch x seq_len x heads x head_dim = 8589934592 elements: .* at most 2147483647"),
     ((2, 128, 4, 128), dict(dq_split="halves"),
      r"dq_split: expected one of \['keys', 'columns', 'rows'\], found 'halves'"),
     ((2, 128, 4, 128), dict(dq_split=None), r"dq_split: expected one of \['keys', 'columns', 'rows'\], found None"),
     ((2, 128, 4, 128), dict(dq_split="rows"), r"dq_split='rows' needs head_dim 64, found 128: its S\^T and dP\^T"),
     ((2, 128, 4, 64), dict(dq_split="keys", overlap=True), r"overlap=True needs dq_split='columns' or 'rows', found "
                                                            r"'keys'"),
     ((2, 128, 4, 64), dict(dq_split="rows", stages=4), r"stages=4: the kernel needs 234568 bytes"),
     ((2, 128, 4, 64), dict(dq_split="rows", deterministic=True), r"deterministic=True with dq_split='rows' is not"),
     ((2, 128, 4, 128), dict(longest_first=1), r"longest_first: expected a bool, found 1"),
     ((2, 128, 4, 128), dict(section=2), r"section=2 needs longest_first=True"),
     ((2, 128, 4, 128), dict(longest_first=True, section=3), r"section: expected an int dividing kv_heads=4"),
     ((2, 128, 4, 128), dict(longest_first=True, section=True), r"section: expected an int dividing kv_heads=4"),
     ((32768, 128, 4, 128), dict(longest_first=True, section=2), r"batch: expected at most 32767 \(the grid's z "
                                                                  r"axis: batch x 2 sections\), found 32768")],
    ids=["head-dim-256", "head-dim-96", "head-dim-float", "gqa-ratio", "dtype", "seq-len", "batch-bool",
         "batch-grid-z", "heads-0", "kv-heads-0", "scale-0", "scale-nan", "causal", "stages-0", "smem",
         "int32-elements", "dq-split", "dq-split-none", "rows-head-dim", "keys-overlap", "rows-stages",
         "rows-deterministic",
         "longest-first", "section-alone", "section-divisor",
         "section-bool", "section-grid-z"],
)
def test_sizes_and_options_it_does_not_take_are_value_errors(args, options, match):
    with pytest.raises(ValueError, match=match):
        make_attention_backward(*args, **options)


def test_a_run_time_length_of_another_dtype_is_refused():
    with pytest.raises(ValueError, match="seq_len: expected a positive int .* or an int32 run-time extent .*found L "
                                         "of dtype int64"):
        make_attention_backward(2, T.dynamic("L", "int64"), 4, 128)


def test_run_time_sizes_are_checked_against_int32_offsets_on_the_host_before_the_launch():
    from tvm_tirx.kernels.attention_backward.kernel import ELEMENTS_MESSAGE

    lowered = testing.lower(make_attention_backward(T.dynamic("B"), T.dynamic("L"), 4, 64)).script()
    host = lowered[: lowered.index("tirx.device_entry")]
    assert 'T.Cast("int64", B) * T.Cast("int64", L) * T.int64(4) * T.int64(64) <= T.int64(2147483647)' in host
    assert "B, L = T.int32(), T.int32()" in lowered  # the run-time sizes keep their names (for the host's errors)
    assert ELEMENTS_MESSAGE in host
    assert ELEMENTS_MESSAGE not in testing.lower(make_attention_backward(2, 300, 4, 64)).script()


# -- on the GPU --------------------------------------------------------------------------------


def reference(torch, q, k, v, do, causal, scale):
    """float32 autograd: ``(dq, dk, dv, o, lse)`` for q (B, L, H, D), k and v (B, L, Hkv, D);
    o (B, L, H, D) and lse (B, H, L) float32."""
    group = q.shape[2] // k.shape[2]
    qf, kf, vf = (x.detach().float().requires_grad_(True) for x in (q, k, v))
    qh, kh, vh = (x.transpose(1, 2) for x in (qf, kf, vf))  # (B, H, L, D)
    kh, vh = kh.repeat_interleave(group, dim=1), vh.repeat_interleave(group, dim=1)
    s = (qh @ kh.transpose(-1, -2)) * scale
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    o = (torch.softmax(s, dim=-1) @ vh).transpose(1, 2)
    o.backward(do.float())
    return qf.grad, kf.grad, vf.grad, o.detach(), lse.detach()


def run_backward(torch, kernel, q, k, v, do, causal):
    """Our gradients ``(dq, dk, dv)`` (dq converted from the float32 accumulator), with the
    reference's LSE and O (Dsum = rowsum(dO * O), as the caller computes it); dK and dV
    NaN-filled first."""
    scale = 1 / math.sqrt(q.shape[-1])
    ref = reference(torch, q, k, v, do, causal, scale)
    o, lse = ref[3], ref[4]
    dsum = (do.float() * o).sum(-1).transpose(1, 2).contiguous()  # (B, H, L)
    dq_acc = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    dk, dv = torch.full_like(k, float("nan")), torch.full_like(v, float("nan"))
    kernel(q, k, v, do, lse.contiguous(), dsum, dq_acc, dk, dv)
    torch.cuda.synchronize()
    return (dq_acc.to(q.dtype), dk, dv), ref[:3]


#: gradients smaller than this are compared as if they were this large: with one key (seq_len 1)
#: dQ and dK are exactly 0 and both sides round-off (about 1e-6)
FLOOR = 1e-2


def relative_errors(got, ref):
    """``(max |got - ref| / max |ref|, ||got - ref|| / ||ref||)``, references below
    :data:`FLOOR` (per entry, and in root mean square for the norm) taken as :data:`FLOOR`."""
    diff = (got.float() - ref).abs()
    worst = diff.max() / max(ref.abs().max().item(), FLOOR)
    norm = diff.norm() / max(ref.norm().item(), FLOOR * ref.numel() ** 0.5)
    return worst.item(), norm.item()


def check_gradients(torch, kernel, shape, causal, dtype, seed=0):
    """Random inputs of ``shape`` ``(batch, seq_len, heads, kv_heads, head_dim)``: each
    gradient within 2e-2 of the reference's largest entry (max |ours - ref| / max |ref|)
    and within 1e-2 in norm (:func:`relative_errors`); no NaN (dK and dV start NaN)."""
    batch, seq_len, heads, kv_heads, head_dim = shape
    torch.manual_seed(seed)
    tdtype = getattr(torch, dtype)
    q = torch.randn(batch, seq_len, heads, head_dim, device="cuda", dtype=tdtype)
    k = torch.randn(batch, seq_len, kv_heads, head_dim, device="cuda", dtype=tdtype)
    v = torch.randn(batch, seq_len, kv_heads, head_dim, device="cuda", dtype=tdtype)
    do = torch.randn(batch, seq_len, heads, head_dim, device="cuda", dtype=tdtype)
    ours, refs = run_backward(torch, kernel, q, k, v, do, causal)
    where = f"{shape} causal={causal} {dtype}"
    for name, got, ref in zip(("dQ", "dK", "dV"), ours, refs):
        assert not got.isnan().any(), f"{where}: {name} has NaN (rows not written?)"
        worst, norm = relative_errors(got, ref)
        assert worst <= 2e-2 and norm <= 1e-2, f"{where}: {name} max {worst:.2e}, norm {norm:.2e}"


def check_every_length(torch, head_dim, causal, **options):
    """One kernel of run-time sizes (8 query heads, 2 key/value heads, bfloat16, ``options``
    of ``make_attention_backward``), its gradients checked at lengths 1, 77, 128, 1000 and
    2049 (:func:`check_gradients`)."""
    func = make_attention_backward(T.dynamic("B"), T.dynamic("L"), 8, head_dim, kv_heads=2, causal=causal, **options)
    kernel = tvm_tirx.compile(func, target="cuda", options={"detect_hangs": True})
    for seq_len in (1, 77, 128, 1000, 2049):
        check_gradients(torch, kernel, (2, seq_len, 8, 2, head_dim), causal, "bfloat16", seed=seq_len)


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim,dq_split", [(64, "keys"), (64, "columns"), (64, "rows"), (128, "keys"),
                                              (128, "columns")])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_every_length_from_one_kernel_on_gpu(torch_cuda, head_dim, causal, dq_split):
    check_every_length(torch_cuda, head_dim, causal, dq_split=dq_split)


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim,dq_split,kv_heads,section", [(128, "columns", 2, None), (64, "keys", 2, None),
                                                                (128, "columns", 4, 2), (64, "columns", 4, 1),
                                                                (64, "rows", 4, 1), (64, "rows", 2, None)])
def test_longest_first_every_length_on_gpu(torch_cuda, head_dim, dq_split, kv_heads, section):
    func = make_attention_backward(T.dynamic("B"), T.dynamic("L"), 8, head_dim, kv_heads=kv_heads, causal=True,
                                   dq_split=dq_split, longest_first=True, section=section,
                                   overlap=head_dim == 128 and dq_split == "columns")
    kernel = tvm_tirx.compile(func, target="cuda", options={"detect_hangs": True})
    for batch, seq_len in ((3, 1), (2, 77), (1, 1000), (3, 2049)):
        check_gradients(torch_cuda, kernel, (batch, seq_len, 8, kv_heads, head_dim), True, "bfloat16", seed=seq_len)


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim,dtype,kv_heads,stages,dq_split",
                         [(128, "float16", 8, 2, "keys"), (64, "float16", 1, 3, "keys"), (64, "bfloat16", 8, 4, "keys"),
                          (128, "float16", 8, 3, "columns"), (128, "bfloat16", 1, 1, "columns"),
                          (64, "float16", 1, 4, "columns"), (64, "float16", 4, 3, "rows")])
def test_float16_heads_and_stages_on_gpu(torch_cuda, head_dim, dtype, kv_heads, stages, dq_split):
    for causal in (False, True):
        kernel = tvm_tirx.compile(make_attention_backward(2, 1000, 8, head_dim, kv_heads=kv_heads, causal=causal,
                                                          dtype=dtype, stages=stages, dq_split=dq_split),
                                  target="cuda", options={"detect_hangs": True})
        check_gradients(torch_cuda, kernel, (2, 1000, 8, kv_heads, head_dim), causal, dtype, seed=head_dim)


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_with_the_forward_kernels_lse_and_output_on_gpu(torch_cuda, causal):
    # the pipeline a training step runs: the forward's O and LSE, Dsum from them, the backward
    from tvm_tirx.kernels.attention import make_attention

    torch = torch_cuda
    b, n, h, hkv, d = 1, 1000, 8, 2, 128
    fwd = tvm_tirx.compile(make_attention(b, n, h, d, kv_heads=hkv, causal=causal), target="cuda")
    bwd = tvm_tirx.compile(make_attention_backward(b, n, h, d, kv_heads=hkv, causal=causal), target="cuda",
                           options={"detect_hangs": True})
    torch.manual_seed(1)
    q, do = (torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    k, v = (torch.randn(b, n, hkv, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    o, lse = torch.empty_like(q), torch.empty(b, h, n, device="cuda")
    fwd(q, k, v, o, lse)
    dsum = (do.float() * o.float()).sum(-1).transpose(1, 2).contiguous()
    dq_acc = torch.zeros(q.shape, dtype=torch.float32, device="cuda")
    dk, dv = torch.full_like(k, float("nan")), torch.full_like(v, float("nan"))
    bwd(q, k, v, do, lse, dsum, dq_acc, dk, dv)
    torch.cuda.synchronize()
    refs = reference(torch, q, k, v, do, causal, 1 / math.sqrt(d))[:3]
    for name, got, ref in zip(("dQ", "dK", "dV"), (dq_acc, dk, dv), refs):
        worst, norm = relative_errors(got, ref)
        assert worst <= 3e-2 and norm <= 2e-2, f"causal={causal}: {name} max {worst:.2e}, norm {norm:.2e}"
