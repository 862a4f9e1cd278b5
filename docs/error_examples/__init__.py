"""The error page's examples, one module per family and one per topic of the shared contract.

Each module holds ``CASES``, a list of :class:`Case`: a small kernel file that breaks
one rule, what is done with it, and what the message means.  ``docs/gen_errors.py``
collects them (:func:`collect`), runs each and writes the page with the message each
one really raises.  The rules an instruction family adds (raised in its module under
``python/tvm_tirx/tile/families/``) have their examples in the module named after the
family (``tma.py`` ...); the rules every family shares have theirs in the topic modules
(:data:`TOPICS`), where ``ld.global`` or ``ldmatrix`` stands in for any instruction.
A new family adds its module here (``docs/dev/adding_a_family.rst``).
"""

from __future__ import annotations

import importlib
import pkgutil
import textwrap
from dataclasses import dataclass

#: What every example file starts with (its own source follows).
HEADER = """\
from tvm.tirx.layout import Axis, ComposeLayout, S, TileLayout
from tvm_tirx.script import tirx as T

"""
#: First line number of an example's own source inside ``example.py``.
FIRST_LINE = HEADER.count("\n") + 1

#: The page's sections, in the order they appear.
SECTIONS = OPCODE, OPERANDS, MEMORY, PRED, SCOPE, COLLECTIVE, PROTOCOL, EWISE, OTHER, SCHEDULE = (
    "Opcode and instruction form",
    "Operands: kinds, shapes and types",
    "Memory operands: alignment and bounds",
    "Predication and parameters",
    "Execution scopes, ownership and guards",
    "Warp-collective and asynchronous instructions",
    "Pipelines and protocols",
    "tile.ewise",
    "Errors outside the tile contract",
    "Tensor intrinsics in TIR schedules",
)

#: The modules of the shared contract's rules, in page order; every other module is a family's.
TOPICS = (
    "opcodes", "operands", "memory", "parameters", "scopes", "collectives", "ewise",
    "dynamic_shared_memory", "launch", "schedules",
)  # fmt: skip


@dataclass
class Case:
    """One documented error.

    ``action`` says what is done with ``example.py``: ``"parse"`` (import it:
    ``@T.function`` parses the kernel), ``"lower"`` (run ``LowerTileApply`` on
    its ``kernel``), ``"compile"`` (``tvm_tirx.compile(kernel, arch="sm_90a")``),
    ``"compile-sm100a"`` (the same for ``arch="sm_100a"``), ``"compile-noarch"``
    (``tvm_tirx.compile`` without ``arch`` and as if no GPU were present) or
    ``"exec"`` (import it; the code itself raises).
    """

    section: str
    rule: str  # a regular expression the message must match
    title: str
    source: str
    action: str
    meaning: str
    fix: str
    error: str = "TileError"


def example(body: str) -> str:
    """An example's source: ``body`` dedented, without leading and trailing blank lines."""
    return textwrap.dedent(body).strip("\n") + "\n"


def modules() -> list:
    """The example modules' names: :data:`TOPICS`, then the families' in name order."""
    found = sorted(info.name for info in pkgutil.iter_modules(__path__) if not info.name.startswith("_"))
    return [*TOPICS, *(name for name in found if name not in TOPICS)]


def collect() -> list:
    """Every module's ``CASES``, in :func:`modules` order."""
    cases = []
    for name in modules():
        cases += importlib.import_module(f"{__name__}.{name}").CASES
    return cases
