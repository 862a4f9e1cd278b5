"""The errors of the tile layer: :class:`TileError` (a mistake in the user's
kernel) and :class:`TileInternalError` (a mistake of tvm_tirx's own lowering)."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import tvm_ffi

from .excerpts import excerpt as source_excerpt


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
    excerpt : str | None
        The call's source lines with a caret under the operand
        (:mod:`tvm_tirx.excerpts`), once :meth:`with_excerpt` found them; for
        an error raised while lowering it is also a note of the exception
        (``__notes__``), printed after the message.
    """

    excerpt = None

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

    def with_excerpt(self) -> "TileError":
        """This error with :attr:`excerpt` read from its location's source line
        (unchanged when the file cannot be read), and the excerpt added as a note."""
        if self.excerpt is None:
            self.excerpt = source_excerpt(self.location, self.operand)
            if self.excerpt and self.excerpt not in getattr(self, "__notes__", ()):
                self.add_note(self.excerpt)
        return self


class TileErrors(TileError):
    """Several contract violations found in one kernel, reported together.

    ``str()`` is a first line ``"<n> contract violations:"``, then every
    violation's own message, in order of discovery, each followed by its
    source excerpt when it has one (:meth:`TileError.with_excerpt`);
    :attr:`errors` holds them (each a :class:`TileError`).  The structured
    fields (``opcode``, ``rule`` ...) are the first one's.
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
        shown = [str(e) + (f"\n{e.excerpt}" if e.excerpt else "") for e in errors]
        ValueError.__init__(self, f"{len(errors)} contract violations:\n" + "\n".join(shown))


#: Most violations one compile reports (the rest are dropped after the count).
MAX_REPORTED = 20


def combined(errors):
    """The error to raise for ``errors`` (TileErrors and TileInternalErrors): a
    TileInternalError first, if any (a bug of ours); else the one TileError;
    else :class:`TileErrors` of the first :data:`MAX_REPORTED`.  Each TileError
    carries its source excerpt (:meth:`TileError.with_excerpt`)."""
    internal = [e for e in errors if isinstance(e, TileInternalError)]
    if internal:
        return internal[0]
    if len(errors) == 1:
        return errors[0].with_excerpt()
    return TileErrors([e.with_excerpt() for e in list(errors)[:MAX_REPORTED]])


def backtrace_requested() -> bool:
    """Whether ``TVM_BACKTRACE=1`` asks for full tracebacks (tvm_tirx's frames included)."""
    return os.environ.get("TVM_BACKTRACE", "0").strip() not in ("", "0")


_P = ParamSpec("_P")
_R = TypeVar("_R")


def reported_here(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """Decorator for the entry points that lower a kernel (``tvm_tirx.compile``,
    ``testing.lower``): a :class:`TileError` leaving ``fn`` is raised again from
    ``fn``'s frame, without the frames of tvm_tirx's lowering under it.

    The traceback Python prints for it then ends at the user's call and this
    wrapper; the message and its excerpt say where the kernel is wrong.  The
    error is the same object (``except TileError`` and its fields are unchanged).
    ``TVM_BACKTRACE=1`` keeps the whole traceback, as for parse errors.
    """

    @functools.wraps(fn)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return fn(*args, **kwargs)
        except TileError as err:
            if backtrace_requested():
                raise
            raise err.with_traceback(None) from None

    return wrapper


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
