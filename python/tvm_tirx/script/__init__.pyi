"""Type stub for ``tvm_tirx.script``: ``from tvm_tirx.script import tirx as T``.

``tirx`` is declared in ``tirx.pyi`` (at runtime it is apache-tvm's
``tvm.script.tirx`` with tvm_tirx's names installed).
"""

from . import tirx as tirx

__all__ = ["tirx"]
