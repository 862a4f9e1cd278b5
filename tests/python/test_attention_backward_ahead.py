"""The attention backward's ``scores_ahead`` order (``make_attention_backward(overlap=True,
scores_ahead=True)``): the next query block's ``S^T`` issued while this block's ``dK`` runs.

CPU: it compiles with the tile checker accepting it (the ring's protocol with each stage
released one iteration later) and assembles for sm_90a without spills or serialised
wgmmas; the consumer issues the products in the order of
:func:`tvm_tirx.kernels.attention_backward.consumer._make_ahead` (the next ``S^T`` after the
reduce, before the wait that retires ``dK``; no group in flight where the loop turns);
``dK`` reads ``dS^T`` from shared memory (ss) and ``dV`` still takes ``P^T`` from registers
(rs); the kernels without the option do not change; the option is checked.
GPU (marker ``gpu``): the gradients against float32 autograd at every length from one
kernel, float16, GQA, stages and the operator's sections (``deterministic``'s same bits:
``test_attention_backward_deterministic.py``).
"""

import re

import pytest

import tvm_tirx
from tvm_tirx import testing
from tvm_tirx.kernels.attention_backward import make_attention_backward
from tvm_tirx.kernels.attention_backward.consumer import DP_AHEAD_HEAD_DIMS
from tvm_tirx.script import tirx as T

from test_attention_backward import WGMMA, _calls, _check_configuration, _kernel, check_every_length, check_gradients
from test_attention_backward_overlap import _sequence

#: (head_dim, causal, dtype, kv_heads, static, stages): both head_dims, causal or not, both dtypes,
#: static and run-time sizes, 2 and 3 stages (3 fits head_dim 128 with "columns")
AHEAD = [(128, True, "bfloat16", 2, False, 2), (128, False, "float16", 8, True, 3),
         (64, True, "bfloat16", 2, False, 4), (64, False, "float16", 8, True, 2)]
OPTIONS = {"dq_split": "columns", "overlap": True, "scores_ahead": True}


@pytest.mark.parametrize("head_dim,causal,dtype,kv_heads,static,stages", AHEAD)
def test_scores_ahead_compiles_and_assembles_without_spills(head_dim, causal, dtype, kv_heads, static, stages):
    # _check_configuration refuses ptxas's C75xx notes too: every wgmma serialised (an S^T in flight where the
    # loop turned gave C7514/C7515; one under dK whose A was the packed dS^T in registers gave C7512)
    _check_configuration(head_dim, causal, dtype, kv_heads, static, stages=stages, **OPTIONS)


@pytest.mark.parametrize("causal,dtype,static,stages", [(True, "bfloat16", False, 2), (False, "float16", True, 3)])
def test_scores_ahead_by_rows_compiles_and_assembles_without_spills(causal, dtype, static, stages):
    # head_dim 64's plan splits dQ by rows: dK's dS^T from sds then takes two calls, one per 64-query chunk
    _check_configuration(64, causal, dtype, 2, static, stages=stages, dq_split="rows", overlap=True, scores_ahead=True)
    kernel = _kernel(64, causal, dtype, 2, static, stages=stages, dq_split="rows", overlap=True, scores_ahead=True)
    t = {"bfloat16": "bf16", "float16": "f16"}[dtype]
    rs, ss = (WGMMA.format(t=t, form=form, n=64, trans=trans) for form, trans in (("rs", "_1"), ("ss", "_0_1")))
    assert _calls(kernel, rs) == 8 and _calls(kernel, ss) == 8  # dV: 128 queries in k16 steps; dK: 2 x 4


@pytest.mark.parametrize("head_dim,options", [(64, dict(deterministic=True, stages=4)),
                                              (128, dict(longest_first=True, section=1, stages=2))],
                         ids=["deterministic", "sections"])
def test_scores_ahead_with_the_operators_other_options(head_dim, options):
    # deterministic at head_dim 128 spilled 8 bytes: refused (test_options_it_does_not_take_are_value_errors)
    _check_configuration(head_dim, True, "bfloat16", 2, False, **OPTIONS, **options)


