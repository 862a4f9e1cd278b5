"""Where users call tile kernels from other programs: :mod:`.relax` (Relax's ``call_tir``)
and the torch operators of :mod:`.torch_ops` (:func:`linear`, :func:`matmul`),
:mod:`.glu_ops` (:func:`glu_linear`; :mod:`.glu_weights` has the gated kernel's weight layout),
:mod:`.attention_ops` (:func:`attention`) and :mod:`.attention_varlen_ops` (:func:`attention_varlen`).

The torch names load on first use (``tvm_tirx.ops.linear``): importing this package
imports neither torch nor the torch operators (torch is optional).
"""

# First: importing tvm runs its tvm.backends hook (tvm_tirx._plugin), which imports
# modules of this package; none of them may be half-imported when it does.
import tvm  # noqa: F401  pylint: disable=unused-import

import importlib as _importlib

from ..build.pipeline import register_pipeline as _register_pipeline
from .relax import register_relax_pipeline as _register_relax_pipeline

# The "tvm_tirx" TIR and Relax pipelines that offloaded modules are built with: apache-tvm's
# tvm.backends entry point registers them at `import tvm` only when this package is
# installed, not when it is found through PYTHONPATH (both calls are idempotent).
_register_pipeline()
_register_relax_pipeline()

#: name -> the module that defines it (imported on first use: it imports torch)
_LAZY = {"linear": "torch_ops", "matmul": "torch_ops", "attention": "attention_ops",
         "attention_varlen": "attention_varlen_ops", "UnsupportedInput": "torch_checks",
         "glu_linear": "glu_ops", "gate_up_weight": "glu_weights", "check": "check_mode"}


def __getattr__(name):
    if name in _LAZY:
        value = getattr(_importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
