"""Instruction families: one module each, registered with ``register_family`` (one
:class:`~tvm_tirx.tile.ir.registry.Family` record holding every role of the family).

Importing this package imports every module in it (a new family is one new
file here; see ``docs/dev/adding_a_family.rst``); the registry then checks,
on first use, that no two families claim the same PTX table entry.
"""

import importlib
import pkgutil

MODULES = tuple(
    importlib.import_module(f"{__name__}.{info.name}")
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name)
    if not info.name.startswith("_")
)
