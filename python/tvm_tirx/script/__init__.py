"""TVMScript for tvm_tirx: ``from tvm_tirx.script import tirx as T``.

``tirx`` is apache-tvm's ``tvm.script.tirx`` with tvm_tirx's names installed
(``T.function``, ``T.Tensor``, ``T.device_entry(launch=...)``,
``T.cuda.LaunchConfig``, ``T.cuda.thread_idx`` ..., ``T.cuda.tile.apply``).
"""

# First: importing tvm runs its tvm.backends hook (tvm_tirx._plugin), which imports
# modules of this package; none of them may be half-imported when it does.
import tvm  # noqa: F401  pylint: disable=unused-import
from tvm.script import tirx

from .install import install

install()

__all__ = ["tirx"]
