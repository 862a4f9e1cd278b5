"""``make_attention(..., v_ring=True)``: K's and V's halves of a ring stage on barriers of their own.

CPU: the producer arms two barriers per block (K's half, then V's, each of half the stage's
bytes) where it armed one; every consumer waits on V's barrier before its ``P V`` and
releases K's half as soon as its ``Q K^T`` retired, on barriers ``stages`` apart (checked
in the CUDA source); the kernels compile, pass the checker and assemble for sm_90a on
every schedule that takes them, O staged in K's stage included; the switch costs 16 bytes
of shared memory per stage, and a non-bool is a ValueError.
GPU (marker ``gpu``): O and the log-sum-exp against the float32 reference into NaN-filled
outputs at lengths around the block, on one CTA per tile and on 3 persistent CTAs whose
two rings run on over dozens of tiles (bounded waits: a broken protocol fails, not hangs).
"""

import re

import pytest

import tvm_tirx
from tvm_tirx.kernels.attention import AttentionConfig, make_attention
from tvm_tirx.script import tirx as T

from test_kernels_attention import _calls, _kernel, check

#: (head_dim, options): FlashAttention-3's two-stage overlapped schedules, the ping-pong of
#: head_dim 256 as planned, and head_dim 128's table kernel with O staged in K's stage
CASES = [(256, dict(pingpong=True, overlap=True, stages=2, tma_store=True)),
         (256, dict(pingpong=True, tma_store=True)),
         (128, dict(pingpong=True, overlap=True, stages=2, block_n=160, tma_store=True)),
         (128, dict(pingpong=True, overlap=True, stages=3, persistent=True, tma_store=True, o_staging="kv")),
         (64, dict(overlap=True, stages=2, consumers=3, persistent=True, tma_store=True))]
_IDS = ["d256-both-s2", "d256-pingpong", "d128-both-s2-bn160", "d128-persistent-o-in-k", "d64-3c-s2"]
EXPECT_TX = "tvm_builtin_ptx_mbarrier_arrive_expect_tx_arrive_expect_tx_shared__cta_b64"


def _barrier_of(line):
    """The ``dyn_smem_ptr`` uint64 index expression of the mbarrier a source line waits on or arms."""
    return re.search(r"\(\(uint64_t\*\)dyn_smem_ptr\)\[(.*?)\]\)", line).group(1)


@pytest.mark.parametrize("head_dim,options", CASES, ids=_IDS)
def test_the_producer_arms_k_and_v_on_barriers_a_ring_apart(head_dim, options):
    ring = _kernel(head_dim, True, v_ring=True, **options)
    shared = _kernel(head_dim, True, **options)
    cfg = AttentionConfig(1, 128, 4, 2, head_dim, causal=True, v_ring=True, **options)
    # Q's arms (once, or once per consumer) plus one per block: now two per block, of half the stage each
    arms_ring, arms_shared = _calls(ring, EXPECT_TX), _calls(shared, EXPECT_TX)
    assert arms_ring == arms_shared + 1
    body = ring.cuda_source[ring.cuda_source.index("__global__"):]
    half = cfg.kv_bytes // 2
    loop_arms = [line for line in body.splitlines() if EXPECT_TX + "(" in line and f"(uint){half})" in line]
    assert len(loop_arms) == 2 and f"(uint){cfg.kv_bytes})" not in body
    k_bar, v_bar = (_barrier_of(line) for line in loop_arms)
    k_base, v_base = (int(re.search(r"\+ (\d+)\)?$", b).group(1)) for b in (k_bar, v_bar))
    assert v_base - k_base == cfg.stages  # V's barrier of stage s is K's plus stages


@pytest.mark.parametrize("head_dim,options", CASES[:1] + CASES[2:3], ids=_IDS[:1] + _IDS[2:3])
def test_consumers_wait_for_v_before_p_v_and_release_k_after_q_k(head_dim, options):
    kernel = _kernel(head_dim, False, v_ring=True, **options)
    shared = _kernel(head_dim, False, **options)
    waits, arrives = "tvm_builtin_cuda_mbarrier_wait", "tvm_builtin_ptx_mbarrier_arrive_nocount_arrive_shared__cta_b64"
    # V's own waits: the producer's for its release, the consumers' before each P V (in the loop, after it)
    assert _calls(kernel, waits) == _calls(shared, waits) + 3
    assert _calls(kernel, arrives) == _calls(shared, arrives) + 2  # K's release: first block, loop
    body = kernel.cuda_source[kernel.cuda_source.index("__global__"):]
    pv = f"m64n{head_dim}k16"
    lines = body.splitlines()
    first_pv = next(i for i, line in enumerate(lines) if pv in line and "wgmma" in line)
    assert any(waits in line for line in lines[first_pv - 12 : first_pv]), "no wait just before the loop's P V"


