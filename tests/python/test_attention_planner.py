"""The attention planner (issue 42, deliverable 4): one decision for the torch operator
and the Relax offload, visible in the op's kernel key, overridable."""

import dataclasses
import math

import pytest
from tvm import relax

from tvm_tirx import ops
from tvm_tirx.kernels.attention import AttentionPlan, choose_attention, choose_schedule, make_attention
from tvm_tirx.kernels.attention import planner
from tvm_tirx.kernels.attention.schedules import PERSISTENT_ROWS, TWO_CONSUMER_CAUSAL_ROWS
from tvm_tirx.ops import attention_kernels
from tvm_tirx.ops.relax_offload import partition_for_tvm_tirx
from tvm_tirx.script import tirx as T

SERIAL = AttentionPlan(pingpong=False, overlap=False, stages=2, persistent=False)


@pytest.fixture(autouse=True)
def _no_overrides():
    planner.clear_overrides()
    yield
    planner.clear_overrides()


@pytest.mark.parametrize("head_dim", [64, 128, 256])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("seq_len", [None, 1, 1000, PERSISTENT_ROWS, PERSISTENT_ROWS + 1, 10**5])
def test_without_overrides_the_plan_is_the_tables(head_dim, causal, seq_len):
    plan = choose_attention(head_dim, causal, seq_len)
    assert plan.options() == choose_schedule(head_dim, causal, seq_len)
    assert plan.schedule == {64: "overlapped", 128: "pingpong+overlapped", 256: "pingpong"}[head_dim]


#: head_dim 64's plans (bench/attention.py on an H100, 2026-12-06: the schedules module's table)
TWO_PERSISTENT = AttentionPlan(pingpong=False, overlap=True, stages=3, persistent=True, block_n=128)
THREE_PERSISTENT_TMA = dataclasses.replace(TWO_PERSISTENT, tma_store=True, consumers=3)
THREE_PER_TILE = dataclasses.replace(TWO_PERSISTENT, persistent=False, consumers=3)


@pytest.mark.parametrize("causal, seq_len, plan", [
    (False, None, THREE_PERSISTENT_TMA), (False, 1, THREE_PERSISTENT_TMA), (False, 1000, THREE_PERSISTENT_TMA),
    (False, PERSISTENT_ROWS, THREE_PERSISTENT_TMA), (False, PERSISTENT_ROWS + 1, THREE_PERSISTENT_TMA),
    (False, 10**5, THREE_PERSISTENT_TMA),
    # causal: three consumers win on rows past TWO_CONSUMER_CAUSAL_ROWS keys only (481 against 437 at 16384)
    (True, None, TWO_PERSISTENT), (True, 0, TWO_PERSISTENT), (True, 2048, TWO_PERSISTENT),
    (True, TWO_CONSUMER_CAUSAL_ROWS, TWO_PERSISTENT), (True, TWO_CONSUMER_CAUSAL_ROWS + 1, THREE_PER_TILE),
    (True, 16384, THREE_PER_TILE),
])
def test_head_dim_64_takes_three_consumers_for_full_rows_and_long_causal_rows(causal, seq_len, plan):
    assert choose_attention(64, causal, seq_len) == plan
    assert choose_schedule(64, causal, seq_len)["consumers"] == plan.consumers


@pytest.mark.parametrize("head_dim", [128, 256])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("seq_len", [None, 1000, PERSISTENT_ROWS + 1])
def test_head_dims_128_and_256_keep_two_consumers(head_dim, causal, seq_len):
    assert choose_attention(head_dim, causal, seq_len).consumers == 2


def test_the_two_head_dim_64_causal_kernels_and_their_names():
    # rows of unknown length and short rows: one kernel, the table's name; long rows: three consumers per tile
    plain, short, long = (attention_kernels.attention_prim_func(4, 4, 64, True, "bfloat16", 64**-0.5, p)
                          for p in (None, choose_attention(64, True, 1000), choose_attention(64, True, 8192)))
    assert short is plain and str(plain.attrs["global_symbol"]) == "tvm_tirx_attention_h4_kv4_d64_causal_bf16"
    assert str(long.attrs["global_symbol"]) == "tvm_tirx_attention_h4_kv4_d64_causal_bf16_per_tile_c3"
    full = attention_kernels.attention_prim_func(4, 4, 64, False, "bfloat16", 64**-0.5,
                                                 choose_attention(64, False, 8192))
    assert str(full.attrs["global_symbol"]) == "tvm_tirx_attention_h4_kv4_d64_full_bf16"
    two = attention_kernels.attention_prim_func(4, 4, 64, False, "bfloat16", 64**-0.5, TWO_PERSISTENT)
    assert str(two.attrs["global_symbol"]) == "tvm_tirx_attention_h4_kv4_d64_full_bf16_thread_store_c2"


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("max_seqlen", [1000, PERSISTENT_ROWS + 1])
def test_the_varlen_kernel_at_head_dim_64_runs_two_consumers(causal, max_seqlen):
    # make_attention(varlen=True) refuses three consumers (its grid counts query blocks of 128 rows)
    from tvm_tirx.ops.attention_varlen_kernels import VarlenKey, varlen_plan, varlen_prim_func

    plan = varlen_plan(64, causal, max_seqlen)
    assert (plan.consumers, plan.persistent, plan.persistent_rows, plan.tma_store) == (2, False, None, False)
    assert (plan.pingpong, plan.overlap, plan.stages) == (False, True, 3)  # the table's schedule, kept
    func = varlen_prim_func(VarlenKey(4, 2, 64, causal, "bfloat16", 0.125, "sm_90a", plan))
    assert str(func.attrs["global_symbol"]).endswith("_varlen")
    planner.override(64, causal, THREE_PER_TILE)  # whatever the override
    assert varlen_plan(64, causal, max_seqlen).consumers == 2


