"""Shared memory of a peer CTA in the cluster: the ``remote_cta_id=`` parameter,
the address form that maps an operand into that CTA with ``mapa``, and the
launch rules of the forms that use them.

Used by the families whose forms address ``.shared::cluster`` memory
(``mbarrier``, ``cp_async_bulk``, ``atomics``); not a family itself (the leading ``_``
keeps it out of the registry's module scan).

PTX ISA 9.2, 9.7.10.26 (``mapa``): ``mapa.shared::cluster.u32 d, a, rank``
maps the ``.shared::cta`` window address ``a`` of a variable in this CTA to
the ``.shared::cluster`` address of the same variable in CTA ``rank`` of the
cluster.  A CTA's own ``.shared::cta`` addresses are valid ``.shared::cluster``
addresses of that CTA (PTX ISA 9.2, 5.1.4 "Shared State Space").
"""

from __future__ import annotations

from tvm import tirx

from .. import ComputedAddress, Param, ptx_call, register_address_form, TileError

__all__ = ["PEER_ADDRESS", "REMOTE_CTA_ID", "MAPA", "peer_address", "needs_cluster", "check_cluster_rank", "remote_rule"]

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


register_address_form(PEER_ADDRESS, peer_address)


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
