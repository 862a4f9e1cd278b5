"""``make_attention(..., tma_store=True)``: O stored through shared memory and TMA boxes.

CPU: at head_dim 64, 128 and 256, causal or not, on the persistent grid and one CTA per
tile, in the schedules the planner uses, the tile checker accepts the kernel, it
assembles for sm_90a, and its PTX stores O by ``head_dim / 64`` 4-d TMA stores and no
``st.global.b32``; where the staging tile is Q's rows on the persistent grid, Q's rows
are released after the store has read them; where it is the last block's K stage, the
consumer waits for the other's hand-over and releases the stage after the read; the
shared-memory bytes per configuration;
options it does not take are ValueErrors; the default plans do not set it.
GPU (marker ``gpu``): O and the log-sum-exp against the float32 reference, NaN-filled
outputs, lengths 1 .. 4097 from one kernel, a persistent grid of 3 CTAs that reuses
the staging tile (its own, Q's rows or the last block's K stage) over dozens of tiles
(and, with K's stage, over a few tiles: a size compute-sanitizer's racecheck finishes).
"""

import dataclasses
import re

import pytest

import tvm_tirx
from tvm_tirx import testing
from tvm_tirx.kernels.attention import AttentionConfig, AttentionPlan, choose_attention, make_attention
from tvm_tirx.kernels.attention.o_store import BARRIER_BASE
from tvm_tirx.script import tirx as T

from test_kernels_attention import check

PER_TILE = dict(pingpong=True, overlap=True, stages=3)  # head_dim 128's table schedule on one CTA per tile
KV = dict(PER_TILE, persistent=True, o_staging="kv")  # the table's at head_dim 128 with KV_STAGING on
#: (head_dim, causal, schedule): the table's schedules (persistent for short rows at 128), and the others
CASES = [
    (64, False, "table"), (64, True, "table"), (64, False, dict(stages=2)),
    (128, False, "table"), (128, True, "table"), (128, True, PER_TILE),
    (128, False, dict(pingpong=True, stages=2, persistent=True)),
    (128, True, dict(pingpong=True, overlap=True, stages=2, persistent=True)),  # FA3's two stages, O's own tile
    (256, False, "table"), (256, True, "table"), (256, True, dict(pingpong=True, persistent=True)),
]
_IDS = [f"d{d}-{'causal' if c else 'full'}-{s if isinstance(s, str) else '-'.join(f'{k}{v}' for k, v in s.items())}"
        for d, c, s in CASES]
STORE = r"cp\.async\.bulk\.tensor\.4d\.global\.shared::cta\.bulk_group"
_BUILT = {}


def _options(head_dim, causal, schedule):
    """``make_attention``'s options: the table's plan for rows of 512 keys with ``tma_store``
    set (as the planner carries it: at head_dim 64, full, in three consumer warpgroups), or
    ``schedule`` and ``tma_store``."""
    if schedule != "table":
        return dict(schedule, tma_store=True)
    return dataclasses.replace(choose_attention(head_dim, causal, 512), tma_store=True).options()


def _kernel(head_dim, causal, schedule):
    if not testing.has_nvcc():
        pytest.skip("compiles for sm_90a: needs nvcc on the PATH")
    key = (head_dim, causal, repr(schedule))
    if key not in _BUILT:
        func = make_attention(T.dynamic("B"), T.dynamic("L"), 4, head_dim, kv_heads=2, causal=causal,
                              **_options(head_dim, causal, schedule))
        kernel = tvm_tirx.compile(func, target="cuda", arch="sm_90a")
        assert len(testing.assemble(kernel)) > 0
        _BUILT[key] = kernel
    return _BUILT[key]


@pytest.mark.parametrize("head_dim,causal,schedule", CASES, ids=_IDS)
def test_o_leaves_by_tma_stores_and_no_per_thread_store(head_dim, causal, schedule):
    kernel = _kernel(head_dim, causal, schedule)
    ptx, body = kernel.ptx, kernel.cuda_source[kernel.cuda_source.index("__global__") :]
    assert len(re.findall(STORE, ptx)) == head_dim // 64  # one 64 x 64 box per 64 columns, from one thread
    assert not re.findall(r"st\.global\.b32", ptx)  # O's per-thread stores are gone (LSE: st.global.f32)
    assert len(re.findall(r"fence\.proxy\.async\.shared::cta", ptx)) == 1
    assert len(re.findall(r"cp\.async\.bulk\.commit_group", ptx)) == 1
    assert len(re.findall(r"cp\.async\.bulk\.wait_group 0", ptx)) == 1  # the drain before the CTA exits
    # the warpgroup's own named barrier, twice per tile: after the wait for the previous store, after the fence
    barrier = f"tvm_builtin_ptx_barrier_sync_count_sync_aligned(((uint)(c_ptr[0] + {BARRIER_BASE})), (uint)128);"
    assert body.count(barrier) == 2


