"""A reference model of the bounds rule for run-time extents.

A case is a kernel reading one 16-byte row ``A.sub[i, :]`` of ``A: (n, 4) float32``
with ``n = T.dynamic("n")``, where the row index ``i`` is an expression of the CTA id,
the thread id and (optionally) the counter of ``for k in T.serial(n)``, and a condition
on it is written as an enclosing ``if``, as ``pred=`` or as ``T.assume`` (or not at all).
The model decides legality by brute force: the read is legal when, for every run-time
extent ``n`` in ``0 .. N_MAX - 1`` and every point (CTA, thread, loop counter) where the
condition holds, ``0 <= i < n``.  The coefficients stay small, so an illegal case fails
at a small ``n``.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Run-time extents the model tries.
N_MAX = 24

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
        """``(bx, tx, k)`` of every point of the launch for extent ``n``."""
        ctas = 1 if self.grid == "one" else -(-n // self.block)
        ks = range(n) if self.loop else (0,)
        for bx in range(ctas):
            for tx in range(self.block):
                for k in ks:
                    yield bx, tx, k

    def violation(self):
        """``(n, bx, tx, k)`` of a point that reads outside ``A``, or None (legal)."""
        cond = self._cond_text()
        for n in range(N_MAX):
            for bx, tx, k in self._points(n):
                env = {"n": n, "bx": bx, "tx": tx, "k": k}
                if cond is not None and not eval(cond, {}, env):  # pylint: disable=eval-used
                    continue
                i = eval(self.index, {}, env)  # pylint: disable=eval-used
                if not 0 <= i < n:
                    return n, bx, tx, k
        return None
