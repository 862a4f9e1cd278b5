"""A reference model of the bounds rule under machine integers (issue 44 item 2).

A case is a kernel whose threads each load an index ``j`` of dtype ``src`` from memory,
cast it to ``dst`` (``t = T.cast(j, dst)``), and read ``A[i]`` of ``A: (n,) float32``
with ``n = T.dynamic("n")``, where ``i`` is an expression of ``t`` and the read sits
under a guard written over ``j``, ``t`` and ``n`` (or under none).

The model decides legality as the GPU computes: a cast keeps the low bits of the value
(two's complement), ``int32`` / ``uint32`` arithmetic wraps, and the guard is evaluated on
the wrapped values.  The read is legal when, for every run-time extent ``n`` of
:data:`SIZES` (up to 2**31 - 1, the most elements a tensor with an ``int32`` extent holds)
and every loaded value ``j`` of :func:`witnesses` where the guard holds, the index
arithmetic does not wrap and ``0 <= i < n``.  The witnesses are the values where these
small expressions change behaviour: each type's ends, 2**30 and 2**31 around the
``int32`` range, and ``n`` and its neighbours.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Run-time extents of A the model tries, small ones and those near 2**31.
SIZES = (0, 1, 7, 2**30 - 1, 2**30, 2**30 + 1, 2**31 - 2, 2**31 - 1)

#: Loaded dtype -> (cast target, load opcode).
SOURCES = {"uint32": "ld.global.b32", "int32": "ld.global.b32", "int64": "ld.global.b64"}
TARGETS = ("int32", "int64")

#: Index expressions of ``t`` (the cast value).
INDICES = ("t", "t + 1", "t * 2", "t - 1")

#: Guards; ``{n_src}`` is ``n`` cast to the loaded dtype, ``{n_dst}`` to the cast's.
GUARDS = (
    None,
    "t < {n_dst}",
    "0 <= t and t < {n_dst}",
    "j < {n_src}",
    "0 <= j and j < {n_src}",
    "0 <= j and t < {n_dst}",
    "0 <= t and {i} < {n_dst}",
    "0 <= t and t < {n_dst} - 1",
    "0 <= t and t * 2 < {n_dst}",
)


def _range(dtype):
    bits = int(dtype.lstrip("uint"))
    return (0, 2**bits - 1) if dtype.startswith("u") else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)


def wrap(value: int, dtype: str) -> int:
    """``value`` in ``dtype``'s two's complement (what a cast or a wrapped sum keeps)."""
    lo, hi = _range(dtype)
    return (value - lo) % (hi - lo + 1) + lo


def witnesses(dtype: str, n: int):
    """The loaded values the model tries for extent ``n``, inside ``dtype``'s range."""
    lo, hi = _range(dtype)
    near = (0, 1, 2, -1, -2, n - 2, n - 1, n, n + 1, 2**30 - 1, 2**30, 2**30 + 1, 2**31 - 1, 2**31, 2**31 + 1)
    return sorted({v for v in (*near, lo, hi, lo + 1, hi - 1, 2**32 - 1, 2**32, 2**32 + 1) if lo <= v <= hi})


@dataclass(frozen=True)
class IntCase:
    """One generated kernel: ``src`` loaded, cast to ``dst``, ``index`` read under ``guard``."""

    src: str
    dst: str
    index: str
    guard: str | None

    def _guard_text(self):
        if self.guard is None:
            return None
        return re.sub(r"\bj\b", "j[0]", self.guard).format(
            i=self.index, n_src=f'T.cast(n, "{self.src}")', n_dst=f'T.cast(n, "{self.dst}")' if self.dst != "int32" else "n"
        )

    def source(self, name: str) -> str:
        """The kernel's TVMScript source, defining ``name``."""
        read = 'T.cuda.tile.apply(T.ptx["ld.global.f32"], r, A.sub[{i} : {i} + 1])'.format(i=self.index)
        guard = self._guard_text()
        body = [f"if {guard}:", "    " + read] if guard else [read]
        lines = [
            "from tvm_tirx.script import tirx as T",
            'n = T.dynamic("n")',
            "@T.function",
            f'def {name}(A: T.Tensor((n,), "float32"), Idx: T.Tensor((32,), "{self.src}")):',
            "    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))",
            '    tid = T.cuda.thread_idx("x")',
            '    r = T.alloc_local((1,), "float32")',
            f'    j = T.alloc_local((1,), "{self.src}")',
            f'    T.cuda.tile.apply(T.ptx["{SOURCES[self.src]}"], j, Idx.sub[tid : tid + 1])',
            f'    t = T.cast(j[0], "{self.dst}")',
        ] + ["    " + line for line in body]
        return "\n".join(lines) + "\n"

    def _eval(self, expr: str, j: int, n: int):
        """``expr`` on the GPU: the value, or None when its arithmetic wraps."""
        t = wrap(j, self.dst)
        env = {"j": j, "t": t, "n": n}
        for a, b, op in (("t", "1", "+"), ("t", "2", "*"), ("t", "1", "-")):
            text = f"{a} {op} {b}"
            if text in expr:
                ideal = eval(text, {}, env)  # pylint: disable=eval-used
                if wrap(ideal, self.dst) != ideal:
                    return None, wrap(ideal, self.dst)
        return eval(expr, {}, env), None  # pylint: disable=eval-used

    def _holds(self, j: int, n: int) -> bool:
        if self.guard is None:
            return True
        text = self.guard.format(i=self.index, n_src="n", n_dst="n")
        env = {"j": j, "t": wrap(j, self.dst), "n": n}
        for part in text.split(" and "):
            lhs = part
            value, wrapped = self._eval(lhs, j, n) if any(s in lhs for s in ("+", "*", "-")) else (None, None)
            if value is None and wrapped is not None:  # the guard compares the wrapped value
                part = part.replace(part.split(" < ")[0], str(wrapped))
            if not eval(part, {}, env):  # pylint: disable=eval-used
                return False
        return True

    def violation(self):
        """``(n, j)`` of a loaded value that reads outside ``A`` (or wraps), or None."""
        for n in SIZES:
            for j in witnesses(self.src, n):
                if not self._holds(j, n):
                    continue
                i, _ = self._eval(self.index, j, n)
                if i is None or not 0 <= i < n:
                    return n, j
        return None