def test_the_staging_tile_and_shared_memory_per_configuration():
    def config(head_dim, stages, **options):
        return AttentionConfig(2, 1024, 4, 4, head_dim, stages=stages, tma_store=True, **options)

    # (head_dim, stages, block_n) -> (where O is staged, dynamic shared memory in bytes)
    persistent = dict(stages=3, tma_store=True, pingpong=True, persistent=True)
    staged = AttentionConfig(2, 1024, 4, 4, 128, o_staging="kv", **persistent)
    assert (staged.o_tile, staged.smem_bytes) == ("kv", 230480 + 32)  # K's stage, and 4 mbarriers of the hand-over
    assert AttentionConfig(2, 1024, 4, 4, 128, **persistent).o_tile == "q"  # asked for only
    expected = {(64, 2, None): ("own", 99392), (64, 3, None): ("own", 132176), (64, 4, None): ("own", 164960),
                (128, 2, None): ("own", 197696), (128, 3, None): ("q", 230480), (256, 1, None): ("own", 214064),
                (256, 2, None): ("q", 230464), (256, 1, 64): ("own", 197680), (256, 2, 64): ("q", 197696)}
    for (head_dim, stages, block_n), (tile, smem) in expected.items():
        cfg = config(head_dim, stages, block_n=block_n)
        assert (cfg.o_tile, cfg.smem_bytes) == (tile, smem), (head_dim, stages, block_n)
        plain = AttentionConfig(2, 1024, 4, 4, head_dim, stages=stages, block_n=block_n)
        assert plain.o_tile is None and plain.smem_bytes == smem - (cfg.q_bytes if tile == "own" else 0)
        assert smem <= 232448


_RELEASE = (r"mbarrier_arrive_nocount_arrive_shared__cta_b64\(tvm_builtin_cuda_cvta_generic_to_shared"
            r"\(\(&\(\(\(uint64_t\*\)dyn_smem_ptr\)\[\(c_ptr\[0\] \+ \d+\)\]")
_STAGE_RELEASE = (r"mbarrier_arrive_nocount_arrive_shared__cta_b64\(tvm_builtin_cuda_cvta_generic_to_shared"
                  r"\(\(&\(\(\(uint64_t\*\)dyn_smem_ptr\)\[\(\(\(\(\(done_ptr\[0\] \+ n_kv")
_READ_WAIT = "tvm_builtin_ptx_cp_async_bulk_wait_group_async_bulk_wait_group_read_0();"


@pytest.mark.parametrize("head_dim,causal,schedule,after", [
    (128, False, dict(PER_TILE, persistent=True, o_staging="q"), True),  # Q's rows stage O: released after the read
    (256, True, dict(pingpong=True, persistent=True), True),
    (64, False, "table", False),  # a tile of its own: released after the last Q K^T, as without the option
    (128, False, dict(pingpong=True, stages=2, persistent=True), False),
    (128, True, dict(pingpong=True, overlap=True, stages=2, persistent=True), False),
    (128, False, KV, False),  # K's stage stages O (below): Q's rows released after the last Q K^T
    (128, False, dict(PER_TILE, persistent=True), True),  # the table's plan with KV_STAGING off
])
def test_q_rows_are_released_after_the_store_read_them_where_they_stage_o(head_dim, causal, schedule, after):
    body = _kernel(head_dim, causal, schedule).cuda_source
    body = body[body.index("__global__") :]
    store = body.index("tvm_builtin_ptx_cp_async_bulk_tensor_s2g")
    release = re.search(_RELEASE, body)
    assert release is not None
    assert (release.start() > store) == after
    if after:  # the issuing thread waits for the read (and the next tile's wait finds no group): two waits
        assert body.count(_READ_WAIT) == 2


