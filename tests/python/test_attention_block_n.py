"""``make_attention(..., block_n=N)``: keys per block other than the head_dim's default.

CPU: blocks of 80 keys at head_dim 256, 160 / 192 at 64 and 160 / 96 at 128 compile, assemble
for sm_90a and issue the instructions their sizes name (``Q K^T`` as ``m64n<N>k16`` ss
wgmmas, ``P V`` as ``N / 16`` rs wgmmas, ``N / 2`` exponentials per softmax); sizes it
does not take are ValueErrors naming the rule.
GPU (marker ``gpu``): O and the log-sum-exp against the float32 reference into NaN-filled
outputs, at lengths that are and are not multiples of the block (causal blocks then
straddle the query blocks' rows unevenly), on one CTA per tile and on a persistent grid
of 3 CTAs whose ring runs on over dozens of tiles (bounded waits: a broken protocol fails).
"""

import pytest

import tvm_tirx
from tvm_tirx import testing
from tvm_tirx.kernels.attention import AttentionConfig, make_attention
from tvm_tirx.script import tirx as T

from test_kernels_attention import _calls, _kernel, check

#: (head_dim, block_n, schedule): the sizes the block sweep measures
CASES = [(256, 80, dict(pingpong=True)), (256, 80, dict(pingpong=True, tma_store=True)),
         (64, 192, dict(overlap=True, stages=3, persistent=True)), (64, 160, dict(overlap=True, stages=3)),
         (128, 160, dict(pingpong=True, overlap=True, stages=2, tma_store=True)),
         (128, 96, dict(pingpong=True, overlap=True, stages=3, persistent=True, tma_store=True))]
_IDS = [f"d{d}-bn{bn}-" + "-".join(f"{k}{v}" for k, v in s.items()) for d, bn, s in CASES]


def _built(head_dim, block_n, schedule, causal):
    return _kernel(head_dim, causal, block_n=block_n, **schedule)


@pytest.mark.parametrize("head_dim,block_n,schedule", CASES[::2] + CASES[3:4], ids=_IDS[::2] + _IDS[3:4])
def test_a_block_of_n_keys_issues_the_products_of_n_keys(head_dim, block_n, schedule):
    kernel = _built(head_dim, block_n, schedule, True)
    chunks = head_dim // 64
    qk = f"tvm_builtin_ptx_wgmma_bf16_ss_mma_async_sync_aligned_m64n{block_n}k16_f32_bf16_bf16_1_1_0_0"
    pv = f"tvm_builtin_ptx_wgmma_bf16_rs_mma_async_sync_aligned_m64n{head_dim}k16_f32_bf16_bf16_1_1_1"
    issues = 2 if schedule.get("overlap") else 1  # the overlapped schedule issues Q K^T before its loop too
    assert _calls(kernel, qk) == issues * chunks * 4
    pv_issues = 2 if schedule.get("overlap") else 1  # and P V after it
    assert _calls(kernel, pv) == pv_issues * block_n // 16
    assert _calls(kernel, "tvm_builtin_ptx_ex2_approx_ftz_f32") == issues * 2 * block_n // 2


def test_the_default_block_is_the_head_dims():
    for head_dim, bn in ((64, 128), (128, 128), (256, 80)):
        assert AttentionConfig(1, 128, 1, 1, head_dim).bn == bn
        assert AttentionConfig(1, 128, 1, 1, head_dim, block_n=80).bn == 80


def test_a_stage_of_n_keys_takes_its_bytes():
    base = AttentionConfig(1, 128, 1, 1, 256, stages=2, block_n=64)
    wide = AttentionConfig(1, 128, 1, 1, 256, stages=2)
    assert wide.kv_bytes == 2 * 80 * 256 * 2 and wide.smem_bytes - base.smem_bytes == 2 * 2 * 16 * 256 * 2


@pytest.mark.parametrize("head_dim,options,match", [
    (128, dict(block_n=72), r"block_n: expected None or a multiple of 16 in 16..256 .*found 72"),
    (64, dict(block_n=272), r"block_n: expected None or a multiple of 16 in 16..256 .*found 272"),
    (64, dict(block_n=0), r"found 0"),
    (64, dict(block_n=True), r"found True"),
    (64, dict(block_n=128.0), r"found 128.0"),
    (64, dict(block_n=256), r"block_n=256: a consumer thread would hold 224 registers of O, S and P at head_dim 64"),
    (256, dict(stages=3), r"stages=3: the kernel needs \d+ bytes of shared memory"),
    (256, dict(block_n=96), r"block_n=96: a consumer thread would hold 200 registers"),
    (128, dict(block_n=160, stages=3), r"stages=3: the kernel needs \d+ bytes of shared memory"),
    (128, dict(block_n=176, stages=2), r"block_n=176: a consumer thread would hold 196 registers"),
], ids=["not-16", "over-256", "zero", "bool", "float", "registers", "smem-256", "registers-256", "smem-128", "registers-128"])
def test_blocks_it_does_not_take_are_value_errors(head_dim, options, match):
    with pytest.raises(ValueError, match=match):
        make_attention(2, 128, 4, head_dim, **options)


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim,block_n,schedule", CASES, ids=_IDS)
def test_every_length_from_one_kernel_on_gpu(torch_cuda, head_dim, block_n, schedule):
    for causal in (False, True):
        func = make_attention(T.dynamic("B"), T.dynamic("L"), 4, head_dim, kv_heads=2, causal=causal,
                              block_n=block_n, **schedule)
        kernel = tvm_tirx.compile(func, target="cuda", options={"detect_hangs": True})
        for seq_len in (1, block_n - 1, block_n + 1, 128, 1000, 4097):
            check(torch_cuda, kernel, 2, seq_len, 4, 2, head_dim, causal, "bfloat16", seed=seq_len)


@testing.requires_arch("sm_90a")
@pytest.mark.parametrize("head_dim,block_n,schedule", [(256, 80, dict(pingpong=True)),
                                                       (64, 192, dict(overlap=True, stages=3))], ids=["d256", "d64"])
def test_three_ctas_run_the_ring_over_many_tiles_on_gpu(torch_cuda, head_dim, block_n, schedule):
    for causal in (False, True):
        func = make_attention(T.dynamic("B"), T.dynamic("L"), 4, head_dim, kv_heads=2, causal=causal,
                              persistent=True, ctas=3, block_n=block_n, **schedule)
        kernel = tvm_tirx.compile(func, target="cuda", options={"detect_hangs": True})
        for seq_len in (1, 81, 1000, 4097):
            check(torch_cuda, kernel, 2, seq_len, 4, 2, head_dim, causal, "bfloat16", seed=seq_len)
