"""The errors of the tile layer: :class:`TileError` (a mistake in the user's
kernel) and :class:`TileInternalError` (a mistake of tvm_tirx's own lowering)."""

from __future__ import annotations

import tvm_ffi


class TileError(ValueError):
    """A ``T.cuda.tile.apply`` call breaks its instruction's contract.

    The message is a single line that stands on its own (TVMScript's parser
    keeps only the last line of an exception raised while parsing):

    ``[file:line: ]<opcode>: <operand> (operand <i>): <rule>: expected <x>, found <y>``

    Attributes
    ----------
    opcode : str
        The PTX opcode text of the call (``"ld.global.v4.b32"``), or ``""``.
    operand : str | None
        The operand's role and 1-based position, e.g. ``"src (operand 2)"``.
    rule : str
        The rule broken, in a few words.
    expected, found : str | None
        What the rule asks for and what the call has.
    location : str | None
        ``file:line`` of the user's call when it is known.
    """

    def __init__(
        self,
        opcode: str,
        rule: str | None = None,
        *,
        operand: str | None = None,
        expected: str | None = None,
        found: str | None = None,
        location: str | None = None,
    ):
        if rule is None:
            # Rebuilt by tvm-ffi from the message alone, after crossing a C++
            # boundary (a pass pipeline run by tvm.compile): the text is whole,
            # the structured fields are gone.
            self.opcode = self.operand = self.rule = self.expected = self.found = self.location = None
            super().__init__(opcode)
            return
        self.opcode = opcode
        self.operand = operand
        self.rule = rule
        self.expected = expected
        self.found = found
        self.location = location
        super().__init__(self._format())

    def _format(self) -> str:
        parts = []
        if self.location:
            parts.append(self.location)
        if self.opcode:
            parts.append(self.opcode)
        if self.operand:
            parts.append(self.operand)
        text = ": ".join(parts + [self.rule])
        details = []
        if self.expected is not None:
            details.append(f"expected {self.expected}")
        if self.found is not None:
            details.append(f"found {self.found}")
        if details:
            text += ": " + ", ".join(details)
        return text

    def at(self, location: str | None) -> "TileError":
        """Return a copy of this error that points at ``location`` (``file:line``)."""
        if not location or self.location:
            return self
        return TileError(
            self.opcode,
            self.rule,
            operand=self.operand,
            expected=self.expected,
            found=self.found,
            location=location,
        )


class TileErrors(TileError):
    """Several contract violations found in one kernel, reported together.

    ``str()`` is every violation's own message, one per line, in source
    order of discovery; :attr:`errors` holds them (each a :class:`TileError`).
    The structured fields (``opcode``, ``rule`` ...) are the first one's.
    """

    def __init__(self, errors):
        if isinstance(errors, str):  # rebuilt by tvm-ffi from its message (see TileError)
            TileError.__init__(self, errors)
            self.errors = ()
            return
        first = errors[0]
        self.errors = tuple(errors)
        self.opcode, self.operand, self.rule = first.opcode, first.operand, first.rule
        self.expected, self.found, self.location = first.expected, first.found, first.location
        ValueError.__init__(self, f"{len(errors)} contract violations:\n" + "\n".join(str(e) for e in errors))


#: Most violations one compile reports (the rest are dropped after the count).
MAX_REPORTED = 20


def combined(errors):
    """The error to raise for ``errors`` (TileErrors and TileInternalErrors): a
    TileInternalError first, if any (a bug of ours); else the one TileError;
    else :class:`TileErrors` of the first :data:`MAX_REPORTED`."""
    internal = [e for e in errors if isinstance(e, TileInternalError)]
    if internal:
        return internal[0]
    if len(errors) == 1:
        return errors[0]
    return TileErrors(list(errors)[:MAX_REPORTED])


class TileInternalError(RuntimeError):
    """tvm_tirx's lowering built something apache-tvm refuses (the PTX table
    rejects an expanded call, a family names an address form nobody registered).

    Not a :class:`TileError`: the kernel is not at fault, tvm_tirx is; please
    report it with the kernel that triggers it.
    """


def operand_label(role: str, index) -> str:
    """``"src (operand 2)"``: an operand's role and its 1-based position in the call;
    ``"parameter mbar"`` for an operand passed by keyword (``index`` is then its name)."""
    if isinstance(index, str):
        return f"parameter {index}"
    return f"{role} (operand {index})"


def _register_with_ffi() -> None:
    """Let a TileError raised inside a pass that apache-tvm runs through C++
    (``tvm.compile(..., tir_pipeline="tvm_tirx")``) reach the caller as a
    TileError rather than a RuntimeError."""
    tvm_ffi.register_error(TileError)
    tvm_ffi.register_error(TileErrors)
    tvm_ffi.register_error(TileInternalError)


_register_with_ffi()
