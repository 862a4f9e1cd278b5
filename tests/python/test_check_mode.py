"""ops.check: the torch operators' rules on tensors of any device, as on an H200, nothing launched.

Each case is compared with the same call on the emulated H200 of the other CPU tests (the
device rules passed, compiles and launches replaced by stand-ins): the same kernel keys,
the same errors.
"""

import pytest

torch = pytest.importorskip("torch")

from tvm_tirx import ops  # noqa: E402
from tvm_tirx.ops import attention_kernels, eager, gemm_kernels, gemm_plans, torch_checks  # noqa: E402
from tvm_tirx.ops.torch_checks import UnsupportedInput  # noqa: E402

BF16, F32 = torch.bfloat16, torch.float32
META = dict(dtype=BF16, device="meta")


def _calls(device):
    """(op, args, kwargs) of calls the kernels take, on ``device``."""
    t = lambda *shape: torch.empty(*shape, dtype=BF16, device=device)  # noqa: E731
    return [
        (ops.linear, (t(8, 64), t(128, 64)), {}),
        (ops.linear, (t(3, 5, 64), t(128, 64), t(128)), {"residual": t(3, 5, 128), "out_dtype": BF16}),
        (ops.linear, (t(64, 16).t(), t(128, 64)), {"out_dtype": F32}),
        (ops.matmul, (t(8, 64), t(64, 128)), {}),
        (ops.glu_linear, (t(8, 64), t(128, 64), t(128, 64)), {"activation": "relu"}),
        (ops.attention, (t(2, 100, 8, 128), t(2, 100, 2, 128), t(2, 100, 2, 128)), {"causal": True}),
    ]


@pytest.fixture
def emulated_h200(monkeypatch):
    """CPU tensors taken for an H200's (device rules passed) and stand-in compilers: yields
    the keys the stand-ins are made for, in order."""
    monkeypatch.setattr(eager, "_on_device", lambda t: True)
    monkeypatch.setattr(torch_checks, "device_target", lambda op, device: "sm_90a")
    monkeypatch.setattr("tvm_tirx.ops.attention_checks.device_target", lambda op, device: "sm_90a")
    monkeypatch.setattr("tvm_tirx.ops.torch_checks._check_device", lambda names, x, w: None)
    monkeypatch.setattr("tvm_tirx.ops.attention_checks._check_device", lambda tensors: None)
    compiled = []

    class StandIn:
        def __init__(self, key):
            compiled.append(key)

        def launcher(self, *args):
            return lambda *a: None

    monkeypatch.setattr(gemm_kernels, "_compile", StandIn)
    monkeypatch.setattr(attention_kernels, "_compile", StandIn)
    gemm_kernels.clear_kernels()
    attention_kernels.clear_kernels()
    yield compiled
    gemm_kernels.clear_kernels()
    attention_kernels.clear_kernels()


def test_meta_tensors_give_the_keys_of_the_kernels_a_gpu_call_launches(emulated_h200):
    for op, args, kwargs in _calls("meta"):
        keys = ops.check(op, *args, **kwargs)
        assert len(keys) == 1 and keys[0].arch == "sm_90a"
    for (op, args, kwargs), (_, meta_args, meta_kwargs) in zip(_calls("cpu"), _calls("meta")):
        before = len(emulated_h200)
        op(*args, **kwargs)
        assert emulated_h200[before:] == ops.check(op, *meta_args, **meta_kwargs), op
    checked = [ops.check(op, *args, **kwargs) for op, args, kwargs in _calls("meta")]
    assert checked[4][0].gated and checked[2][0].a_major == "m" and checked[3][0].b_major == "n"


_BAD = [
    (ops.linear, lambda t: (t(8, 12), t(64, 12)), {}, UnsupportedInput, r"k = 12: rows of x and weight take"),
    (ops.linear, lambda t: (t(8, 64).float(), t(64, 64).float()), {}, UnsupportedInput, r"x must be torch.bfloat16"),
    (ops.linear, lambda t: (t(8, 64), t(64, 64)), {"out_dtype": torch.float16}, UnsupportedInput, r"out_dtype"),
    (ops.linear, lambda t: (t(8, 64), t(64, 32)), {}, ValueError, r"must have the same k"),
    (ops.linear, lambda t: (t(8, 64), t(64, 64), t(3)), {}, ValueError, r"bias of shape \(3,\) does not broadcast"),
    (ops.matmul, lambda t: (t(8, 64), t(64, 256)[:, ::2]), {}, UnsupportedInput, r"b.t\(\) must be contiguous"),
    (ops.glu_linear, lambda t: (t(8, 64), t(12, 64), t(12, 64)), {}, UnsupportedInput, r"n = 12 .* multiple of 8"),
    (ops.attention, lambda t: (t(1, 9, 2, 96),) * 3, {}, UnsupportedInput, r"head_dim must be one of"),
]


@pytest.mark.parametrize("case", range(len(_BAD)))
def test_meta_tensors_raise_what_the_gpu_call_raises(emulated_h200, case):
    op, make, kwargs, error, message = _BAD[case]
    errors = []
    for call in (lambda: ops.check(op, *make(lambda *s: torch.empty(*s, **META)), **kwargs),
                 lambda: op(*make(lambda *s: torch.zeros(*s, dtype=BF16)), **kwargs)):  # the emulated H200
        with pytest.raises(error, match=message) as info:
            call()
        errors.append(str(info.value))
    assert errors[0] == errors[1]


def test_outside_check_a_cpu_call_still_needs_a_gpu():
    with pytest.raises(UnsupportedInput, match=r"x must be a CUDA tensor"):
        ops.linear(torch.zeros(8, 64, dtype=BF16), torch.zeros(64, 64, dtype=BF16))


def test_misalignment_is_checked_on_cpu_tensors():
    x = torch.zeros(8 * 64 + 1, dtype=BF16)[1:].view(8, 64)  # 2 bytes past a 16-byte boundary
    with pytest.raises(UnsupportedInput, match=r"x must start at a 16-byte aligned address"):
        ops.check(ops.linear, x, torch.zeros(64, 64, dtype=BF16))


def test_check_compiles_nothing_and_keeps_no_plan():
    gemm_kernels.clear_kernels()
    grad = torch.empty(8, 64, **META).requires_grad_(True)  # checked as the forward would be
    assert len(ops.check(ops.linear, grad, torch.empty(64, 64, **META))) == 1
    assert ops.check(ops.linear, torch.empty(8, 12, **META), torch.empty(64, 12, **META), fallback="torch") == []
    assert gemm_kernels.cached_kernels() == {} and len(gemm_plans.PLANS) == 0
