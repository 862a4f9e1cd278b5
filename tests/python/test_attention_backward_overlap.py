"""The attention backward's overlapped schedule (``make_attention_backward(overlap=True)``).

CPU: with ``dq_split="columns"`` (and ``"rows"``, head_dim 64) it compiles with the tile checker accepting it and
assembles for sm_90a without spills or serialised wgmmas; it issues the same products
as the default schedule, in the order of :mod:`tvm_tirx.kernels.attention_backward.consumer`
(``S^T`` and ``dP^T`` in two groups, ``P^T`` after ``wait_group 1``, ``dV`` before ``dS^T``
is shared, ``dQ`` and ``dK`` in two groups, the reduce after ``wait_group 1``, under
``dK``; at head_dim 128 ``dV`` retired before ``dQ`` is issued); the default kernels are
not changed by the option's existence; the option is checked.
GPU (marker ``gpu``): the gradients against float32 autograd at every length from one
kernel (by columns and by rows), float16, GQA and stages (with ``deterministic``: its own test file).
"""

import re

import pytest

import tvm_tirx
from tvm_tirx import testing
from tvm_tirx.kernels.attention_backward import BackwardConfig, make_attention_backward
from tvm_tirx.kernels.attention_backward.config import IN_FLIGHT_REGISTERS
from tvm_tirx.script import tirx as T

from test_attention_backward import (REDUCE, WGMMA, _body, _calls, _check_configuration, _kernel, check_every_length,
                                     check_gradients)

WAIT = "tvm_builtin_ptx_wgmma_wait_group_wait_group_sync_aligned_"
COMMIT = "tvm_builtin_ptx_wgmma_commit_group_commit_group_sync_aligned"
JOIN = "tvm_builtin_ptx_barrier_sync_count_sync_aligned((uint)3, (uint)256);"

#: (head_dim, causal, dtype, kv_heads, static, stages): both head_dims, causal or not, both dtypes,
#: static and run-time sizes, the stages each head_dim's plans take
OVERLAP = [(128, True, "bfloat16", 2, False, 2), (128, False, "float16", 8, True, 3),
           (64, True, "bfloat16", 2, False, 4), (64, False, "float16", 8, True, 2)]


@pytest.mark.parametrize("head_dim,causal,dtype,kv_heads,static,stages", OVERLAP)
def test_the_overlapped_schedule_compiles_and_assembles_without_spills(head_dim, causal, dtype, kv_heads, static,
                                                                       stages):
    # _check_configuration also refuses ptxas's C75xx notes: a wgmma serialised for want of registers
    _check_configuration(head_dim, causal, dtype, kv_heads, static, stages=stages, dq_split="columns", overlap=True)


#: (causal, dtype, kv_heads, static, stages) of the overlapped order with dq_split="rows" (head_dim 64)
ROWS = [(True, "bfloat16", 2, False, 2), (False, "float16", 8, True, 3)]


@pytest.mark.parametrize("causal,dtype,kv_heads,static,stages", ROWS)
def test_the_overlapped_schedule_by_rows_compiles_and_assembles_without_spills(causal, dtype, kv_heads, static,
                                                                               stages):
    _check_configuration(64, causal, dtype, kv_heads, static, stages=stages, dq_split="rows", overlap=True)


def _consumer_loop(kernel):
    """The first consumer's main loop: from its ring wait to the drain after the loop."""
    body = _body(kernel)
    loop = body[body.index("for (int g") :]
    return loop[: loop.index("async_bulk_wait_group_async_bulk_wait_group_0")]


def _sequence(loop):
    """The loop's wgmma waits (``w0`` / ``w1``), commits (``c``), join (``J``) and reduces (``R``), in order."""
    marks = [(m.start(), f"w{m.group(1)}") for m in re.finditer(re.escape(WAIT) + r"(\d)\(", loop)]
    marks += [(m.start(), "c") for m in re.finditer(re.escape(COMMIT) + r"\(", loop)]
    marks += [(m.start(), "J") for m in re.finditer(re.escape(JOIN), loop)]
    marks += [(loop.index(REDUCE), "R")]
    return " ".join(name for _, name in sorted(marks))


