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

``overlap=True`` (with ``"columns"`` or ``"rows"``) issues the same products in another order, so
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

``scores_ahead=True`` (with ``overlap``) does not wait for ``dK`` there: once the ``dQ``
block is reduced the consumer waits for the next stage and issues the next iteration's
``S^T`` (at head_dim 64 ``dP^T`` too: :data:`DP_AHEAD_HEAD_DIMS`) while ``dK`` runs, so
that the tensor cores do not idle from ``dK``'s end to the next ``S^T`` (the wait, the
release, the loop's head).  The wait that retires ``S^T`` retires ``dK`` too, the stage
``dK`` read is released, and the next iteration's ``dP^T``, ``P^T`` and ``dS^T`` follow
before the loop turns (:func:`_make_ahead`); ``dK`` reads ``dS^T`` from ``sds[c]``
(:mod:`.products`).  Registers: ``S + dV + dK`` (``+ dP`` at head_dim 64) while ``dK``
runs, at most the order's peak.
"""

from __future__ import annotations

from tvm.script import tirx as T

from .config import BackwardConfig
from .exchange import make_exchange
from .gradients import first_key, make_gradients
from .products import make_products
from .state import Step

__all__ = ["make_consumer", "DP_AHEAD_HEAD_DIMS"]

#: head_dims at which ``scores_ahead`` issues the next ``dP^T`` under ``dK`` too, not only ``S^T``
#: (ptxas 13.0, sm_90a: no spills at 64, by columns or rows; 52 bytes spilled at 128, where
#: ``dV + dK + S + dP`` and ``dK``'s addresses are all live then)
DP_AHEAD_HEAD_DIMS = (64,)


def _make_iterations(cfg: BackwardConfig, exchange):
    """``(serial, overlapped, parts)``, with ``exchange`` the macros of :func:`.exchange.make_exchange`:
    ``serial(smem, regs, keys, step, place)`` (steps 1-4 of the module docstring; the
    caller releases the stage, then reduces),
    ``overlapped(outputs, smem, regs, keys, step, place)`` (``overlap=True``: the whole
    iteration, the reduce under ``dK``; the caller releases the stage after it) and the
    pieces ``scores_ahead`` orders otherwise (:func:`_make_ahead`): the products, the macros
    ``p_values(regs, smem, keys, step, place)`` (``P^T``), :func:`.gradients.make_gradients`'s
    ``finish`` (``dS^T``, both packed) and ``after_ds(outputs, smem, regs, keys, step,
    place)`` (the rest of the overlapped iteration, to the reduce)."""
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
    def p_values(regs, smem, keys, step, place):
        probabilities(regs, smem.srows.sub[step.s], first_key(keys.kb, place.c), step.qb * cfg.block_q, place)

    @T.macro
    def after_ds(outputs, smem, regs, keys, step, place):
        """The overlapped order once ``dS^T`` is computed and packed, up to the reduce of
        ``dQ`` under ``dK``."""
        products.dv(smem, regs, step)  # dV under the exchange of dS^T
        share_ds(smem, regs, step, place)
        if not cfg.dv_in_flight:
            wait(0)  # dV retired: P^T's registers free for dQ (.config.IN_FLIGHT_REGISTERS)
        products.dq_dk(smem, regs, step, place.c)
        wait(1)  # dV and dQ retired (groups retire in order), dK may still run
        release_ds(keys, step, place)
        reduce_dq(outputs, smem, regs, keys, step, place)

    @T.macro
    def overlapped(outputs, smem, regs, keys, step, place):
        products.scores_apart(smem, regs, step.s, place.c)
        wait(1)  # S^T retired, dP^T may still run
        p_values(regs, smem, keys, step, place)
        wait(0)
        finish(regs, smem.srows.sub[step.s], place)
        after_ds(outputs, smem, regs, keys, step, place)
        wait(0)  # every wgmma that read the stage retired

    return serial, overlapped, (products, p_values, finish, after_ds)


def _make_ahead(cfg: BackwardConfig, parts):
    """``(scores, begin, ahead)`` of ``scores_ahead``, from ``parts`` (:func:`_make_iterations`'s
    third item).  ``scores(smem, regs, step, place)``: issues ``step``'s ``S^T`` (and, at
    :data:`DP_AHEAD_HEAD_DIMS`, its ``dP^T`` in a second group) and waits until ``S^T`` and
    every group before it retired.  ``begin(smem, regs, keys, step, place)``, after
    ``scores``: issues ``dP^T`` if ``scores`` did not, computes ``P^T`` under it, retires it
    and computes and packs ``dS^T``.  ``ahead(outputs, smem, bars, regs, keys, step,
    next_step, place)``: the rest of ``step``'s overlapped iteration (``dV``, the exchange,
    ``dQ``, ``dK``, the reduce of ``dQ``), then, while its ``dK`` still runs, the wait for
    ``next_step``'s stage and its ``scores``, whose wait retires ``dK`` too; the release of
    ``step``'s stage (that ``dK`` was its last reader) and ``begin`` of ``next_step``; in
    the CTA's last iteration the wait for ``dK`` and the release alone.

    Where the loop turns, only ``dV``, ``dK`` and the packed ``P^T`` and ``dS^T`` are live
    (160 registers at head_dim 128): with the loop turning before ``dS^T`` (``S`` and
    ``dP`` live across it, 192) ptxas spilled 456 bytes, and with ``dP^T`` issued under
    ``dK`` too (``dK``'s A fragment, the packed ``dS^T``, still live) 524.  No wgmma group
    is in flight across the loop's back edge: an ``S^T`` in flight there, from the
    previous iteration, made ptxas serialise every wgmma of the kernel (C7514/C7515)."""
    ring, (products, p_values, finish, after_ds) = cfg.ring, parts
    wait = T.ptx["wgmma.wait_group.sync.aligned"]

    both = cfg.head_dim in DP_AHEAD_HEAD_DIMS

    @T.macro
    def scores(smem, regs, step, place):
        """``step``'s ``S^T`` (and ``dP^T``), then the wait that retires ``S^T`` and all before it."""
        if both:
            products.scores_apart(smem, regs, step.s, place.c)
            wait(1)  # S^T retired, dP^T may still run
        else:
            products.scores_s(smem, regs, step.s, place.c)
            wait(0)

    @T.macro
    def begin(smem, regs, keys, step, place):
        if not both:
            products.scores_dp(smem, regs, step.s, place.c)
        p_values(regs, smem, keys, step, place)  # under dP^T
        wait(0)
        finish(regs, smem.srows.sub[step.s], place)

    @T.macro
    def ahead(outputs, smem, bars, regs, keys, step, next_step, place):
        after_ds(outputs, smem, regs, keys, step, place)
        if step.g + 1 < keys.steps:
            ring.wait(bars.full, next_step.s, next_step.g, None)
            scores(smem, regs, next_step, place)  # under this step's dK, which the wait retires too
            ring.release(bars.empty, step.s, place.tid)
            begin(smem, regs, keys, next_step, place)
        else:
            wait(0)  # every wgmma that read the stage retired
            ring.release(bars.empty, step.s, place.tid)

    return scores, begin, ahead


def make_consumer(cfg: BackwardConfig):
    """The macro ``consume(outputs, smem, bars, regs, keys, place)``: the
    :class:`.state.Outputs`, a :class:`.state.Shared`, :class:`.state.Barriers`,
    :class:`.state.Registers`, :class:`.state.Keys`, :class:`.state.Place` -- the loop of
    the module docstring over ``keys.steps`` iterations (``overlap``: its overlapped
    order)."""
    ring, exchange = cfg.ring, make_exchange(cfg)
    serial, overlapped, parts = _make_iterations(cfg, exchange)
    scores, begin, ahead = _make_ahead(cfg, parts)
    _, _, reduce_dq, drain = exchange

    def step_of(g, keys, place):
        h, qb = cfg.step(g, keys.kb, keys.hk, place.seq_len)
        return Step(g, ring.slot(g), h, qb)

    @T.macro
    def consume_ahead(outputs, smem, bars, regs, keys, place):
        T.cuda.mbarrier_wait_phase(bars.kv_full.sub[0, :], 0)
        ring.wait(bars.full, ring.slot(0), 0, None)  # keys.steps >= 1 (.config.BackwardConfig.query_blocks)
        scores(smem, regs, step_of(0, keys, place), place)
        begin(smem, regs, keys, step_of(0, keys, place), place)
        for g in T.serial(keys.steps):
            ahead(outputs, smem, bars, regs, keys, step_of(g, keys, place), step_of(g + 1, keys, place), place)
        drain(place.tid)

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

    return consume_ahead if cfg.scores_ahead else consume
