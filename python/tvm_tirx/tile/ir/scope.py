"""Execution scopes: the group axes that lead each operand, and their thread bindings.

=============  ===============================================  =========================
scope          group axes (outermost first)                     one instance is
=============  ===============================================  =========================
``thread``     none                                             each thread
``warp``       ``(lane,)`` -- 32                                each warp
``warpgroup``  ``(warp_in_group, lane)`` -- ``(4, 32)``          each 4-warp warpgroup
``cta``        ``(warp, lane)`` -- ``(threads / 32, 32)``        the CTA
``cluster``    CTA-in-cluster axes, then ``(warp, lane)``       the cluster
=============  ===============================================  =========================

A warp is 32 threads with consecutive linear thread ids and a warpgroup four
consecutive warps (PTX ISA 2.2 and 9.7.15, "warpgroup").  The linear thread id
is ``x + X * (y + Y * z)`` for a block of ``(X, Y, Z)`` threads (CUDA C++
Programming Guide, "Thread Hierarchy").  Inside a guard that only depends on
thread ids (``if T.cuda.lane_id() < 16:``), the group is the guarded box of
threads; :mod:`..analysis.groups` works it out.  A collective form (a warp of 32, a
warpgroup of 128 threads issuing one instruction) counts collectives instead
of threads: its levels inside the collective disappear from the group.
"""

from __future__ import annotations

from dataclasses import dataclass

from tvm.tirx import IntImm

from ...errors import TileError

__all__ = [
    "SCOPES",
    "LaunchFacts",
    "scope_rank",
    "full_group",
    "group_exprs",
    "rule_collective_scope",
    "require_collective_scope",
    "thread_axis_values",
    "WARP",
    "WARPGROUP_WARPS",
]

#: Every scope name of the tile contract.
SCOPES = ("thread", "warp", "warpgroup", "cta", "cluster")
#: Threads per warp (PTX ISA 2.2).
WARP = 32
#: Warps per warpgroup (PTX ISA 9.7.15).
WARPGROUP_WARPS = 4