def _consumer(kernel):
    """The first consumer's code: from its wait for K and V to the drain after its loop."""
    body = kernel.cuda_source[kernel.cuda_source.index("__global__") :]
    start = body.index("setmaxnreg_inc")
    return body[start : body.index("async_bulk_wait_group_async_bulk_wait_group_0", start)]


@pytest.mark.parametrize("head_dim", [64, 128])
def test_the_next_scores_are_issued_under_dk(head_dim):
    kernel = _kernel(head_dim, True, **OPTIONS)
    consumer = _consumer(kernel)
    loop = consumer[consumer.index("for (int g") :]
    before = consumer[: consumer.index("for (int g")]
    marks = re.findall(r"commit_group_sync_aligned\(|wait_group_sync_aligned_(\d)\(", before)
    if head_dim == 64:  # DP_AHEAD_HEAD_DIMS: S^T (c) and dP^T (c), wait 1, P^T, wait 0
        assert 64 in DP_AHEAD_HEAD_DIMS and marks == ["", "", "1", "0"]
        # in the loop: dV (c), the join (dV stays in flight), dQ (c), dK (c), wait 1, the reduce; then the next S^T
        # and dP^T (c c) under dK, wait 1 (dK and S^T), the release, P^T, wait 0; or (the last) wait 0
        assert _sequence(loop) == "c J c c w1 R c c w1 w0 w0"
    else:  # 128 (dP^T under dK too spilled): S^T (c), wait 0, dP^T (c), wait 0 (P^T between them)
        assert 128 not in DP_AHEAD_HEAD_DIMS and marks == ["", "0", "", "0"]
        # in the loop: dV (c), the join, wait 0 (dV), dQ (c), dK (c), wait 1, the reduce; then the next S^T (c)
        # under dK, wait 0 (dK and S^T), the release, dP^T (c), wait 0; or (the last) wait 0
        assert _sequence(loop) == "c J w0 c c w1 R c w0 c w0 w0"


def test_dk_reads_ds_from_shared_memory():
    ahead, overlap = _kernel(128, True, **OPTIONS), _kernel(128, True, dq_split="columns", overlap=True)
    rs, ss = (WGMMA.format(t="bf16", form=form, n=128, trans=trans) for form, trans in (("rs", "_1"), ("ss", "_0_1")))
    # dV += P^T dO stays rs; dK += dS^T Q becomes ss (A K-major from sds, B Q N-major): 4 k16 steps each
    assert _calls(overlap, rs) == 8 and _calls(overlap, ss) == 0
    assert _calls(ahead, rs) == 4 and _calls(ahead, ss) == 4


def test_the_other_kernels_do_not_change_with_the_option():
    if not testing.has_nvcc():
        pytest.skip("compiles for sm_90a: needs nvcc on the PATH")

    def source(**options):
        func = make_attention_backward(T.dynamic("B"), T.dynamic("L"), 8, 128, kv_heads=2, causal=True,
                                       dq_split="columns", overlap=True, **options)
        return tvm_tirx.compile(func, target="cuda", arch="sm_90a").cuda_source

    assert source() == source(scores_ahead=False) != source(scores_ahead=True)


@pytest.mark.parametrize("options,match", [
    (dict(scores_ahead=True, dq_split="columns"), r"scores_ahead=True needs overlap=True"),
    (dict(scores_ahead=1, dq_split="columns", overlap=True), r"scores_ahead: expected a bool, found 1"),
    (dict(OPTIONS, deterministic=True), r"not deterministic at head_dim 128 \(ptxas spilled 8 bytes\), found "
                                        r"overlap=True, deterministic=True"),
])
def test_options_it_does_not_take_are_value_errors(options, match):
    with pytest.raises(ValueError, match=match):
        make_attention_backward(2, 128, 4, 128, **options)