@pytest.mark.parametrize("causal", [False, True])
def test_o_staged_in_k_stage_waits_for_the_other_consumer_and_releases_the_stage_after_the_read(causal):
    # the table's plan at head_dim 128 with KV_STAGING on, for causal rows and full rows of at most
    # KV_STAGING_FULL_ROWS keys (persistent, ping-pong, three stages: no tile of its own fits): O in K's stage
    body = _kernel(128, causal, KV).cuda_source
    body = body[body.index("__global__") :]
    store = body.index("tvm_builtin_ptx_cp_async_bulk_tensor_s2g")
    # the hand-over: consumer c arrives on entry 2 (1 - c) + i % 2 of k_read, waits on 2 c + i % 2 in phase i // 2 % 2
    smem = r"\(\(&\(\(\(uint64_t\*\)dyn_smem_ptr\)"
    arrive = re.search(r"arrive_shared__cta_b64\(tvm_builtin_cuda_cvta_generic_to_shared" + smem +
                       r"\[\(\(\((\w+) & 1\) \+ (\d+)\) - \(c_ptr\[0\] \* 2\)\)\]", body)
    wait = re.search(r"mbarrier_wait" + smem + r"\[\(\(\(c_ptr\[0\] \* 2\) \+ \((\w+) & 1\)\) \+ (\d+)\)\]\)\), "
                     r"\(\((\w+) & 3\) >> 1\)\)", body)
    assert arrive and wait and arrive.group(1) == wait.group(1) == wait.group(3)  # the tile counter
    assert int(arrive.group(2)) == int(wait.group(2)) + 2  # the other consumer's pair of entries
    staging = body.index(f"tvm_builtin_ptx_barrier_sync_count_sync_aligned(((uint)(c_ptr[0] + {BARRIER_BASE}))")
    assert re.search(_RELEASE, body).start() < arrive.start() < wait.start() < staging < store  # Q's rows go first
    # the last block's stage: released once, after the store has read it (the loop releases the others)
    stage_release = [m.start() for m in re.finditer(_STAGE_RELEASE, body)]
    assert len(stage_release) == 1 and stage_release[0] > body.index(_READ_WAIT, store) > store
    assert body.count(_READ_WAIT) == 2


def test_plans_store_by_tma_where_it_was_measured_faster():
    # head_dim 128 and 256, and 64's full rows in three consumers (measured on an H100: the
    # schedules module's table); 64's causal rows not (within noise in two consumers, not timed
    # in three on one CTA per tile)
    for head_dim in (64, 128, 256):
        for causal in (False, True):
            for seq_len in (None, 1024, 10**5):
                plan = choose_attention(head_dim, causal, seq_len)
                assert plan.tma_store is (head_dim != 64 or not causal)
                assert plan.options()["tma_store"] is plan.tma_store
    plan = AttentionPlan(True, True, 3, True, tma_store=True)
    assert plan.options()["tma_store"] is True


@pytest.mark.parametrize("make,match", [
    (lambda: make_attention(2, 1000, 4, 128, varlen=True, tma_store=True), r"tma_store=True: .*varlen=False"),
    (lambda: make_attention(2, 1000, 4, 128, tma_store=1), r"tma_store: expected a bool"),
    (lambda: AttentionPlan(False, False, 2, False, tma_store="yes"), r"AttentionPlan: tma_store must be a bool"),
    (lambda: make_attention(2, 1000, 4, 128, stages=4, tma_store=True), r"stages=4: .* bytes of shared memory"),
    (lambda: make_attention(2, 1000, 4, 128, o_staging="kv"), r"o_staging='kv': .*needs tma_store=True"),
    (lambda: make_attention(2, 1000, 4, 128, tma_store=True, o_staging="v"), r"o_staging: expected None or one of"),
    (lambda: make_attention(2, 1000, 4, 128, tma_store=True, pingpong=True, o_staging="kv"),
     r"o_staging='kv': persistent=False"),
    (lambda: make_attention(2, 1000, 4, 128, tma_store=True, overlap=True, stages=3, persistent=True,
                            o_staging="kv"), r"o_staging='kv': .*pingpong=True"),
    (lambda: make_attention(2, 1000, 4, 128, tma_store=True, pingpong=True, persistent=True, block_n=64,
                            o_staging="kv"), r"o_staging='kv': block_n=64: K's stage must hold"),
    (lambda: make_attention(2, 1000, 4, 128, tma_store=True, stages=3, o_staging="own"),
     r"o_staging='own': O's tile of 32768 bytes does not fit"),
    (lambda: make_attention(2, 1000, 4, 128, tma_store=True, pingpong=True, persistent=True, block_n=144,
                            o_staging="kv"), r"o_staging='kv': block_n=144: .*a multiple of 64"),
    (lambda: AttentionPlan(True, True, 3, True, o_staging="kv"),
     r"AttentionPlan: o_staging='kv': .*needs tma_store=True"),
    (lambda: AttentionPlan(True, True, 3, True, tma_store=True, o_staging="k"),
     r"AttentionPlan: o_staging: expected None or one of"),
])
def test_options_it_does_not_take_are_value_errors(make, match):
    with pytest.raises(ValueError, match=match):
        make()


