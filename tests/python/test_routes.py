"""The kernel routes the operators take by default, and the environment that turns them off.

Each route is read once, at import: the small-M GEMM (``TVM_TIRX_SMALL_M``), the attention
backward kernel (``TVM_TIRX_ATTENTION_BACKWARD``) and the varlen attention kernel
(``TVM_TIRX_ATTENTION_VARLEN``).  All three ran their GPU tests on the H200 and are on
unless the variable is ``0``.
"""

import os
import subprocess
import sys

import pytest

ROUTES = {  # environment variable -> (module, attribute)
    "TVM_TIRX_SMALL_M": ("tvm_tirx.kernels.gemm.planner", "SMALL_M_ROUTE"),
    "TVM_TIRX_ATTENTION_BACKWARD": ("tvm_tirx.ops.attention_backward_kernels", "ROUTE"),
    "TVM_TIRX_ATTENTION_VARLEN": ("tvm_tirx.ops.attention_varlen_kernels", "ROUTE"),
}


def _routes_in_a_fresh_process(value):
    """Each route's value in a new interpreter whose environment sets every variable to
    ``value`` (None: unset)."""
    env = {k: v for k, v in os.environ.items() if k not in ROUTES}
    if value is not None:
        env.update(dict.fromkeys(ROUTES, value))
    code = "import importlib\n" + "".join(
        f"print(importlib.import_module({module!r}).{attr})\n" for module, attr in ROUTES.values())
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    return dict(zip(ROUTES, out.split()))


@pytest.mark.parametrize("value, expected", [(None, "True"), ("1", "True"), ("0", "False")],
                         ids=["unset", "1", "0"])
def test_every_route_is_on_unless_its_variable_is_0(value, expected):
    assert _routes_in_a_fresh_process(value) == dict.fromkeys(ROUTES, expected)