@dataclass(frozen=True)
class LaunchFacts:
    """The launch as the kernel's IR states it.

    Attributes
    ----------
    block : tuple[int, int, int]
        Threads per CTA along x, y, z.
    thread_vars : tuple
        The ``threadIdx`` Vars (x first; an axis of extent 1 may have none).
    cluster : tuple[int, ...]
        CTAs per cluster along the used axes (``()`` without clusters).
    cluster_vars : tuple
        The ``%cluster_ctaid`` Vars of those axes.
    """

    block: tuple
    thread_vars: tuple
    cluster: tuple = ()
    cluster_vars: tuple = ()

    @property
    def threads(self) -> int:
        """Threads per CTA."""
        return self.block[0] * self.block[1] * self.block[2]

    @property
    def cluster_size(self) -> int:
        """CTAs per cluster (1 without clusters)."""
        out = 1
        for n in self.cluster:
            out *= n
        return out

    def linear_thread(self):
        """The linear thread id in the CTA, as an int32 expression."""
        tv = list(self.thread_vars) + [IntImm("int32", 0)] * (3 - len(self.thread_vars))
        bx, by, _ = self.block
        if len(self.thread_vars) <= 1:
            return tv[0]
        return tv[0] + bx * (tv[1] + by * tv[2])

    def thread_values(self, t: int) -> dict:
        """Per-axis thread ids of linear thread ``t``: ``{var: value}``."""
        bx, by, _ = self.block
        coords = (t % bx, (t // bx) % by, t // (bx * by))
        return {v: coords[i] for i, v in enumerate(self.thread_vars)}

    def cluster_values(self, c: int) -> dict:
        """Per-axis cluster CTA ids of linear cluster rank ``c``: ``{var: value}``."""
        out, rest = {}, c
        for var, n in zip(self.cluster_vars, self.cluster):
            out[var] = rest % n
            rest //= n
        return out


#: Group levels of each scope, outermost first: ``(stride, extent)`` over the
#: linear thread id in the CTA -- the level's coordinate is ``(t // stride) %
#: extent``; extent None: the rest of the CTA (``t // stride``).  ``cluster``
#: puts the CTA-in-cluster axes first.
_LEVELS = {
    "thread": (),
    "warp": ((1, WARP),),
    "warpgroup": ((WARP, WARPGROUP_WARPS), (1, WARP)),
    "cta": ((WARP, None), (1, WARP)),
    "cluster": ((WARP, None), (1, WARP)),
}
#: Threads in one instance of each scope below the CTA (None: the whole CTA).
_INSTANCE = {"thread": 1, "warp": WARP, "warpgroup": WARP * WARPGROUP_WARPS, "cta": None, "cluster": None}


def _levels(scope: str, width: int):
    """The scope's within-CTA levels once a collective of ``width`` threads is
    one unit: levels inside the collective disappear, the one it cuts is
    divided (``cta`` at width 128: warps of 4 -> warpgroups)."""
    out = []
    for stride, extent in _LEVELS[scope]:
        if extent is not None and stride * extent <= width:
            continue  # inside the collective
        if stride < width:
            extent = None if extent is None else extent * stride // width
            stride = width
        out.append((stride, extent))
    return tuple(out)


def rule_collective_scope(scope: str, collective, opcode: str = "") -> TileError | None:
    """A collective form runs at a scope whose instance holds whole collectives.

    Returns
    -------
    TileError | None
        The error when ``scope``'s instance (a thread, a warp ...) is narrower than
        the collective.
    """
    instance = _INSTANCE[scope]
    if collective.width > 1 and instance is not None and instance < collective.width:
        return TileError(
            opcode,
            f"{collective.name}-collective instruction at {scope} scope",
            expected=f'scope="{collective.name}" (or wider): all {collective.width} '
            f"{collective.member}s issue it together",
            found=f'scope="{scope}"',
        )
    return None


def require_collective_scope(scope: str, collective, opcode: str = "") -> None:
    """Raise :func:`rule_collective_scope`'s error, if any.

    Raises
    ------
    TileError
        ``scope``'s instance (a thread, a warp ...) is narrower than the collective.
    """
    err = rule_collective_scope(scope, collective, opcode)
    if err:
        raise err


def scope_rank(scope: str, opcode: str = "", cluster_rank: int | None = None, width: int = 1) -> int | None:
    """Number of group axes of ``scope`` for a form issued by collectives of
    ``width`` threads (None when it depends on an unknown cluster shape).

    Raises
    ------
    TileError
        ``scope`` is not a scope name.
    """
    if scope not in SCOPES:
        raise TileError(opcode, "unknown execution scope", expected=" / ".join(SCOPES), found=repr(scope))
    levels = len(_levels(scope, width))
    if scope != "cluster":
        return levels
    return None if cluster_rank is None else cluster_rank + levels


def full_group(scope: str, facts: LaunchFacts, opcode: str = "", width: int = 1):
    """``(extents, coordinate_fn, instance_fn)`` of ``scope`` for the whole launch.

    ``coordinate_fn(t, c)`` gives the group coordinate of linear thread ``t`` in
    cluster rank ``c``; ``instance_fn(t, c)`` which instance of the scope it
    belongs to.  With ``width > 1`` (a collective form) the coordinates count
    collectives of ``width`` threads.  Expression forms come from :func:`group_exprs`.

    Raises
    ------
    TileError
        The launch cannot be divided into the scope's groups (e.g. a block of
        48 threads at ``"cta"``, or ``"cluster"`` without a cluster launch).
    """
    threads = facts.threads
    if scope == "thread":
        return (), (lambda t, c: ()), (lambda t, c: (c, t))
    need = max(_INSTANCE[scope] or WARP, width)
    if threads % need:
        raise TileError(
            opcode,
            f"a {scope}-scope call needs whole {'warps' if need == WARP else 'warpgroups'}",
            expected=f"a block of a multiple of {need} threads",
            found=f"{threads} threads",
        )
    levels = _levels(scope, width)
    extents = tuple(threads // s if e is None else e for s, e in levels)

    def within(t, c):
        return tuple((t // s) % n for (s, _), n in zip(levels, extents))

    if scope in ("warp", "warpgroup"):
        return extents, within, (lambda t, c: (c, t // _INSTANCE[scope]))
    if scope == "cta":
        return extents, within, (lambda t, c: (c,))
    if not facts.cluster:
        raise TileError(
            opcode,
            "cluster scope without a cluster launch",
            expected="T.device_entry(launch=T.cuda.LaunchConfig(..., cluster=...))",
            found="a launch without clusters",
        )

    def cluster_coord(t, c):
        vals = facts.cluster_values(c)
        return tuple(vals[v] for v in facts.cluster_vars) + within(t, c)

    return tuple(facts.cluster) + extents, cluster_coord, (lambda t, c: ())


def group_exprs(scope: str, facts: LaunchFacts, width: int = 1) -> tuple:
    """The issuing thread's group coordinate of ``scope`` as int32 expressions
    (counting collectives of ``width`` threads)."""
    if scope == "thread":
        return ()
    t = facts.linear_thread()
    out = []
    for stride, extent in _levels(scope, width):
        value = t if stride == 1 else t // stride
        out.append(value if extent is None else value % extent)
    cluster = tuple(facts.cluster_vars) if scope == "cluster" else ()
    return cluster + tuple(out)


def thread_axis_values(t: int, c: int) -> dict:
    """Values of the layout thread axes (``tvm.tirx.layout.Axis``) for linear thread ``t``
    in cluster rank ``c``."""
    return {
        "laneid": t % WARP,
        "warpid": t // WARP,
        "tx": t,
        "wgid": t // (WARP * WARPGROUP_WARPS),
        "wid_in_wg": (t // WARP) % WARPGROUP_WARPS,
        "tid_in_wg": t % (WARP * WARPGROUP_WARPS),
        "cbx": c,
    }
