"""Shared fixtures: every test module can use the project's TVMScript names."""

import pytest

import tvm_tirx  # noqa: F401  (installs T.function, T.cuda.tile, ...)

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
