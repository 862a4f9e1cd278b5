"""The ping-pong schedule of the two consumers: turns handed over on named barriers."""

from __future__ import annotations

from tvm.script import tirx as T

from .config import AttentionConfig

__all__ = ["make_turns"]


def make_turns(cfg: AttentionConfig):
    """The macros ``take_turn(c)``, ``give_turn(c, j, n_kv, last)`` and ``first_turn(c, i)``
    of the ping-pong schedule (``pingpong=True``; empty macros otherwise).

    The two consumers issue their ``Q K^T`` wgmmas in turns, so that one's softmax runs
    while the other's products occupy the tensor cores (FlashAttention-3's inter-warpgroup
    overlap).  Consumer ``c`` waits for its turn on named barrier ``1 + c`` (``bar.sync``,
    256 threads: its own 128 and the other consumer's ``bar.arrive``) and hands the turn
    over after issuing, with ``bar.arrive`` on the other's barrier.  Consumer 1 grants the
    first turn of the CTA (``i``: its tile count, 0 at the first tile); consumer 0 hands
    over after every block, consumer 1 after every block but the last of the CTA's last
    tile (``last``; one tile per CTA unless ``cfg.persistent``, whose turns run on from
    one tile to the next), so each barrier completes exactly once per block (PTX ISA
    9.7.13.1).
    """
    count = T.uint32(256)

    @T.macro
    def take_turn(c):
        if cfg.pingpong:
            T.cuda.tile.apply(T.ptx["bar.sync"], id=T.Cast("uint32", 1 + c), count=count)

    @T.macro
    def give_turn(c, j, n_kv, last):
        if cfg.pingpong:
            if T.Or(c == 0, T.Or(j < n_kv - 1, T.Not(last))):
                T.cuda.tile.apply(T.ptx["bar.arrive"], id=T.Cast("uint32", 2 - c), count=count)

    @T.macro
    def first_turn(c, i):
        if cfg.pingpong:
            if T.And(c == 1, i == 0):
                T.cuda.tile.apply(T.ptx["bar.arrive"], id=T.uint32(1), count=count)

    return take_turn, give_turn, first_turn