@pytest.mark.parametrize("head_dim", [64, 128])
def test_the_products_are_issued_in_the_overlapped_order(head_dim):
    default, overlap = (_kernel(head_dim, True, dq_split="columns", overlap=on) for on in (False, True))
    # the same products: scores (ss), dV and dK (rs), dQ over all 128 keys (ss, both operands transposed)
    for form, n, trans in (("ss", 64, "_0_0"), ("rs", head_dim, "_1"), ("ss", head_dim // 2, "_1_1")):
        name = WGMMA.format(t="bf16", form=form, n=n, trans=trans)
        assert _calls(overlap, name) == _calls(default, name) > 0, name
    # S^T (c), dP^T (c), wait 1: P^T; wait 0: dS^T; dV (c) before the join; [128: wait 0]; dQ (c), dK (c);
    # wait 1 (dV and dQ retired), the reduce under dK, wait 0
    extra = "" if head_dim == 64 else " w0"
    assert _sequence(_consumer_loop(overlap)) == f"c c w1 w0 c J{extra} c c w1 R w0"
    assert _sequence(_consumer_loop(default)) == "c w0 J c w0 c w0 R"


def test_dv_stays_in_flight_only_where_the_registers_allow():
    configs = {d: BackwardConfig(2, 128, 4, 4, d, dq_split="columns", overlap=True) for d in (64, 128)}
    assert configs[64].dv_in_flight and not configs[128].dv_in_flight
    # dV + dK + dQ accumulators and the packed P^T and dS^T: 32 + 32 + 16 + 16 + 16 at head_dim 64
    assert IN_FLIGHT_REGISTERS == 112


def test_the_default_kernel_does_not_change_with_the_option():
    if not testing.has_nvcc():
        pytest.skip("compiles for sm_90a: needs nvcc on the PATH")

    def source(**options):
        func = make_attention_backward(T.dynamic("B"), T.dynamic("L"), 8, 128, kv_heads=2, causal=True,
                                       dq_split="columns", **options)
        return tvm_tirx.compile(func, target="cuda", arch="sm_90a").cuda_source

    assert source() == source(overlap=False) != source(overlap=True)


@pytest.mark.parametrize("options,match", [
    (dict(overlap=True), r"overlap=True needs dq_split='columns' or 'rows', found 'keys': with 'keys' a consumer"),
    (dict(overlap=1, dq_split="columns"), r"overlap: expected a bool, found 1"),
])
def test_options_it_does_not_take_are_value_errors(options, match):
    with pytest.raises(ValueError, match=match):
        make_attention_backward(2, 128, 4, 128, **options)


# -- on the GPU --------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("head_dim", [64, 128])
def test_every_length_from_one_overlapped_kernel_on_gpu(torch_cuda, head_dim, causal):
    check_every_length(torch_cuda, head_dim, causal, dq_split="columns", overlap=True, stages=2)


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_every_length_from_one_overlapped_kernel_by_rows_on_gpu(torch_cuda, causal):
    check_every_length(torch_cuda, 64, causal, dq_split="rows", overlap=True, stages=2)


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim,dtype,kv_heads,stages", [(128, "float16", 8, 3), (128, "bfloat16", 1, 1),
                                                            (64, "float16", 1, 4), (64, "bfloat16", 8, 3)])
def test_float16_heads_and_stages_overlapped_on_gpu(torch_cuda, head_dim, dtype, kv_heads, stages):
    # with deterministic=True too: tests/python/test_attention_backward_deterministic.py (a part of its own)
    for causal in (False, True):
        func = make_attention_backward(2, 1000, 8, head_dim, kv_heads=kv_heads, causal=causal, dtype=dtype,
                                       stages=stages, dq_split="columns", overlap=True)
        kernel = tvm_tirx.compile(func, target="cuda", options={"detect_hangs": True})
        check_gradients(torch_cuda, kernel, (2, 1000, 8, kv_heads, head_dim), causal, dtype, seed=head_dim)
