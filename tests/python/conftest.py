"""Shared fixtures: every test module can use the project's TVMScript names."""

import os
import tempfile

import pytest

# The tests compile into a compile cache of their own (subprocesses inherit it), not the user's.
os.environ.setdefault("TVM_TIRX_CACHE_DIR", tempfile.mkdtemp(prefix="tvm_tirx_test_cache_"))

import tvm_tirx  # noqa: E402,F401  (installs T.function, T.cuda.tile, ...)

try:
    import torch
except ImportError:  # torch is optional: the tests that need it skip
    torch = None


@pytest.fixture
def torch_cuda():
    """The torch module, skipping the test without a CUDA GPU."""
    if torch is None or not torch.cuda.is_available():
        pytest.skip("needs torch with a CUDA GPU")
    return torch


@pytest.fixture
def torch_cpu():
    """The torch module, skipping the test without torch."""
    if torch is None:
        pytest.skip("needs torch")
    return torch

try:
    from hypothesis import settings as _hyp
except ImportError:  # hypothesis comes with the "test" extra; test_properties skips without it
    _hyp = None

if _hyp is not None:
    # default: short enough for CI (the suite's property tests take well under two minutes);
    # `--hypothesis-profile=long` generates many more cases.
    _hyp.register_profile("default", max_examples=150, deadline=None, print_blob=True)
    _hyp.register_profile("long", max_examples=3000, deadline=None, print_blob=True)
    _hyp.load_profile("default")
