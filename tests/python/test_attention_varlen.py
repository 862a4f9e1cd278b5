"""``make_attention(..., varlen=True)``: sequences of different lengths packed in one call.

CPU: the varlen kernels (head_dim 64 / 128 / 256, causal or not, bf16 / f16, GQA, the
schedules the table picks, one CTA per tile) compile with the tile checker accepting
them and assemble for sm_90a; the signature FlashAttention's varlen layout asks for; the
CUDA reads ``CuSeqlens`` per sequence, leaves before the mbarriers unless the block holds
rows of its sequence, loads boxes from the sequence's first row and stores O and the LSE
under the row guard; the checker proves the stores with no assumption (and refuses a
guard that does not bound them); options it refuses.
GPU (marker ``gpu``): lengths {1, 17, 128, 1000, 4097} in one call against a call per
sequence of the batched kernel (bit for bit) and float32 (O and LSE), NaN-filled outputs;
malformed ``CuSeqlens`` write nothing outside their rows.
"""

import math
import re

import pytest
from tvm.tirx import is_buffer_var

import tvm_tirx
from tvm_tirx import testing
from tvm_tirx.kernels.attention import epilogue, kernel, make_attention, varlen
from tvm_tirx.kernels.attention.config import BM
from tvm_tirx.script import tirx as T

#: (head_dim, causal, dtype, heads, kv_heads, options): every head_dim with the table's
#: schedule on one CTA per tile, and the serial one; the first three run by default
CASES = [
    (64, True, "bfloat16", 4, 2, dict(overlap=True, stages=3)),
    (128, False, "float16", 4, 1, dict(pingpong=True, overlap=True, stages=3)),
    (256, True, "bfloat16", 4, 4, dict(pingpong=True)),
    (64, False, "float16", 8, 8, {}),
    (64, True, "float16", 6, 2, dict(overlap=True, stages=3)),
    (64, False, "bfloat16", 4, 2, dict(overlap=True, stages=3)),
    (128, True, "bfloat16", 8, 2, dict(pingpong=True, overlap=True, stages=3)),
    (128, True, "float16", 4, 4, {}),
    (128, False, "bfloat16", 4, 2, dict(pingpong=True)),
    (256, False, "float16", 4, 2, dict(pingpong=True)),
    (256, True, "float16", 2, 1, {}),
    (256, False, "bfloat16", 4, 1, {}),
]
IDS = [f"d{d}-{'causal' if c else 'full'}-{'bf16' if t == 'bfloat16' else 'f16'}-h{h}kv{kv}-"
       f"{'-'.join(n for n in o if n != 'stages') or 'serial'}" for d, c, t, h, kv, o in CASES]
_BUILT = {}


def _compile(head_dim, causal, dtype="bfloat16", heads=4, kv_heads=2, batch=None, total=None, **options):
    """Compiled for sm_90a and assembled, once per test session."""
    if not testing.has_nvcc():
        pytest.skip("compiles for sm_90a: needs nvcc on the PATH")
    key = (head_dim, causal, dtype, heads, kv_heads, batch, total, tuple(sorted(options.items())))
    if key not in _BUILT:
        func = make_attention(T.dynamic("B") if batch is None else batch, T.dynamic("L") if total is None else total,
                              heads, head_dim, kv_heads=kv_heads, causal=causal, dtype=dtype, varlen=True, **options)
        built = tvm_tirx.compile(func, target="cuda", arch="sm_90a")
        assert len(testing.assemble(built)) > 0
        _BUILT[key] = built
    return _BUILT[key]


def _body(built):
    return built.cuda_source[built.cuda_source.index("__global__") :]


@pytest.mark.parametrize("head_dim,causal,dtype,heads,kv_heads,options",
                         [c if i < 3 else pytest.param(*c, marks=pytest.mark.slow) for i, c in enumerate(CASES)],
                         ids=IDS)
