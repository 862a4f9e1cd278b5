"""The PTX types of register operands: which TVM dtypes hold them and how inline asm binds them.

The second adapter to apache-tvm's PTX package (beside :mod:`.ptx_table`, which
reads the instructions): the dtypes of each PTX type token (``PTX_TYPE_DTYPES``),
the C bindings of inline asm (``render.C_BINDING``), and the ``.pred`` operands,
which cross the C boundary as a ``uint32`` carrier.
"""

from __future__ import annotations

from tvm.backend.cuda.ptx import PTXNamespace
from tvm.backend.cuda.ptx.render import C_BINDING
from tvm.backend.cuda.ptx.table import PTX_TYPE_DTYPES
from tvm.runtime import DataType

__all__ = [
    "bits_of_ptx_type",
    "same_width_dtypes",
    "scalar_dtypes",
    "binding_dtype",
    "register_dtypes",
    "is_pred_read",
    "pred_argument",
    "PRED_READ_DTYPES",
]

#: Dtypes a ``.pred`` operand the instruction reads takes: a bool, or an integer
#: register or expression (true when not zero), which apache-tvm turns into a
#: predicate with ``setp.ne`` inside the instruction's asm block.
PRED_READ_DTYPES = ("uint32", "int32", "bool")


def bits_of_ptx_type(token: str) -> int:
    """Bit width of a PTX type token (``"b32"`` -> 32, ``"f16x2"`` -> 32)."""
    return DataType(PTX_TYPE_DTYPES[token][0]).bits


def same_width_dtypes(token: str, accepted=None) -> tuple:
    """Dtypes of exactly the width of PTX type ``token`` (PTX ISA 5.2: a ``.bN`` type
    accepts any fundamental type of N bits; a concrete type only its own).

    ``accepted`` (the dtypes the table lists for an operand) narrows the result.
    """
    own = PTX_TYPE_DTYPES[token]
    if accepted is None:
        return tuple(own)
    # An 8-bit integer result lives in a wider register (PTX ISA 5.2.2: the
    # narrowest register is 16 bits); the table lists the carriers it takes.
    out = tuple(d for d in accepted if d in own) or tuple(accepted)
    # The table types `.f16`/`.bf16` registers as their `.b16` container; the
    # scalar type itself is as good a register (PTX ISA 5.2: a `.b16` register
    # holds any 16-bit type), bound through the container (:func:`binding_dtype`).
    return out + tuple(d for d in scalar_dtypes(token) if d not in out)


def scalar_dtypes(token: str) -> tuple:
    """The TVM dtypes whose values *are* PTX type ``token`` (``"f16"`` -> ``("float16",)``;
    ``()`` for a bit-size or packed type), read from apache-tvm's C bindings."""
    return tuple(d for d, binding in C_BINDING.items() if binding.suffix == token)


def register_dtypes(operand) -> tuple:
    """The dtypes a register tensor (or scalar) bound to PTX operand ``operand``
    (a :class:`~.ptx_table.PtxOperand`) may have: :func:`same_width_dtypes` of its
    type, and for a ``.pred`` operand the instruction reads, :data:`PRED_READ_DTYPES`
    (a ``.pred`` result is a ``uint32`` 0/1, the table's carrier)."""
    if is_pred_read(operand):
        return PRED_READ_DTYPES
    return same_width_dtypes(operand.ptx_type, operand.dtypes)


def is_pred_read(operand) -> bool:
    """Whether ``operand`` is a ``.pred`` register the instruction reads (PTX ISA 5.2.1)."""
    return operand.ptx_type == "pred" and not operand.writes


def pred_argument(value):
    """``value`` (a bool, uint32 or int32 expression) as the argument of a ``.pred``
    operand the instruction reads: a bool as is; an integer tagged with
    ``T.ptx.pred(...)`` (true when not zero), the tag apache-tvm asks for."""
    dtype = getattr(getattr(value, "ty", None), "dtype", None)
    return value if dtype == "bool" else PTXNamespace.pred(value)


def binding_dtype(operand, dtype: str, read_write: bool = False) -> str | None:
    """The dtype a register of ``dtype`` is passed to the table as, for ``operand``.

    ``dtype`` itself when the table takes it; otherwise a dtype of the same bit
    width that it takes (the ``.b16`` container ``uint16`` of a ``float16``
    register of ``add.rn.f16``), the register then being read through a view of
    that dtype -- the same bits.  A read-write binding (``preserve_dst``, an
    accumulator) needs a dtype inline asm binds directly, without a carrier
    (apache-tvm's ``render.C_BINDING``: ``float16`` travels as ``uint16_t``, an
    8-bit register as a 16-bit one, which cannot be written back in place).
    None when no dtype fits.
    """

    def fits(d):
        binding = C_BINDING.get(d)
        return binding is not None and (not read_write or binding.carrier == binding.c_type)

    if dtype in operand.dtypes and fits(dtype):
        return dtype
    bits = DataType(dtype).bits
    return next((d for d in operand.dtypes if DataType(d).bits == bits and fits(d)), None)
