"""A reference model of the bounds rule for run-time extents.

A case is a kernel reading one 16-byte row ``A.sub[i, :]`` of ``A: (n, 4) float32``
with ``n = T.dynamic("n")``, where the row index ``i`` is an expression of the CTA id,
the thread id and (optionally) the counter of ``for k in T.serial(n)``, and a condition
on it is written as an enclosing ``if``, as ``pred=`` or as ``T.assume`` (or not at all).
The model decides legality by brute force, under machine integers: the read is legal
when, for every run-time extent ``n`` in ``0 .. N_MAX - 1`` and the largest one a
``(n, 4)`` tensor with an int32 extent may have (:data:`N_LARGE`), and every point (CTA,
thread, loop counter) where the condition holds, ``0 <= i < n`` and the element offset
``i * 4`` does not wrap int32.  A condition the kernel computes (``if``, ``pred=``) whose
arithmetic wraps at some point says nothing; an assumption is read over mathematical
integers (issue 44).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

#: Run-time extents the model tries: 0 .. N_MAX - 1, and the largest A (n, 4) with an
#: int32 extent may have (2**31 - 1 elements at most: the kernel's argument check).
N_MAX = 24
N_LARGE = (2**31 - 1) // 4

#: Row index expressions; ``k`` is the counter of a loop over ``n``.
INDICES = ("tx", "bx * 8 + tx", "tx * 2", "tx // 2", "tx - 1", "k", "k + 1", "k * 2 + tx")

#: Conditions on the index (``{i}``: the index expression), from right to off by one.
CONDITIONS = (
    "{i} < n",
    "{i} <= n",
    "{i} + 1 < n",
    "{i} + 1 <= n",
    "{i} < n - 1",
    "{i} < n + 1",
    "{i} * 2 < n",
    "{i} < n * 2",
    "{i} * 4 + 3 < n * 4",
    "{i} * 4 < n * 4 + 4",
    "{i} >= 1 and {i} < n",
    "{i} >= 0 and {i} < n",
    "tx < n",
    "tx >= 1 and {i} < n",
)


@dataclass(frozen=True)
class ExtentCase:
    """One generated kernel.

    Attributes
    ----------
    index : str
        The row index expression (one of :data:`INDICES`).
    condition : str | None
        A condition of :data:`CONDITIONS` (None: unguarded).
    how : str
        ``"if"``, ``"pred"`` or ``"assume"``: how the condition is stated.
    block : int
        Threads per CTA (8 or 16).
    grid : str
        ``"one"`` (1 CTA) or ``"ceil"`` (``T.ceildiv(n, block)`` CTAs).
    """

    index: str
    condition: str | None
    how: str
    block: int
    grid: str

    @property
    def loop(self) -> bool:
        """Whether the index reads the loop counter ``k``."""
        return "k" in self.index

    def _cond_text(self) -> str | None:
        return None if self.condition is None else self.condition.format(i=f"({self.index})")

    def source(self, name: str) -> str:
        """The kernel's TVMScript source, defining ``name``."""
        grid = "1" if self.grid == "one" else f"T.ceildiv(n, {self.block})"
        cond = self._cond_text()
        call = 'T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[{i}, :]{pred})'.format(
            i=self.index, pred=f", pred={cond}" if cond and self.how == "pred" else ""
        )
        body = [call]
        if cond and self.how == "if":
            body = [f"if {cond}:", "    " + call]
        elif cond and self.how == "assume":
            body = [f"T.assume({cond})", call]
        if self.loop:
            body = ["for k in T.serial(n):"] + ["    " + line for line in body]
        lines = [
            "from tvm_tirx.script import tirx as T",
            'n = T.dynamic("n")',
            "@T.function",
            f'def {name}(A: T.Tensor((n, 4), "float32", align=16)):',
            f"    T.device_entry(launch=T.cuda.LaunchConfig(grid={grid}, block={self.block}))",
            '    bx = T.cuda.block_idx("x")',
            '    tx = T.cuda.thread_idx("x")',
            '    r = T.alloc_local((4,), "float32")',
        ] + ["    " + line for line in body]
        return "\n".join(lines) + "\n"

    def _points(self, n: int):
        """``(bx, tx, k)`` of every point of the launch for extent ``n`` (for the large
        extent, the first and last CTA and loop values: every expression here is
        monotone in each of them, so its extremes are among these points)."""
        ctas = 1 if self.grid == "one" else -(-n // self.block)
        ks = range(n) if self.loop else (0,)
        if n == N_LARGE:
            ctas_at, ks = sorted({0, ctas - 1}), sorted({0, n - 1}) if self.loop else (0,)
        else:
            ctas_at = range(ctas)
        for bx in ctas_at:
            for tx in range(self.block):
                for k in ks:
                    yield bx, tx, k

    def _sizes(self):
        return (*range(N_MAX), N_LARGE)

    def _kept(self, parts):
        """The conjuncts of the condition the kernel's proof can use: a condition the
        kernel computes (``if``, ``pred=``) whose int32 arithmetic wraps at some point
        (where the conjuncts before it hold) says nothing; an assumption is read over
        mathematical integers."""
        if self.how == "assume":
            return parts
        kept = []
        for part in parts:
            if not any(
                _int32(part, env) is None for env in self._envs() if all(_int32(c, env) for c in kept)
            ):
                kept.append(part)
        return kept

    def _envs(self):
        for n in self._sizes():
            for bx, tx, k in self._points(n):
                yield {"n": n, "bx": bx, "tx": tx, "k": k}

    def violation(self):
        """``(n, bx, tx, k)`` of a point that reads outside ``A`` or whose element offset
        ``i * 4`` wraps int32, or None (legal)."""
        cond = self._cond_text()
        kept = self._kept(cond.split(" and ") if cond else [])
        for env in self._envs():
            if not all(_int32(c, env) if self.how != "assume" else eval(c, {}, env) for c in kept):  # pylint: disable=eval-used
                continue
            i = _int32(f"({self.index}) * 4", env)
            if i is None or not 0 <= i // 4 < env["n"]:
                return env["n"], env["bx"], env["tx"], env["k"]
        return None


def _int32(expr: str, env: dict):
    """``expr`` evaluated as int32 arithmetic: its value (a bool for a comparison), or
    None when a ``+ - *`` leaves the int32 range."""
    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return env[node.id]
        if isinstance(node, ast.BinOp):
            a, b = ev(node.left), ev(node.right)
            if a is None or b is None:
                return None
            if isinstance(node.op, ast.FloorDiv):
                return a // b
            value = {ast.Add: a + b, ast.Sub: a - b, ast.Mult: a * b}[type(node.op)]
            return value if -(2**31) <= value < 2**31 else None
        if isinstance(node, ast.Compare):
            a, b = ev(node.left), ev(node.comparators[0])
            if a is None or b is None:
                return None
            return {ast.Lt: a < b, ast.LtE: a <= b, ast.GtE: a >= b, ast.Gt: a > b}[type(node.ops[0])]
        raise ValueError(f"int32 model: {ast.dump(node)}")

    return ev(ast.parse(expr, mode="eval"))
