"""A consumer warpgroup's main loop over the CTA's iterations (query blocks of its heads).

Per iteration ``g`` (stage ``s = g % stages`` of the Q / dO ring), consumer ``c``:

1. waits until the stage is loaded (``full[s]``: Q, dO, the LSE and Dsum rows), issues
   ``S^T = K_c Q^T`` and ``dP^T = V_c dO^T`` (one wgmma group) and waits (``wait_group 0``);
2. computes ``P^T`` and ``dS^T`` in registers (:mod:`.gradients`);
3. stores ``dS^T`` into ``sds[c]`` (:mod:`.exchange`; the barrier also tells that the
   previous ``dQ`` reduce has read ``sdq[c]``);
4. issues ``dV += P^T dO`` and ``dK += dS^T Q`` (one group), waits, issues ``dQ = dS
   K_c`` (the packed ``P^T`` and ``dS^T`` registers are then free: all three products
   in flight at once spilled at head_dim 128), waits, and releases the stage
   (``empty[s]``: every wgmma that read it has retired, PTX ISA 9.7.15.7);
5. reduces its ``dQ`` block into ``dQacc`` (TMA reduce-add from ``sdq[c]``; with
   ``deterministic``, in its turn: :mod:`.exchange`).

``sds[c]`` is written again only after this thread's ``wait_group 0`` of the previous
iteration retired the ``dQ`` product that read it.  With ``dq_split="columns"`` or
``"rows"`` the other consumer's ``dQ`` reads ``sds[c]`` too: step 3 then joins both warpgroups, and
after step 4's wait each consumer tells the other that its tile is free again
(:mod:`.exchange`).

``overlap=True`` (with ``"columns"`` only) issues the same products in another order, so
that the tensor cores work under the registers' arithmetic and the exchanges, as
FlashAttention-3's backward does: ``S^T`` and ``dP^T`` in two groups, ``P^T`` computed
once ``S^T`` retired (``wait_group 1``) while ``dP^T`` runs; after ``dP^T``, ``dS^T``;
``dV`` issued before ``dS^T`` is stored and both consumers join; then ``dQ`` and ``dK``
(two groups; at head_dim 128 after ``dV`` retired: :attr:`.config.BackwardConfig.dv_in_flight`),
and once ``dV`` and ``dQ`` retired (``wait_group 1``: groups retire in
order, PTX ISA 9.7.15.7) the ``dQ`` block goes to ``sdq[c]`` and its reduce is issued
while ``dK`` still runs; ``wait_group 0`` before the stage is released.  Registers: at
most ``S + dP + dV + dK`` live (the packs come after ``dS^T``), 192 at head_dim 128
(:mod:`.config`).
"""

from __future__ import annotations

from tvm.script import tirx as T

from .config import BackwardConfig
from .exchange import make_exchange
from .gradients import first_key, make_gradients
from .products import make_products
from .state import Step

__all__ = ["make_consumer"]


def _make_iterations(cfg: BackwardConfig, exchange):
    """``(serial, overlapped)``, with ``exchange`` the macros of :func:`.exchange.make_exchange`:
    ``serial(smem, regs, keys, step, place)`` (steps 1-4 of the module docstring; the
    caller releases the stage, then reduces) and
    ``overlapped(outputs, smem, regs, keys, step, place)`` (``overlap=True``: the whole
    iteration, the reduce under ``dK``; the caller releases the stage after it)."""
    products = make_products(cfg)
    probabilities, finish, gradients = make_gradients(cfg)
    share_ds, release_ds, reduce_dq, _ = exchange
    wait = T.ptx["wgmma.wait_group.sync.aligned"]

    @T.macro
    def serial(smem, regs, keys, step, place):
        products.scores(smem, regs, step.s, place.c)
        wait(0)
        gradients(regs, smem.srows.sub[step.s], first_key(keys.kb, place.c), step.qb * cfg.block_q, place)
        share_ds(smem, regs, step, place)
        products.grads(smem, regs, step, place.c)
        wait(0)
        if cfg.shares_ds:
            release_ds(keys, step, place)

    @T.macro
    def overlapped(outputs, smem, regs, keys, step, place):
        products.scores_apart(smem, regs, step.s, place.c)
        wait(1)  # S^T retired, dP^T may still run
        probabilities(regs, smem.srows.sub[step.s], first_key(keys.kb, place.c), step.qb * cfg.block_q, place)
        wait(0)
        finish(regs, smem.srows.sub[step.s], place)
        products.dv(smem, regs, step)  # dV under the exchange of dS^T
        share_ds(smem, regs, step, place)
        if not cfg.dv_in_flight:
            wait(0)  # dV retired: P^T's registers free for dQ (.config.IN_FLIGHT_REGISTERS)
        products.dq_dk(smem, regs, step, place.c)
        wait(1)  # dV and dQ retired (groups retire in order), dK may still run
        release_ds(keys, step, place)
        reduce_dq(outputs, smem, regs, keys, step, place)
        wait(0)  # every wgmma that read the stage retired

    return serial, overlapped


def make_consumer(cfg: BackwardConfig):
    """The macro ``consume(outputs, smem, bars, regs, keys, place)``: the
    :class:`.state.Outputs`, a :class:`.state.Shared`, :class:`.state.Barriers`,
    :class:`.state.Registers`, :class:`.state.Keys`, :class:`.state.Place` -- the loop of
    the module docstring over ``keys.steps`` iterations (``overlap``: its overlapped
    order)."""
    ring, exchange = cfg.ring, make_exchange(cfg)
    serial, overlapped = _make_iterations(cfg, exchange)
    _, _, reduce_dq, drain = exchange

    @T.macro
    def consume(outputs, smem, bars, regs, keys, place):
        T.cuda.mbarrier_wait_phase(bars.kv_full.sub[0, :], 0)
        for g in T.serial(keys.steps):
            s = ring.slot(g)
            h, qb = cfg.step(g, keys.kb, keys.hk, place.seq_len)
            ring.wait(bars.full, s, g, None)
            if cfg.overlap:
                overlapped(outputs, smem, regs, keys, Step(g, s, h, qb), place)
                ring.release(bars.empty, s, place.tid)
            else:
                serial(smem, regs, keys, Step(g, s, h, qb), place)
                ring.release(bars.empty, s, place.tid)
                reduce_dq(outputs, smem, regs, keys, Step(g, s, h, qb), place)
        drain(place.tid)

    return consume