def test_the_v_barriers_take_16_bytes_per_stage_and_the_switch_is_a_bool():
    for stages in (2, 3):
        on = AttentionConfig(1, 128, 1, 1, 128, stages=stages, v_ring=True)
        off = AttentionConfig(1, 128, 1, 1, 128, stages=stages)
        assert on.smem_bytes - off.smem_bytes == 16 * stages and on.rings == 2 and off.rings == 1
    with pytest.raises(ValueError, match=r"v_ring: expected a bool, found 1"):
        make_attention(2, 128, 4, 128, v_ring=1)


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim,options", CASES, ids=_IDS)
def test_every_length_from_one_kernel_on_gpu(torch_cuda, head_dim, options):
    bn = AttentionConfig(1, 128, 4, 2, head_dim, v_ring=True, **options).bn
    for causal in (False, True):
        func = make_attention(T.dynamic("B"), T.dynamic("L"), 4, head_dim, kv_heads=2, causal=causal, v_ring=True,
                              **options)
        kernel = tvm_tirx.compile(func, target="cuda", options={"detect_hangs": True})
        for seq_len in (1, bn - 1, bn + 1, 128, 1000, 4097):
            check(torch_cuda, kernel, 2, seq_len, 4, 2, head_dim, causal, "bfloat16", seed=seq_len)


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim,options", CASES[:1] + CASES[3:], ids=_IDS[:1] + _IDS[3:])
def test_three_ctas_run_both_rings_over_many_tiles_on_gpu(torch_cuda, head_dim, options):
    options = {**options, "persistent": True}
    for causal, dtype in ((False, "bfloat16"), (True, "float16")):
        func = make_attention(T.dynamic("B"), T.dynamic("L"), 4, head_dim, kv_heads=2, causal=causal, dtype=dtype,
                              ctas=3, v_ring=True, **options)
        kernel = tvm_tirx.compile(func, target="cuda", options={"detect_hangs": True})
        for seq_len in (1, 81, 1000, 4097):
            check(torch_cuda, kernel, 2, seq_len, 4, 2, head_dim, causal, dtype, seed=seq_len)


def test_the_switch_gives_head_dim_256_the_two_ring_plan_and_its_kernel_a_name_of_its_own(monkeypatch):
    from tvm_tirx.kernels.attention import AttentionPlan, choose_attention, schedules
    from tvm_tirx.kernels.attention.planner import clear_overrides, override
    from tvm_tirx.ops.attention_kernels import _name

    scale = 256 ** -0.5
    assert not choose_attention(256, True).v_ring  # off by default: ping-pong alone on a shared stage
    plain = _name(8, 8, 256, True, "bfloat16", scale, choose_attention(256, True))
    monkeypatch.setattr(schedules, "V_RING", True)
    plan = choose_attention(256, True, 4096)
    assert (plan.pingpong, plan.overlap, plan.stages, plan.v_ring) == (True, True, 2, True)
    assert _name(8, 8, 256, True, "bfloat16", scale, plan) == plain + "_vring"
    for head_dim in (64, 128):  # the switch is head_dim 256's only
        assert not choose_attention(head_dim, True, 4096).v_ring
    # the overlapped schedule on 2 stages is a plan only with V's own barriers
    with pytest.raises(ValueError, match=r"needs stages=3 .* or v_ring=True"):
        AttentionPlan(pingpong=True, overlap=True, stages=2, persistent=False)
    try:
        override(128, False, AttentionPlan(pingpong=True, overlap=True, stages=2, persistent=False, block_n=160,
                                           v_ring=True))
        assert choose_attention(128, False).v_ring and choose_attention(128, False).block_n == 160
    finally:
        clear_overrides()
