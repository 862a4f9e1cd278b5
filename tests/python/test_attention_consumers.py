"""``make_attention(..., consumers=3)``: three consumer warpgroups of 64 query rows (192 per CTA).

CPU: head_dim 64 with three consumers compiles and assembles for sm_90a, launches 512
threads, gives the producer 24 registers and each consumer 160 (``setmaxnreg``), issues
``Q K^T`` and ``P V`` as the two-consumer kernel does (per consumer), does not spill at
blocks of 128 keys (ptxas), sizes Q's tile, its barriers and the grid for 192 rows; the
options it does not take are ValueErrors naming the rule.  The default (two consumers)
keeps its sizes and registers.
GPU (marker ``gpu``): O and the log-sum-exp against the float32 reference into NaN-filled
outputs, at lengths around the 192-row blocks, causal or not, on one CTA per tile and on a
persistent grid of 3 CTAs (bounded waits: a broken protocol fails instead of hanging).
"""

import re

import pytest

import tvm_tirx
from tvm_tirx import testing
from tvm_tirx.kernels.attention import BM, AttentionConfig, make_attention
from tvm_tirx.kernels.attention.config import CONSUMERS, MAX_FRAGMENT_REGISTERS
from tvm_tirx.script import tirx as T

from test_kernels_attention import _calls, _kernel, check

#: the schedules three consumers run: (name, options)
SCHEDULES = {"serial": {}, "overlap": dict(overlap=True, stages=3),
             "persistent-overlap": dict(overlap=True, stages=3, persistent=True, ctas=3)}


def _built(causal, **options):
    """head_dim 64, three consumers, run-time batch and length; compiled and assembled once."""
    return _kernel(64, causal, consumers=3, **options)


@pytest.mark.parametrize("name,causal", [("serial", False), ("overlap", True), ("persistent-overlap", True)])
def test_three_consumers_launch_512_threads_with_their_registers_and_products(name, causal):
    kernel = _built(causal, **SCHEDULES[name])
    source = kernel.cuda_source
    assert "__launch_bounds__(512, 1)" in source and "__launch_bounds__(384" not in source
    assert "setmaxnreg.dec.sync.aligned.u32 24;" in source and "setmaxnreg.inc.sync.aligned.u32 160;" in source
    assert "setmaxnreg.dec.sync.aligned.u32 40;" not in source and "setmaxnreg.inc.sync.aligned.u32 232;" not in source
    issues = 2 if "overlap" in name else 1  # the overlapped schedule issues Q K^T before its loop too, P V after it
    qk = "tvm_builtin_ptx_wgmma_bf16_ss_mma_async_sync_aligned_m64n128k16_f32_bf16_bf16_1_1_0_0"
    pv = "tvm_builtin_ptx_wgmma_bf16_rs_mma_async_sync_aligned_m64n64k16_f32_bf16_bf16_1_1_1"
    assert _calls(kernel, qk) == issues * 4  # one 64-column chunk of head_dim, 4 k16 steps
    assert _calls(kernel, pv) == issues * 128 // 16


@pytest.mark.parametrize("name", SCHEDULES)
def test_three_consumers_do_not_spill(name):
    report = testing.ptxas_report(_built(True, **SCHEDULES[name]))
    assert "0 bytes spill stores, 0 bytes spill loads" in report, report


def test_the_persistent_kernel_loads_each_consumers_64_rows_of_q():
    source = _built(True, **SCHEDULES["persistent-overlap"]).cuda_source
    # Q's 192 rows: 3 x 64 x 64 bf16 -> 8192 bytes expected per consumer's barrier
    assert re.search(r"mbarrier_arrive_expect_tx\w*\([^;]*\(uint\)8192\)", source)


def test_the_sizes_follow_the_consumers():
    three = AttentionConfig(2, 1000, 4, 4, 64, consumers=3, overlap=True, stages=3)
    assert (three.bm, three.q_blocks, three.q_bytes, three.ring.arrivals) == (192, 6, 192 * 64 * 2, 3)
    assert (three.producer_registers, three.consumer_registers) == (24, 160)
    assert 128 * (three.producer_registers + 3 * three.consumer_registers) <= 65536
    assert three.fragment_budget == MAX_FRAGMENT_REGISTERS * 160 // 232
    two = AttentionConfig(2, 1000, 4, 4, 64, overlap=True, stages=3)
    assert (two.consumers, two.bm, two.q_blocks, two.ring.arrivals) == (CONSUMERS, BM, 8, 2)
    assert (two.producer_registers, two.consumer_registers, two.fragment_budget) == (40, 232, MAX_FRAGMENT_REGISTERS)
    # one more consumer: 64 rows of Q and two mbarriers (q_full, q_empty) more
    assert three.smem_bytes - two.smem_bytes == 64 * 64 * 2 + 2 * 8
    dynamic = AttentionConfig(2, T.dynamic("L"), 4, 4, 64, consumers=3)
    assert "192" in str(dynamic.q_blocks)


