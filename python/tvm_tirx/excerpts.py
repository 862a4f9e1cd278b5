"""Source excerpts for errors found after parsing: the user's line, a caret under the operand.

A :class:`~tvm_tirx.TileError` raised while a kernel is lowered knows the
``file:line`` of its call (the parser records every call's span) and which
operand broke the rule (``"src (operand 2)"``, ``"parameter mbar"``).  This
module reads that line back and underlines the operand, the way TVMScript's
parser shows a parse error::

        |
     12 |     T.cuda.tile.apply(T.ptx["st.global.v4.b32"], B.sub[tid + 1, :], regs)
        |                                                  ^^^^^^^^^^^^^^^^^

The operand's columns come from Python's own parser (:mod:`ast`) run on the
call's source text: argument ``i`` of ``T.cuda.tile.apply(instr, *operands)``
is operand ``i``, and a keyword argument is the parameter of its name.  When
the operand cannot be placed (an error of the whole call, a line that is not
a call) the caret underlines the statement.  Only the standard library is
used: this is the base layer.
"""

from __future__ import annotations

import ast
import linecache
import re

__all__ = ["excerpt", "operand_key", "split_location"]

#: Lines a multi-line call shows at most, from its first.
MAX_LINES = 4

_OPERAND = re.compile(r"\(operand (\d+)\)")


def split_location(location: str | None) -> tuple[str, int] | None:
    """``("file", line)`` of a ``"file:line"`` location, or None."""
    if not location or ":" not in location:
        return None
    path, _, line = location.rpartition(":")
    return (path, int(line)) if line.isdigit() and int(line) > 0 else None


def operand_key(label: str | None) -> int | str | None:
    """Where an operand sits in its call: the 1-based position of ``"src (operand 2)"``
    (2), the keyword of ``"parameter mbar"`` (``"mbar"``), or None."""
    if not label:
        return None
    found = _OPERAND.search(label)
    if found:
        return int(found.group(1))
    if label.startswith("parameter "):
        return label[len("parameter ") :].strip() or None
    return None


def _statement(path: str, line: int):
    """``(source lines, ast node)`` of the statement starting at ``line`` of ``path``
    (read from its first non-blank character), or None."""
    lines = []
    for number in range(line, line + 40):
        text = linecache.getline(path, number)
        if not text:
            break
        lines.append(text.rstrip("\n"))
        indent = len(lines[0]) - len(lines[0].lstrip())
        source = "\n".join([lines[0][indent:]] + lines[1:])
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        if tree.body:
            return lines, indent, tree.body[0]
        break
    return None


def _operand_node(stmt, key):
    """The argument node of operand ``key`` in the call that statement ``stmt`` is, or None."""
    call = getattr(stmt, "value", None)
    if not isinstance(call, ast.Call) or key is None:
        return None
    if isinstance(key, int):
        # T.cuda.tile.apply(instr, *operands): operand i is argument i; a raw
        # T.ptx["..."](*operands) call has no instruction argument: operand i is argument i - 1
        index = key - 1 if isinstance(call.func, ast.Subscript) else key
        return call.args[index] if 0 <= index < len(call.args) and key > 0 else None
    return next((kw for kw in call.keywords if kw.arg == key), None)


def _columns(node, lines, indent):
    """``(line index, first column, end column)`` of ``node`` in ``lines`` (0-based,
    end exclusive), its first line only."""
    row = node.lineno - 1
    start = node.col_offset + (indent if row == 0 else 0)
    if node.end_lineno == node.lineno:
        end = node.end_col_offset + (indent if row == 0 else 0)
    else:
        end = len(lines[row].rstrip())
    return row, start, max(end, start + 1)


def excerpt(location: str | None, operand: str | None = None) -> str | None:
    """The source excerpt of an error at ``location`` (``"file:line"``) about
    ``operand`` (an operand label), or None when the file cannot be read.

    Parameters
    ----------
    location : str | None
        ``file:line`` of the call.
    operand : str | None
        The operand's label (``"src (operand 2)"``, ``"parameter coords"``); None
        underlines the whole statement.

    Returns
    -------
    str | None
        A gutter line, the call's lines (at most :data:`MAX_LINES`) up to the
        operand's, and a caret line under the operand.
    """
    where = split_location(location)
    if where is None:
        return None
    path, line = where
    found = _statement(path, line)
    if found is None:
        text = linecache.getline(path, line).rstrip("\n")
        if not text.strip():
            return None
        lines, row, start, end = [text], 0, len(text) - len(text.lstrip()), len(text.rstrip())
    else:
        lines, indent, stmt = found
        node = _operand_node(stmt, operand_key(operand)) or stmt
        row, start, end = _columns(node, lines, indent)
    shown = lines[: row + 1][-MAX_LINES:]
    first = line + row + 1 - len(shown)
    width = len(str(first + len(shown) - 1))
    gutter = " " * (width + 1) + " |"
    out = [gutter]
    out += [f" {str(first + i).rjust(width)} | {text}" for i, text in enumerate(shown)]
    out.append(f"{gutter} {' ' * start}{'^' * (end - start)}")
    return "\n".join(out)