def test_every_varlen_kernel_compiles_checked_and_assembles(head_dim, causal, dtype, heads, kv_heads, options):
    built = _compile(head_dim, causal, dtype, heads, kv_heads, **options)
    t = {"bfloat16": "bf16", "float16": "f16"}[dtype]
    bn = {64: 128, 128: 128, 256: 80}[head_dim]
    assert f"wgmma_{t}_rs_mma_async_sync_aligned_m64n{head_dim}k16" in _body(built)
    # the early exit, the key mask of the sequence's length and the store guard are in every one
    assert "CuSeqlens_ptr[((int)blockIdx.z)]" in _body(built)
    assert re.search(r"key_ptr\w*\[0\] < \(end_ptr\[0\] - start_ptr\[0\]\)", _body(built))
    length = f"((end_ptr[0] + {bn - 1}) - start_ptr[0])"  # ceil(len / bn): a shift where bn is a power of two
    if bn & (bn - 1) == 0:
        assert f"({length} >> {int(math.log2(bn))})" in _body(built)
    else:  # causal: the division of min(length, the query block's last row + bn)
        assert re.search(rf"{re.escape(length)}(, .*\))? / {bn}\)", _body(built))


def test_the_signature_is_flash_attentions_varlen_layout():
    func = make_attention(T.dynamic("B"), T.dynamic("L"), 4, 128, kv_heads=2, varlen=True)
    names = [p.name for p in func.params]
    assert names == ["Q", "K", "V", "O", "LSE", "CuSeqlens", "max_seqlen"]
    shapes = {p.name: [str(s) for s in p.shape] for p in func.params if is_buffer_var(p)}
    assert shapes == {"Q": ["L", "4", "128"], "K": ["L", "2", "128"], "V": ["L", "2", "128"], "O": ["L", "4", "128"],
                      "LSE": ["4", "L"], "CuSeqlens": ["B_plus_1"]}
    assert str(func.params[5].dtype) == "int32" and not is_buffer_var(func.params[6])
    assert str(func.params[6].ty.dtype) == "int32"
    static = make_attention(3, 5000, 4, 64, varlen=True)
    assert [int(s) for s in static.params[5].shape] == [4]  # batch + 1
    # the grid: ceil(min(max_seqlen, total) / 128) query blocks (at least 1) x heads x sequences
    assert "T.cta_id([T.max((T.min(max_seqlen, L) + 128 - 1) // 128, 1), 4, B_plus_1 - 1])" in func.script()
    assert "T.cta_id([T.max((T.min(max_seqlen, 5000) + 128 - 1) // 128, 1), 4, 3])" in static.script()


def test_each_cta_finds_its_sequence_and_leaves_before_the_barriers_unless_its_block_holds_rows_of_it():
    body = _body(_compile(128, True, heads=4, kv_heads=2))
    start = body.index("start_ptr[0] = CuSeqlens_ptr[((int)blockIdx.z)];")
    end = body.index("end_ptr[0] = CuSeqlens_ptr[(((int)blockIdx.z) + 1)];")
    # 0 <= start <= end <= total, and the block's first row 128 qb before end - start (qb = q - 1 - blockIdx.x)
    live = re.search(r"if \(\(\(\(0 <= start_ptr\[0\]\) && \(start_ptr\[0\] <= end_ptr\[0\]\)\) && \(end_ptr\[0\] <= L\)\) "
                     r"&& \(\(\((\w+) \* 128\) - \(\(\(int\)blockIdx.x\) \* 128\)\) < \(\(end_ptr\[0\] \+ 128\) - "
                     r"start_ptr\[0\]\)\)\) \{", body)
    assert live, "the CTA's early exit"
    init = body.index("mbarrier_init")
    assert start < end < live.start() < init  # nothing (no barrier) before the exit but the two loads
    assert body.index("tvm_builtin_cuda_cta_sync();") > live.start()


def test_the_boxes_start_at_the_sequences_first_row_of_the_packed_tensors_seen_as_one_batch_entry():
    built = _compile(128, True, heads=4, kv_heads=2)
    body = _body(built)
    load = "tvm_builtin_ptx_cp_async_bulk_tensor_g2s_cluster_async_bulk_tensor_4d_shared__cluster_global_mbarrier__complete_tx__bytes"
    calls = re.findall(rf"{load}\((.*?)\);\n", body)
    assert len(calls) == 3 * 2  # Q, K and V, two 64-column boxes each
    q_rows = [c for c in calls if "Q_tmap" in c]
    kv_rows = [c for c in calls if "K_tmap" in c or "V_tmap" in c]
    assert all("((qb_ptr[0] * 128) + start_ptr[0]), b_ptr[0]," in c for c in q_rows)
    assert all("((j * 128) + start_ptr[0]), b_ptr[0]," in c for c in kv_rows)
    assert "b_ptr[0] = 0;" in body  # the batch coordinate of the (1, total, heads, head_dim) maps
    # the host encodes each map (innermost first) with the packed rows as axis 1 and one batch entry
    lowered = testing.lower(make_attention(T.dynamic("B"), T.dynamic("L"), 4, 128, kv_heads=2, varlen=True)).script()
    assert 'T.tensormap_encode_tiled(Q_tmap, Q.data, 128, 4, T.Cast("int64", L), 1, 256, 1024, ' in lowered
    assert 'T.tensormap_encode_tiled(K_tmap, K.data, 128, 2, T.Cast("int64", L), 1, 256, 512, ' in lowered


