"""The attention planner (issue 42, deliverable 4): one decision for the torch operator
and the Relax offload, visible in the op's kernel key, overridable."""

import dataclasses
import math

import pytest
from tvm import relax

from tvm_tirx import ops
from tvm_tirx.kernels.attention import AttentionPlan, choose_attention, choose_schedule, make_attention
from tvm_tirx.kernels.attention import planner
from tvm_tirx.kernels.attention.schedules import PERSISTENT_ROWS
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
             dataclasses.replace(choose_attention(128, True), tma_store=False),  # the table's, but stores per thread
             dataclasses.replace(choose_attention(128, True), block_n=96)]  # the table's, in blocks of 96 keys
    names = {str(attention_kernels.attention_prim_func(4, 4, 128, True, "bfloat16", 128**-0.5, p)
                 .attrs["global_symbol"]) for p in plans}
    assert len(names) == len(plans)


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
])
def test_an_override_the_kernels_cannot_take_is_refused(args, match):
    with pytest.raises(ValueError, match=match):
        planner.override(*args)


@pytest.mark.parametrize("fields, match", [
    (dict(pingpong=False, overlap=True, stages=2, persistent=False), r"overlapped schedule needs stages=3"),
    (dict(pingpong=False, overlap=False, stages=4, persistent=False), r"stages must be 2 or 3"),
    (dict(pingpong=False, overlap=False, stages=2, persistent=False, persistent_rows=10), r"persistent grid only"),
    (dict(pingpong=False, overlap=False, stages=2, persistent=False, block_n="80"), r"block_n must be None or an int"),
])
def test_a_plan_the_kernel_cannot_take_is_refused(fields, match):
    with pytest.raises(ValueError, match=match):
        AttentionPlan(**fields)
