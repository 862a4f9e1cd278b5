"""TVMScript for tvm_tirx: ``from tvm_tirx.script import tirx as T``.

``tirx`` is apache-tvm's ``tvm.script.tirx`` with tvm_tirx's names installed
(``T.function``, ``T.Tensor``, ``T.device_entry(launch=...)``,
``T.cuda.LaunchConfig``, ``T.cuda.thread_idx`` ..., ``T.cuda.tile.apply``).
"""

from .install import install as _install

_install()

from tvm.script import tirx  # noqa: E402  pylint: disable=wrong-import-position

__all__ = ["tirx"]