def test_o_and_the_lse_are_stored_at_the_sequences_rows_under_the_row_guard():
    body = _body(_compile(128, False, heads=4, kv_heads=2))
    guard = r"\(\(\(row_ptr_\d+\[0\] < \(end_ptr\[0\] - start_ptr\[0\]\)\) && \(0 <= start_ptr\[0\]\)\) && " \
            r"\(start_ptr\[0\] < \(L - row_ptr_\d+\[0\]\)\)\)"
    stores = re.findall(rf"if {guard} {{\n\s*tvm_builtin_ptx_st_global_b32\(\(&\(\(\(uint\*\)O_ptr\)\[\(\(\(\(start_ptr\[0\] "
                        r"\* 256\) \+ \(row_ptr_\d+\[0\] \* 256\)\) \+ \(\(\(int\)blockIdx.y\) \* 64\)\) \+ col_ptr", body)
    assert len(stores) == 2 * 8 * 2  # per thread: 2 chunks x 8 column words x 2 rows, each guarded
    assert len(re.findall(r"tvm_builtin_ptx_st_global_b32\(", body)) == len(stores)
    # the LSE (heads, total) by st.global.f32 too (a tile operation: the checker proves it), from lane t = 0
    lse = re.findall(rf"if {guard} {{\n.*\n\s*tvm_builtin_ptx_st_global_f32\(\(&\(LSE_ptr\[\(\(\(\(\(int\)blockIdx.y\) "
                     r"\* L\) \+ start_ptr\[0\]\) \+ row_ptr", body)
    assert len(lse) == 2 and body.count("LSE_ptr[") == 2


def _lower_with(monkeypatch, live=None, stored=None):
    """LowerTileApply (the checker) on a varlen kernel, with the CTA's live test or the
    store guard replaced."""
    if live is not None:
        monkeypatch.setattr(kernel, "sequence_live", live)
    if stored is not None:
        monkeypatch.setattr(epilogue, "packed_row_stored", stored)
    return testing.lower(make_attention(T.dynamic("B"), T.dynamic("L"), 4, 64, varlen=True))


def _block_starts_before_end(packed, start, end):
    """A live test with no well-formedness: only ``128 qb < end - start``."""
    return varlen.varlen_tile(packed)(0)[2] * BM < end - start


def test_the_checker_proves_the_stores_from_the_guard_with_no_assumption(monkeypatch):
    assert "T.assume" not in testing.lower(make_attention(T.dynamic("B"), T.dynamic("L"), 4, 64, varlen=True)).script()
    # the store guard proves O's stores by itself (with no well-formedness from the CTA's test) ...
    assert "T.assume" not in _lower_with(monkeypatch, live=_block_starts_before_end).script()


def test_the_checker_refuses_a_store_guard_that_does_not_bound_the_row(monkeypatch):
    # ... and a guard without 0 <= start (start + row may be negative) proves neither O's nor the LSE's stores
    with pytest.raises(tvm_tirx.TileError) as refused:
        _lower_with(monkeypatch, live=_block_starts_before_end,
                    stored=lambda row, start, length, total: T.And(row < length, start + row < total))
    message = str(refused.value)
    assert "2 contract violations" in message
    assert re.search(r"st.global.b32: dst \(operand 1\): view not provably within the tensor's bounds: expected bytes "
                     r"within \[0, L \* 512\) of O", message)
    assert re.search(r"st.global.f32: dst \(operand 1\): view not provably within the tensor's bounds: expected bytes "
                     r"within \[0, L \* 16\) of LSE", message)