def _meta(n, d=128, h=4):
    torch = pytest.importorskip("torch")
    return tuple(torch.empty(2, n, h, d, dtype=torch.bfloat16, device="meta") for _ in range(3))


def test_the_ops_key_shows_the_plan_and_an_override_changes_it():
    pytest.importorskip("torch")  # the op is a torch custom op
    (key,) = ops.check(ops.attention, *_meta(1000))
    assert key.plan == attention_kernels.kernel_plan(128, False, choose_attention(128, False, 1000))
    assert key.plan.schedule == "pingpong+overlapped" and key.plan.persistent
    planner.override(128, False, SERIAL, seq_len=1000)
    (key,) = ops.check(ops.attention, *_meta(1000))
    assert key.plan == SERIAL
    (other,) = ops.check(ops.attention, *_meta(999))  # the override is for 1000 keys only
    assert other.plan.schedule == "pingpong+overlapped"
    planner.override(128, False, SERIAL)  # every length
    assert ops.check(ops.attention, *_meta(999))[0].plan == SERIAL


def test_the_ops_key_at_head_dim_64_shows_three_consumers():
    pytest.importorskip("torch")  # the op is a torch custom op
    (full,) = ops.check(ops.attention, *_meta(1000, d=64))
    assert full.plan == THREE_PERSISTENT_TMA
    (short,) = ops.check(ops.attention, *_meta(1000, d=64), causal=True)
    (long,) = ops.check(ops.attention, *_meta(TWO_CONSUMER_CAUSAL_ROWS + 1, d=64), causal=True)
    assert (short.plan, long.plan) == (TWO_PERSISTENT, THREE_PER_TILE)


def _relax_attention(seq_len, d=128):
    q = relax.Var("q", relax.TensorType([2, seq_len, 8, d], "bfloat16"))
    bb = relax.BlockBuilder()
    with bb.function("main", [q]):
        with bb.dataflow():
            out = bb.emit_output(bb.emit(relax.op.nn.attention(q, q, q)))
        bb.emit_func_output(out)
    return bb.get()


def _kernel_names(mod):
    return [gv.name_hint for gv in mod.get_global_vars() if gv.name_hint != "main"]


def test_the_relax_offload_takes_the_same_plan():
    assert _kernel_names(partition_for_tvm_tirx(_relax_attention(1024))) == ["tvm_tirx_attention_h8_kv8_d128_full_bf16"]
    planner.override(128, False, SERIAL, seq_len=1024)
    after = partition_for_tvm_tirx(_relax_attention(1024))
    name = "tvm_tirx_attention_h8_kv8_d128_full_bf16_per_tile_pp0_ov0_st2_thread_store"
    assert _kernel_names(after) == [name]
    assert after[name].same_as(attention_kernels.attention_prim_func(8, 8, 128, False, "bfloat16", 1 / math.sqrt(128),
                                                                     SERIAL))


def test_kernels_of_different_plans_never_share_a_name():
    plans = [None, SERIAL, AttentionPlan(True, False, 2, False), AttentionPlan(False, True, 3, True),
             AttentionPlan(True, True, 3, True, persistent_rows=2048), choose_attention(128, True, PERSISTENT_ROWS + 1),
             dataclasses.replace(choose_attention(128, True), tma_store=False, o_staging=None),  # stores per thread
             dataclasses.replace(choose_attention(128, True), block_n=96, o_staging=None)]  # blocks of 96 keys
    names = {str(attention_kernels.attention_prim_func(4, 4, 128, True, "bfloat16", 128**-0.5, p)
                 .attrs["global_symbol"]) for p in plans}
    assert len(names) == len(plans)
    # head_dim 64: two or three consumers, on either grid, with either store
    plans = [None, TWO_PERSISTENT, THREE_PERSISTENT_TMA, THREE_PER_TILE, dataclasses.replace(TWO_PERSISTENT,
             persistent=False), dataclasses.replace(THREE_PERSISTENT_TMA, tma_store=False)]
    names = {str(attention_kernels.attention_prim_func(4, 4, 64, True, "bfloat16", 64**-0.5, p)
                 .attrs["global_symbol"]) for p in plans}
    assert len(names) == len(plans) - 1  # None: the table's plan for unknown lengths, TWO_PERSISTENT


