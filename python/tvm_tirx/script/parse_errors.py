"""How ``@T.function`` reports a kernel that fails to parse: one error, its
``file:line``, a short traceback.

apache-tvm 0.27's TVMScript parser (``tvm/script/parser/core/parser.py``,
``Parser.report_error``) turns any exception raised while parsing into a
``tvm.error.DiagnosticError`` whose text is ``error: <last line of the message>``,
`` --> file:line:col`` and a source excerpt; it re-raises it once per enclosing
AST node, each time chained to the one before.  Two things then hide the error:

* the ``sys.excepthook`` that ``import tvm`` installs prints, for an uncaught
  exception whose type *is* ``DiagnosticError``, only "note: run with
  `TVM_BACKTRACE=1` ..." (the text was once shown by a diagnostic renderer that
  0.27 no longer has);
* the chain of re-raises prints the message three times in 130-odd lines.

:func:`parse_failure` turns such an exception into the one the user should see;
``T.function`` raises it without the chain unless ``TVM_BACKTRACE=1``.
"""

from __future__ import annotations

import re

from tvm.error import DiagnosticError

from ..errors import TileError, backtrace_requested
from ..tile.ir.ptx_table import namespace_text

__all__ = ["ScriptError", "parse_failure", "backtrace_requested"]


class ScriptError(DiagnosticError):
    """A kernel that TVMScript's parser rejects (not a tile-contract violation).

    A ``tvm.error.DiagnosticError`` with the parser's own text: ``error: <message>``,
    `` --> file:line:col``, the source excerpt.  A subclass, so that
    ``except DiagnosticError`` still catches it while the excepthook that
    ``import tvm`` installs (which hides exactly ``DiagnosticError``) prints it.
    """


def parse_failure(err: BaseException) -> BaseException | None:
    """The exception to show for ``err``, raised by apache-tvm's parser; None to re-raise ``err``.

    * a :class:`~tvm_tirx.TileError` anywhere in the chain: that error, pointing at
      the ``file:line`` of the diagnostic, with the source excerpt as a note;
    * any other ``DiagnosticError``: a :class:`ScriptError` with its text;
    * anything else (raised before parsing starts): None.
    """
    tile_err = _tile_error_in(err)
    if tile_err is not None:
        located = tile_err.at(_diag_location(err)).with_traceback(None)
        excerpt = _diag_excerpt(err)
        if excerpt and hasattr(located, "add_note") and excerpt not in getattr(located, "__notes__", ()):
            located.add_note(excerpt)
        return located
    if isinstance(err, DiagnosticError):
        return ScriptError(str(err))
    return None


def _tile_error_in(err):
    """The TileError behind a parse failure, if any.

    A misspelt ``T.ptx["..."]`` fails inside apache-tvm's PTX namespace with a
    ``KeyError``; it breaks the same contract rule as a misspelt string opcode,
    so it is reported as one.
    """
    seen = 0
    while err is not None and seen < 16:
        if isinstance(err, TileError):
            return err
        if isinstance(err, KeyError) and _raised_in_ptx_namespace(err):
            return _spelling_error(str(err.args[0] if err.args else err))
        if isinstance(err, ValueError) and _raised_in(err, "tirx/_buffer_view.py"):
            sliced = _view_slice_error(str(err))
            if sliced is not None:
                return sliced
        err = err.__cause__ or err.__context__
        seen += 1
    return None


def _spelling_error(message: str) -> TileError:
    """The TileError of a ``T.ptx["..."]`` apache-tvm's namespace refuses; for PTX
    text whose mnemonic has several words (``shfl.sync``), the two spellings that work."""
    match = re.match(r"'([^']+)' does not start with a ptx instruction family", message)
    text = match.group(1) if match else ""
    spelled = namespace_text(text) if text else text
    if spelled == text:
        return TileError("", "unknown or illegal opcode spelling", found=message)
    return TileError(
        text,
        "unknown or illegal opcode spelling",
        expected=f'T.ptx["{spelled}"] (apache-tvm spells a multi-word mnemonic with "_") '
        f'or the PTX text as a string: T.cuda.tile.apply("{text}", ...)',
        found=f'T.ptx["{text}"]',
    )


def _raised_in_ptx_namespace(err) -> bool:
    return _raised_in(err, "backend/cuda/ptx")


def _raised_in(err, path: str) -> bool:
    """Whether ``err`` was raised in a file of apache-tvm whose path contains ``path``."""
    tb = err.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and path in tb.tb_frame.f_code.co_filename.replace("\\", "/")


#: apache-tvm's refusals of ``X.sub[a:b]`` on an axis its layout splits in blocks
_SLICE_MESSAGES = (
    re.compile(r"sub: dim (?P<dim>\d+) start/length must be multiples of the inner iter block (?P<block>\d+); "
               r"got start=(?P<start>\S+) length=(?P<length>\S+)"),
    re.compile(r"sub: dim (?P<dim>\d+) is made of \d+ layout iters; start/length must be concrete multiples of "
               r"(?P<block>\d+)"),
)


def _view_slice_error(message: str) -> TileError | None:
    """The TileError of a ``.sub[a:b]`` slice apache-tvm refuses because the view keeps
    the layout of the tensor it views (``r.view(8)`` of a ``(2, 4)`` tensor: axis 0 is
    two blocks of 4), or None for another message of that module."""
    for pattern in _SLICE_MESSAGES:
        match = pattern.search(message)
        if match is None:
            continue
        fields = match.groupdict()
        dim, block = fields["dim"], fields["block"]
        found = (f"start {fields['start']}, length {fields['length']}" if "start" in fields
                 else "a start or length known only at run time")
        return TileError(
            "",
            "slice of a view across its layout's blocks",
            operand=f"axis {dim} of a .view()",
            expected=f"a start and length that are constant multiples of {block} (.view() keeps the layout of "
            f"the tensor it views, and that layout splits axis {dim} into blocks of {block}); slice the tensor "
            f"itself before viewing it (X.sub[i, :] rather than X.view(n * 4).sub[4 * i:4 * i + 4]), or allocate it "
            f"in the shape you slice (T.alloc_local((8,), ...) and .view(2, 4) where 2-d)",
            found=found,
        )
    return None


def _diag_location(err) -> str | None:
    """``file:line`` from a TVMScript diagnostic's `` --> file:line:col`` line."""
    for line in str(err).splitlines():
        line = line.strip()
        if line.startswith("-->"):
            where = line[3:].strip()
            parts = where.rsplit(":", 2)
            if len(parts) == 3:
                return f"{parts[0]}:{parts[1]}"
            return where
    return None


def _diag_excerpt(err) -> str:
    """The source excerpt of a TVMScript diagnostic (the lines after `` --> ``)."""
    lines = str(err).splitlines()
    for i, line in enumerate(lines):
        if line.strip().startswith("-->"):
            return "\n".join(lines[i + 1 :]).rstrip()
    return ""