def _key(head_dim, deterministic=False, ahead=True):
    from tvm_tirx.ops import attention_backward_kernels as kernels  # no torch needed

    return kernels.AttentionBackwardKey(8, 2, head_dim, True, "bfloat16", head_dim ** -0.5, "sm_90a", deterministic,
                                        None, ahead)


def test_the_operators_key_asks_for_it_where_the_kernel_takes_it():
    import tvm_ffi

    from tvm_tirx.kernels.attention_backward import PLANS
    from tvm_tirx.ops import attention_backward_kernels as kernels

    assert not kernels.SCORES_AHEAD  # off by default: never run on a GPU yet
    assert kernels.plan(_key(128)) == dict(PLANS[128], scores_ahead=True) and "scores_ahead" not in PLANS[128]
    assert kernels.plan(_key(128, ahead=False)) == PLANS[128]
    assert kernels._name(_key(128)) == "tvm_tirx_attention_backward_h8_kv2_d128_causal_bf16_ahead"
    assert kernels._name(_key(128, ahead=False)) == "tvm_tirx_attention_backward_h8_kv2_d128_causal_bf16"
    # head_dim 64's plan ("rows") is not overlapped; the deterministic kernel at head_dim 128 refuses it
    assert "scores_ahead" not in kernels.plan(_key(64)) and "scores_ahead" not in kernels.plan(_key(128, True))
    made = kernels.backward_prim_func(_key(128))
    planned = make_attention_backward(T.dynamic("B"), T.dynamic("L"), 8, 128, kv_heads=2, causal=True,
                                      scale=128 ** -0.5, scores_ahead=True, **PLANS[128])
    assert tvm_ffi.structural_equal(made.body, planned.body, map_free_vars=True)


def test_the_operator_asks_for_it_only_where_switched_on(monkeypatch):
    torch = pytest.importorskip("torch")
    from tvm_tirx.ops import attention_backward_kernels as kernels
    from tvm_tirx.ops import attention_backward_ops  # pylint: disable=import-outside-toplevel  (imports torch)

    q, k = torch.empty(1, 256, 8, 128, dtype=torch.bfloat16), torch.empty(1, 256, 2, 128, dtype=torch.bfloat16)
    monkeypatch.setattr(attention_backward_ops, "attention_key", lambda *a: _key(128, ahead=False))
    assert not attention_backward_ops.backward_key(q, k, k, True, 128 ** -0.5, "bshd").scores_ahead
    monkeypatch.setattr(kernels, "SCORES_AHEAD", True)  # read at import: patched here
    assert attention_backward_ops.backward_key(q, k, k, True, 128 ** -0.5, "bshd").scores_ahead


# -- on the GPU --------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("head_dim", [64, 128])
def test_every_length_from_one_kernel_with_scores_ahead_on_gpu(torch_cuda, head_dim, causal):
    check_every_length(torch_cuda, head_dim, causal, stages=2, **OPTIONS)


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_every_length_from_one_kernel_with_scores_ahead_by_rows_on_gpu(torch_cuda, causal):
    check_every_length(torch_cuda, 64, causal, stages=2, dq_split="rows", overlap=True, scores_ahead=True)


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim,dtype,kv_heads,stages,options", [
    (128, "float16", 8, 3, {}), (128, "bfloat16", 1, 1, {}), (64, "float16", 1, 4, {}),
    (128, "bfloat16", 8, 2, dict(longest_first=True, section=2))])
def test_float16_heads_stages_and_sections_with_scores_ahead_on_gpu(torch_cuda, head_dim, dtype, kv_heads, stages,
                                                                    options):
    for causal in (False, True):
        func = make_attention_backward(2, 1000, 8, head_dim, kv_heads=kv_heads, causal=causal, dtype=dtype,
                                       stages=stages, **OPTIONS, **options)
        kernel = tvm_tirx.compile(func, target="cuda", options={"detect_hangs": True})
        check_gradients(torch_cuda, kernel, (2, 1000, 8, kv_heads, head_dim), causal, dtype, seed=head_dim)