def test_the_varlen_kernel_stores_per_thread_whatever_the_override():
    # a TMA store writes whole 64-row boxes: in a packed batch, into the next sequence's rows
    from tvm_tirx.ops.attention_varlen_kernels import varlen_plan

    planner.override(128, True, AttentionPlan(True, True, 3, True, tma_store=True))
    assert choose_attention(128, True, 1000).tma_store
    assert not varlen_plan(128, True, 1000).tma_store


def test_a_plan_in_blocks_of_the_head_dims_default_is_the_tables_kernel():
    table = choose_attention(256, True)
    named = dataclasses.replace(table, block_n=80)  # HEAD_DIMS[256]: the same kernel, the same name
    names = {str(attention_kernels.attention_prim_func(4, 4, 256, True, "bfloat16", 256**-0.5, p)
                 .attrs["global_symbol"]) for p in (table, named)}
    default = dataclasses.replace(table, block_n=None)  # None: the head_dim's
    names |= {str(attention_kernels.attention_prim_func(4, 4, 256, True, "bfloat16", 256**-0.5, default)
                  .attrs["global_symbol"])}
    assert len(names) == 1 and table.block_n == 80 and default.options()["block_n"] is None


def test_an_override_can_give_head_dim_64_causal_rows_three_consumers():
    planner.override(64, True, THREE_PER_TILE, seq_len=2048)
    assert choose_attention(64, True, 2048) == THREE_PER_TILE and choose_attention(64, True, 2047) == TWO_PERSISTENT
    assert AttentionPlan(False, True, 3, True).consumers == 2 and TWO_PERSISTENT.options()["consumers"] == 2


def test_every_plan_is_a_kernel_make_attention_builds():
    for plan in (SERIAL, AttentionPlan(True, False, 2, True), AttentionPlan(False, True, 3, False)):
        func = make_attention(T.dynamic("B"), T.dynamic("L"), 4, 128, **plan.options())
        assert func.attrs is not None


@pytest.mark.parametrize("args, match", [
    ((256, False, AttentionPlan(False, True, 3, True)), r"head_dim 256 has room for 2 stages only"),
    ((96, False, SERIAL), r"head_dim must be one of \[64, 128, 256\]"),
    ((128, 1, SERIAL), r"causal must be a bool"),
    ((128, False, {"pingpong": True}), r"plan must be an AttentionPlan"),
    ((256, True, AttentionPlan(True, False, 2, False, block_n=96)),
     r"the plan does not fit head_dim 256: block_n=96: a consumer thread would hold 200 registers"),
    ((64, True, AttentionPlan(False, True, 3, True, block_n=72)),
     r"the plan does not fit head_dim 64: block_n: expected None or a multiple of 16"),
    ((128, False, AttentionPlan(False, True, 3, True, consumers=3)),
     r"the plan does not fit head_dim 128: consumers=3: 3 consumer warpgroups .* head_dim 64 only, "
     r"found head_dim=128"),
    ((256, True, AttentionPlan(True, False, 2, False, consumers=3)),
     r"the plan does not fit head_dim 256: consumers=3"),
    ((64, False, AttentionPlan(True, True, 3, True, consumers=3)),
     r"the plan does not fit head_dim 64: consumers=3: pingpong=True is not supported with 3 consumers"),
])
def test_an_override_the_kernels_cannot_take_is_refused(args, match):
    with pytest.raises(ValueError, match=match):
        planner.override(*args)


@pytest.mark.parametrize("fields, match", [
    (dict(pingpong=False, overlap=True, stages=2, persistent=False), r"overlapped schedule needs stages=3"),
    (dict(pingpong=False, overlap=False, stages=4, persistent=False), r"stages must be 2 or 3"),
    (dict(pingpong=False, overlap=False, stages=2, persistent=False, persistent_rows=10), r"persistent grid only"),
    (dict(pingpong=False, overlap=False, stages=2, persistent=False, block_n="80"), r"block_n must be None or an int"),
    (dict(pingpong=False, overlap=True, stages=3, persistent=True, consumers=4),
     r"AttentionPlan: consumers must be 2 or 3 \(consumer warpgroups of 64 query rows\), found 4"),
    (dict(pingpong=False, overlap=True, stages=3, persistent=True, consumers=True), r"consumers must be 2 or 3.*True"),
    (dict(pingpong=False, overlap=True, stages=3, persistent=True, consumers=3.0), r"consumers must be 2 or 3.*3\.0"),
])
def test_a_plan_the_kernel_cannot_take_is_refused(fields, match):
    with pytest.raises(ValueError, match=match):
        AttentionPlan(**fields)
