"""Shared memory of a peer CTA in the cluster: the ``remote_cta_id=`` parameter,
the address form that maps an operand into that CTA with ``mapa``, and the
launch rules of the forms that use them.

Used by the families whose forms address ``.shared::cluster`` memory
(``mbarrier``, ``cp_async_bulk``, ``atomics``); not a family itself (the leading ``_``
keeps it out of the registry's module scan): those families list its roles in
their :func:`~tvm_tirx.tile.register_family` -- each of them the address form
(:data:`ADDRESS_FORMS`), ``cp_async_bulk`` the kernel rule :func:`cluster_exit`
(first of its rules: a kernel's multicasts and remote arrives are checked
before its bulk groups).

PTX ISA 9.2, 9.7.10.26 (``mapa``): ``mapa.shared::cluster.u32 d, a, rank``
maps the ``.shared::cta`` window address ``a`` of a variable in this CTA to
the ``.shared::cluster`` address of the same variable in CTA ``rank`` of the
cluster.  A CTA's own ``.shared::cta`` addresses are valid ``.shared::cluster``
addresses of that CTA (PTX ISA 9.2, 5.1.4 "Shared State Space").
"""

from __future__ import annotations

from tvm import tirx

from .. import ComputedAddress, Param, protocol_of, ptx_call, TileError
from ._cluster_handshake import handshake_roots, releases
from ._sync import initialised, synchronises, where

__all__ = [
    "PEER_ADDRESS", "REMOTE_CTA_ID", "MAPA", "peer_address", "needs_cluster", "check_cluster_rank", "remote_rule",
    "cluster_exit", "ADDRESS_FORMS",
]

#: Address form of an operand that ``remote_cta_id=`` may place in a peer CTA.
PEER_ADDRESS = "peer_shared"
#: The instruction that maps an address into a peer CTA.
MAPA = "mapa.shared::cluster.u32"


def _check_rank(value):
    dtype = getattr(getattr(value, "ty", None), "dtype", None)
    if dtype not in ("uint32", "int32"):
        return f"{dtype or type(value).__name__} {value!r}; give T.uint32(rank) or a uint32/int32 expression"
    return None


#: ``remote_cta_id=``: the rank, in the cluster, of the CTA whose shared memory
#: the operand names (``%cluster_ctarank``, not a block index).
REMOTE_CTA_ID = Param(
    doc="the peer CTA's rank in the cluster (a uint32/int32 expression)",
    check=_check_rank,
    required=False,
)


def peer_address(call, buf, coord):
    """The operand's address in the CTA of rank ``call.params["remote_cta_id"]``:
    the view's ``.shared::cta`` address mapped with ``mapa`` into a scratch
    register; without ``remote_cta_id`` the view's own address."""
    rank = call.params.get("remote_cta_id")
    if rank is None:
        return buf.ptr_to(coord)
    rank = rank if rank.ty.dtype == "uint32" else tirx.Cast("uint32", rank)
    local = tirx.Cast(
        "uint32", tirx.call_pure_extern("uint64", "__cvta_generic_to_shared", buf.ptr_to(coord))
    )
    scratch = tirx.decl_buffer((1,), "uint32", name="peer_addr", scope="local")
    setup = tirx.Evaluate(ptx_call(MAPA, [scratch[0], local, rank]))
    return ComputedAddress(scratch[0], (setup,), (scratch,))


#: ``register_family(address_forms=...)`` of each family whose roles may address a peer CTA
#: (``atomics``, ``cp_async_bulk``, ``mbarrier``: one name, one function).
ADDRESS_FORMS = {PEER_ADDRESS: peer_address}


def _cluster_size(launch) -> int:
    return launch.cluster_size if launch is not None else 1


def needs_cluster(opcode: str, launch, what: str):
    """A TileError unless the kernel launches clusters of more than one CTA."""
    if launch is not None and _cluster_size(launch) > 1:
        return None
    return TileError(
        opcode,
        f"{what} needs a cluster launch",
        expected="T.device_entry(launch=T.cuda.LaunchConfig(..., cluster=N)) with N > 1",
        found="a launch without clusters" if launch is None or not launch.cluster else "clusters of one CTA",
    )


def check_cluster_rank(opcode: str, rank, launch):
    """The rule of ``remote_cta_id``: a cluster launch, and a constant rank below its size."""
    err = needs_cluster(opcode, launch, "remote_cta_id")
    if err is not None:
        return err
    value = getattr(rank, "value", None)
    size = _cluster_size(launch)
    if isinstance(value, int) and not 0 <= value < size:
        return TileError(
            opcode,
            "remote_cta_id outside the cluster",
            operand="parameter remote_cta_id",
            expected=f"a rank in [0, {size}) (the cluster has {size} CTAs)",
            found=str(value),
        )
    return None


def remote_rule(opcode: str):
    """``kernel_check`` of a form taking ``remote_cta_id=``: :func:`check_cluster_rank` when it is given."""

    def check(call):
        rank = call.params.get("remote_cta_id")
        return None if rank is None else check_cluster_rank(opcode, rank, call.facts.launch)

    return check


# -- kernel rule: no CTA leaves while a peer may still write or signal it ----------------------------


def cluster_exit(view) -> list:
    """Kernel rule: after an operation on a peer CTA's shared memory or barrier (a
    multicast copy, a copy into a peer, a remote arrive), every path to the
    kernel's end passes a cluster barrier, so that no CTA of the cluster exits
    (its shared memory released) while a peer still multicasts into it or
    arrives on its barriers.  PTX ISA 9.2, 9.7.13.2 (``barrier.cluster``) and
    5.1.4 (a CTA's shared memory lives as long as the CTA).  A statement no
    family describes may be the barrier (``barrier.cluster.arrive`` / ``wait``
    written raw): a path through one is not refused.  In a cluster of two
    CTAs, the mbarrier handshake stands for the cluster barrier: a remote
    arrive on the peer's ``done`` barrier, then a wait on the CTA's own
    (:mod:`._cluster_handshake`).  Followed for the barriers the kernel
    initialises (the multicast's ``mbar=``, the remote arrive's barrier)."""
    protocol = protocol_of(view)
    launch = protocol.facts.launch
    if launch is None or launch.cluster_size <= 1:
        return []
    errors, seen = [], set()
    roots = handshake_roots(protocol)

    def released(leaf):  # a cluster barrier, or the mbarrier handshake (._cluster_handshake)
        return synchronises(protocol, leaf, "cluster") or releases(protocol, leaf, roots)

    for event in protocol.of("arrive", "expect_tx", "complete_tx"):
        if event.scope != "peer" or event.leaf.index in seen or not initialised(protocol, event.element):
            continue
        seen.add(event.leaf.index)
        if releases(protocol, event.leaf, roots):
            continue
        paths = protocol.program.forward(event.leaf, released)
        if any(path.stop is None for path in paths):
            errors.append(
                TileError(
                    event.what,
                    "CTA may exit while a peer CTA still writes or signals it",
                    expected=f"T.cuda.cluster_sync() after the peer operation at {where(event.leaf)}, before the "
                    "kernel ends, on every path (each CTA of the cluster waits for the others), or in a 2-CTA "
                    "cluster a remote arrive on the peer's barrier followed by a wait on the CTA's own",
                    found=f"a path from {where(event.leaf)} to the kernel's end with no cluster barrier",
                    location=where(event.leaf),
                )
            )
    return errors