def test_the_host_checks_run_time_sizes_before_the_launch():
    lowered = testing.lower(make_attention(T.dynamic("B"), T.dynamic("L"), 4, 64, varlen=True)).script()
    host = lowered[: lowered.index("tirx.device_entry")]
    assert 'T.Cast("int64", L) * T.int64(4) * T.int64(64) <= T.int64(2147483647)' in host
    assert varlen.VARLEN_ELEMENTS_MESSAGE in host
    assert "B_plus_1 >= 2" in host and varlen.SEQUENCES_MESSAGE in host
    static = testing.lower(make_attention(3, 300, 4, 64, varlen=True)).script()
    assert varlen.VARLEN_ELEMENTS_MESSAGE not in static and varlen.SEQUENCES_MESSAGE not in static


@pytest.mark.parametrize(
    "args,options,match",
    [((2, 128, 4, 64), dict(persistent=True), r"varlen=True: packed sequences run on one CTA per tile only; pass "
                                              r"persistent=False"),
     ((2, 128, 4, 64), dict(varlen=1), r"varlen: expected a bool, found 1"),
     ((2, 2**20, 64, 128), {}, r"seq_len \(total rows\) x heads x head_dim = 8589934592 elements: .* at most 2147483647"),
     ((65536, 2**20, 1, 64), {}, r"batch: expected at most 65535 \(the grid's z axis"),
     ((2, 0, 4, 64), {}, r"seq_len: expected a positive int")],
    ids=["persistent", "not-bool", "int32-elements", "grid-z", "total-0"],
)
def test_options_it_does_not_take_are_value_errors(args, options, match):
    with pytest.raises(ValueError, match=match):
        make_attention(*args, **{"varlen": True, **options})


def test_a_batch_of_sequences_is_not_limited_by_the_batched_element_count():
    # 64 sequences packed in 2**20 rows: the batched kernel's batch x seq_len would be 2**26 rows
    make_attention(64, 2**20, 8, 128, varlen=True)
    with pytest.raises(ValueError, match="batch x seq_len x heads x head_dim"):
        make_attention(64, 2**20, 8, 128)


# -- on the GPU --------------------------------------------------------------------------------

LENGTHS = (1, 17, 128, 1000, 4097)
#: every mbarrier wait of the varlen kernels bounded: a CTA that left early while another
#: warpgroup waits (a broken exit) traps with the barrier's line instead of hanging
HANGS = {"detect_hangs": True}


def _reference(torch, q, k, v, causal, scale):
    """O and LSE of one sequence in float32: q (n, H, D), k and v (n, Hkv, D) -> (n, H, D), (H, n)."""
    group = q.shape[1] // k.shape[1]
    qf, kf, vf = (x.float().transpose(0, 1) for x in (q, k, v))  # (H, n, D)
    kf, vf = kf.repeat_interleave(group, dim=0), vf.repeat_interleave(group, dim=0)
    s = (qf @ kf.transpose(-1, -2)) * scale
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    return (torch.softmax(s, dim=-1) @ vf).transpose(0, 1), torch.logsumexp(s, dim=-1)


def _packed(torch, lengths, heads, kv_heads, head_dim, dtype, seed=0):
    torch.manual_seed(seed)
    total, tdtype = sum(lengths), getattr(torch, dtype)
    q = torch.randn(total, heads, head_dim, device="cuda", dtype=tdtype)
    k, v = (torch.randn(total, kv_heads, head_dim, device="cuda", dtype=tdtype) for _ in range(2))
    cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32, device="cuda")
    return q, k, v, cu


def _check_against_sequences(torch, lengths, heads, kv_heads, head_dim, causal, dtype, options):
    """One varlen call into NaN-filled O and LSE, against the batched kernel per sequence
    (bit for bit: the same blocks, the keys past the sequence masked either way) and
    float32 (max |O - ref| <= 2e-2, max |LSE - ref| <= 1e-3)."""
    q, k, v, cu = _packed(torch, lengths, heads, kv_heads, head_dim, dtype)
    o = torch.full_like(q, float("nan"))
    lse = torch.full((heads, q.shape[0]), float("nan"), device="cuda")
    packed = tvm_tirx.compile(make_attention(T.dynamic("B"), T.dynamic("L"), heads, head_dim, kv_heads=kv_heads,
                                             causal=causal, dtype=dtype, varlen=True, **options), target="cuda",
                              options=HANGS)
    packed(q, k, v, o, lse, cu, max(lengths))
    single = tvm_tirx.compile(make_attention(1, T.dynamic("L"), heads, head_dim, kv_heads=kv_heads, causal=causal,
                                             dtype=dtype, **options), target="cuda")
    torch.cuda.synchronize()
    bounds = cu.tolist()
    for i, (a, b) in enumerate(zip(bounds, bounds[1:])):
        o_i = torch.full_like(q[None, a:b], float("nan"))
        lse_i = torch.full((1, heads, b - a), float("nan"), device="cuda")
        single(q[None, a:b], k[None, a:b], v[None, a:b], o_i, lse_i)
        torch.cuda.synchronize()
        where = (i, b - a, heads, kv_heads, head_dim, causal, dtype, options)
        assert torch.equal(o[a:b], o_i[0]) and torch.equal(lse[:, a:b], lse_i[0]), f"{where}: not the batched kernel's"
        ref_o, ref_lse = _reference(torch, q[a:b], k[a:b], v[a:b], causal, 1 / math.sqrt(head_dim))
        err_o, err_lse = (o[a:b].float() - ref_o).abs().max().item(), (lse[:, a:b] - ref_lse).abs().max().item()
        assert err_o <= 2e-2 and err_lse <= 1e-3, f"{where}: max error O {err_o:.2e}, LSE {err_lse:.2e}"