# -- on the GPU --------------------------------------------------------------------------------


@testing.requires_arch("sm_90a")
@pytest.mark.parametrize("head_dim,causal,schedule", CASES, ids=_IDS)
def test_every_length_from_one_kernel_on_gpu(torch_cuda, head_dim, causal, schedule):
    options = _options(head_dim, causal, schedule)
    func = make_attention(T.dynamic("B"), T.dynamic("L"), 4, head_dim, kv_heads=2, causal=causal, **options)
    kernel = tvm_tirx.compile(func, target="cuda", options={"detect_hangs": True})
    for seq_len in (1, 77, 128, 1000, 4097):
        check(torch_cuda, kernel, 2, seq_len, 4, 2, head_dim, causal, "bfloat16", seed=seq_len)


@testing.requires_arch("sm_90a")
@pytest.mark.parametrize("head_dim,schedule", [(64, dict(overlap=True, stages=3)), (128, PER_TILE),
                                               (128, dict(PER_TILE, o_staging="kv")),
                                               (128, dict(pingpong=True, stages=3, o_staging="kv")),
                                               (128, dict(pingpong=True, stages=2)), (256, dict(pingpong=True))],
                         ids=["d64-own", "d128-q", "d128-kv", "d128-kv-serial", "d128-own", "d256-q"])
def test_three_ctas_reuse_the_staging_tile_over_many_tiles_on_gpu(torch_cuda, head_dim, schedule):
    # 3 CTAs walk dozens of tiles each: the staging tile (its own, Q's rows released after the store, or
    # the last block's K stage, released after the store) is rewritten once per tile; bounded waits
    # (detect_hangs) turn a broken hand-over into a failure
    _three_ctas(torch_cuda, head_dim, schedule, batch=2, seq_lens=(1, 77, 1000, 4097))


def _three_ctas(torch, head_dim, schedule, batch, seq_lens):
    """A persistent grid of 3 CTAs with O stored by TMA, full and causal, checked at each of
    ``seq_lens`` (4 query heads, 2 key/value heads, ``batch`` sequences)."""
    for causal in (False, True):
        func = make_attention(T.dynamic("B"), T.dynamic("L"), 4, head_dim, kv_heads=2, causal=causal,
                              persistent=True, ctas=3, tma_store=True, **schedule)
        kernel = tvm_tirx.compile(func, target="cuda", options={"detect_hangs": True})
        for seq_len in seq_lens:
            check(torch, kernel, batch, seq_len, 4, 2, head_dim, causal, "bfloat16", seed=seq_len)


@testing.requires_arch("sm_90a")
@pytest.mark.parametrize("schedule", [dict(PER_TILE, o_staging="kv"), dict(pingpong=True, stages=3, o_staging="kv")],
                         ids=["kv", "kv-serial"])
def test_kv_hand_over_at_racecheck_size_on_gpu(torch_cuda, schedule):
    # the K-stage hand-over on a few tiles, small enough for compute-sanitizer's racecheck (which did not
    # finish the test above in 9 minutes): 77 keys give four one-block tiles, 300 keys twelve tiles of
    # three blocks, four per CTA, so each CTA hands its stage over after tiles of both kinds
    _three_ctas(torch_cuda, 128, schedule, batch=1, seq_lens=(77, 300))


@testing.requires_arch("sm_90a")
def test_float16_and_a_static_length_on_gpu(torch_cuda):
    for causal in (False, True):
        kernel = tvm_tirx.compile(make_attention(3, 1000, 8, 128, kv_heads=1, causal=causal, dtype="float16",
                                                 **_options(128, causal, "table")), target="cuda")
        check(torch_cuda, kernel, 3, 1000, 8, 1, 128, causal, "float16", seed=7)