@pytest.mark.parametrize("head_dim,options,match", [
    (64, dict(consumers=4), r"consumers: expected 2 or 3 \(consumer warpgroups of 64 query rows\), found 4"),
    (64, dict(consumers=True), r"consumers: expected 2 or 3 .*found True"),
    (64, dict(consumers=3.0), r"consumers: expected 2 or 3 .*found 3.0"),
    (128, dict(consumers=3), r"consumers=3: 3 consumer warpgroups \(160 registers each\) are written for head_dim 64 "
                             r"only, found head_dim=128"),
    (256, dict(consumers=3), r"consumers=3: .* head_dim 64 only, found head_dim=256"),
    (64, dict(consumers=3, pingpong=True), r"consumers=3: pingpong=True is not supported with 3 consumers \(the turns"),
    (64, dict(consumers=3, varlen=True), r"consumers=3: varlen=True is not supported with 3 consumers"),
    (64, dict(consumers=3, block_n=192), r"block_n=192: a consumer thread would hold 176 registers of O, S and P .* "
                                         r"under setmaxnreg 160"),
], ids=["four", "bool", "float", "head-dim-128", "head-dim-256", "pingpong", "varlen", "registers"])
def test_what_three_consumers_do_not_take_are_value_errors(head_dim, options, match):
    with pytest.raises(ValueError, match=match):
        make_attention(2, 128, 4, head_dim, **options)


def test_three_consumers_store_o_by_tma():
    kernel = _built(False, tma_store=True, persistent=True, ctas=3)
    assert len(re.findall(r"cp\.async\.bulk\.tensor\.4d\.global\.shared::cta", kernel.ptx)) == 1


# -- on the GPU --------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["serial", "overlap"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_three_consumers_at_every_length_on_gpu(torch_cuda, causal, name):
    func = make_attention(T.dynamic("B"), T.dynamic("L"), 4, 64, kv_heads=2, causal=causal, consumers=3,
                          **SCHEDULES[name])
    kernel = tvm_tirx.compile(func, target="cuda")
    for seq_len in (1, 100, 192, 1000, 4097):
        check(torch_cuda, kernel, 2, seq_len, 4, 2, 64, causal, "bfloat16", seed=seq_len)


@pytest.mark.gpu
@pytest.mark.parametrize("options", [dict(overlap=True, stages=3), {}, dict(overlap=True, stages=3, tma_store=True)],
                         ids=["overlap", "serial", "overlap-tma-store"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_three_consumers_on_the_persistent_grid_on_gpu(torch_cuda, causal, options):
    # 3 CTAs walk many tiles each: the ring's phases and each consumer's Q hand-over run on
    # for dozens of tiles; waits are bounded (detect_hangs), so a broken protocol fails
    func = make_attention(T.dynamic("B"), T.dynamic("L"), 4, 64, kv_heads=2, causal=causal, consumers=3,
                          persistent=True, ctas=3, **options)
    kernel = tvm_tirx.compile(func, target="cuda", options={"detect_hangs": True})
    for seq_len in (1, 100, 192, 1000, 4097):
        check(torch_cuda, kernel, 2, seq_len, 4, 2, 64, causal, "bfloat16", seed=seq_len)


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_three_consumers_store_o_by_tma_on_one_cta_per_tile_on_gpu(torch_cuda, causal):
    func = make_attention(T.dynamic("B"), T.dynamic("L"), 4, 64, kv_heads=2, causal=causal, consumers=3,
                          tma_store=True, overlap=True, stages=3)
    kernel = tvm_tirx.compile(func, target="cuda", options={"detect_hangs": True})
    for seq_len in (1, 100, 192, 1000, 4097):
        check(torch_cuda, kernel, 2, seq_len, 4, 2, 64, causal, "bfloat16", seed=seq_len)
