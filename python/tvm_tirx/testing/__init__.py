"""Helpers for tests of tile kernels (ours and users'), in TVM's testing style.

* :data:`requires_cuda` -- pytest marker: the test needs a CUDA GPU and torch with CUDA.
* :data:`requires_nvcc` -- pytest marker: the test needs ``nvcc`` on the PATH.
* :func:`requires_arch` -- pytest marker: the test needs a GPU of at least an SM version.
* :func:`lower` -- run ``LowerTileApply`` alone on a PrimFunc;
  :func:`assert_lowers_to` -- Before/Expected structural equality of its output.
* :func:`assemble` -- assemble a kernel's CUDA for its arch with ``nvcc``/``ptxas``;
  :func:`relax_cuda_source` -- the CUDA source of a Relax executable.
* :func:`compile_and_show` -- compile, print the PTX lines of interest, assemble (the tutorials' step).
* :func:`count_ptx` -- how many times a PTX opcode (or every one a pattern matches) is issued per thread.
* :func:`form_kernels`, :func:`assemble_forms` -- kernels that issue every form of a
  family, in pieces the script parser takes, built and assembled
  (:func:`register_call` writes a register family's calls; :func:`load_kernel` loads
  a kernel from source the way a user's file is loaded).
* :func:`do_bench` -- time GPU work with CUDA events (median and spread).
* :func:`sweep` -- compile configurations in parallel, drop failures, time the rest
  (here, or with an :class:`RPCRunner` on the servers of an apache-tvm RPC tracker).
* :func:`block_scaled_product` -- the fp32 reference of an FP8 product with block scales
  (:func:`random_block_scaled` makes its operands).
"""

# First: importing tvm runs its tvm.backends hook (tvm_tirx._plugin), which imports
# modules of this package; none of them may be half-imported when it does.
import tvm  # noqa: F401  pylint: disable=unused-import

from . import markers
from .assembly import assemble, compile_and_show, ptxas_errors, ptxas_report, relax_cuda_source
from .benchmark import SweepResult, SweepRow, Timing, do_bench, sweep
from .forms import (
    BuiltForms,
    FormKernel,
    KernelHead,
    assemble_forms,
    form_kernels,
    forms_kernel_source,
    load_kernel,
    register_call,
)
from .lowering import assert_lowers_to, lower
from .rpc import RemoteRun, RPCRunner, export_cubin, remote_time_evaluator
from .markers import arch_supported, has_cuda, has_nvcc, requires_arch
from .ptx_counts import count_ptx, issue_counts, ptx_opcode_of
from .references import block_scaled_product, random_block_scaled

__all__ = [
    "requires_cuda",
    "has_cuda",
    "has_nvcc",
    "requires_nvcc",
    "lower",
    "assert_lowers_to",
    "assemble",
    "compile_and_show",
    "forms_kernel_source",
    "load_kernel",
    "form_kernels",
    "register_call",
    "assemble_forms",
    "KernelHead",
    "FormKernel",
    "BuiltForms",
    "ptxas_errors",
    "ptxas_report",
    "relax_cuda_source",
    "requires_arch",
    "arch_supported",
    "count_ptx",
    "issue_counts",
    "ptx_opcode_of",
    "do_bench",
    "sweep",
    "Timing",
    "SweepRow",
    "SweepResult",
    "RPCRunner",
    "RemoteRun",
    "export_cubin",
    "remote_time_evaluator",
    "block_scaled_product",
    "random_block_scaled",
]


def __getattr__(name):
    # the markers are built on first use (see .markers): importing this package imports no pytest
    if name in ("requires_cuda", "requires_nvcc"):
        return getattr(markers, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
