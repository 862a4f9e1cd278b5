"""The compile path: ``tvm_tirx.compile`` and the :class:`~tvm_tirx.Kernel` it returns.

* :mod:`.kernel` -- ``compile`` and ``Kernel``; :mod:`.target` -- the CUDA target;
* :mod:`.pipeline` -- the ``"tvm_tirx"`` TIR pipeline apache-tvm runs;
  :mod:`.smem_limits`, :mod:`.cuda_source` -- passes of it;
* :mod:`.options` -- compile options; :mod:`.cache` -- the compile cache on disk;
* :mod:`.arguments`, :mod:`.launch_sizes` -- the checks a call runs before it launches;
* :mod:`.nvcc`, :mod:`.export` -- the machine's CUDA compiler, exported libraries;
* :mod:`.stages` -- one stage at a time (lower, assemble, a kernel from a file), for the
  command line and :mod:`tvm_tirx.testing`.
"""

# First: importing tvm runs its tvm.backends hook (tvm_tirx._plugin), which imports
# modules of this package; none of them may be half-imported when it does.
import tvm  # noqa: F401  pylint: disable=unused-import