@pytest.mark.gpu
@testing.requires_arch("sm_90a")
@pytest.mark.parametrize("options", [{}, dict(pingpong=True), dict(overlap=True, pingpong=True, stages=3)],
                         ids=["serial", "pingpong", "overlap-pingpong"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_one_packed_call_equals_a_call_per_sequence_on_gpu(torch_cuda, causal, options):
    _check_against_sequences(torch_cuda, LENGTHS, 4, 2, 128, causal, "bfloat16", options)


@pytest.mark.gpu
@testing.requires_arch("sm_90a")
@pytest.mark.parametrize("head_dim,dtype,options", [(64, "bfloat16", dict(overlap=True, stages=3)),
                                                    (256, "bfloat16", dict(pingpong=True)), (128, "float16", {}),
                                                    (256, "bfloat16", dict(pingpong=True, overlap=True, stages=2,
                                                                           v_ring=True))],
                         ids=["d64-overlap", "d256-pingpong", "d128-f16", "d256-both-v-ring"])
def test_head_dims_and_float16_packed_on_gpu(torch_cuda, head_dim, dtype, options):
    for causal in (False, True):
        _check_against_sequences(torch_cuda, LENGTHS[::-1], 8, 1, head_dim, causal, dtype, options)


@pytest.mark.gpu
@testing.requires_arch("sm_90a")
def test_malformed_cu_seqlens_write_no_row_outside_their_sequences_on_gpu(torch_cuda):
    torch = torch_cuda
    q, k, v, _ = _packed(torch, (300, 200), 4, 2, 128, "bfloat16")
    built = tvm_tirx.compile(make_attention(T.dynamic("B"), T.dynamic("L"), 4, 128, kv_heads=2, causal=True,
                                            varlen=True), target="cuda", options=HANGS)
    # O is the first 500 rows of a larger NaN tensor: the rows past them must stay NaN
    o_all = torch.full((600, 4, 128), float("nan"), device="cuda", dtype=torch.bfloat16)
    lse = torch.full((4, 500), float("nan"), device="cuda")
    # sequences (0, 100) and (450, 500) are well formed; (100, 50) ends before it starts, (50, 700) ends past
    # the 500 rows, (700, 450) starts past them: those three are skipped
    built(q, k, v, o_all[:500], lse, torch.tensor([0, 100, 50, 700, 450, 500], dtype=torch.int32, device="cuda"), 4096)
    o_neg = torch.full((600, 4, 128), float("nan"), device="cuda", dtype=torch.bfloat16)
    lse_neg = torch.full((4, 500), float("nan"), device="cuda")
    built(q, k, v, o_neg[:500], lse_neg, torch.tensor([-7, 20], dtype=torch.int32, device="cuda"), 4096)  # start < 0
    torch.cuda.synchronize()
    written = ~o_all.isnan().flatten(1).all(dim=1)
    assert written[:100].all() and written[450:500].all() and not written[100:450].any() and not written[500:].any()
    assert (~lse.isnan()).sum().item() == 4 * 150 and o_neg.isnan().all() and lse_neg.isnan().all()
    for a, b in ((0, 100), (450, 500)):
        ref_o, ref_lse = _reference(torch, q[a:b], k[a:b], v[a:b], True, 1 / math.sqrt(128))
        assert (o_all[a:b].float() - ref_o).abs().max().item() <= 2e-2
        assert (lse[:, a:b] - ref_lse).abs().max().item() <= 1e-3
