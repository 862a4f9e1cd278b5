"""The ping-pong schedule of the two consumers: turns handed over on named barriers."""

from __future__ import annotations

from tvm.script import tirx as T

from .config import AttentionConfig

__all__ = ["make_turns"]


def make_turns(cfg: AttentionConfig):
    """The macros ``take_turn(c)``, ``give_turn(c, j, n_kv)`` and ``first_turn(c)`` of the
    ping-pong schedule (``pingpong=True``; empty macros otherwise).

    The two consumers issue their ``Q K^T`` wgmmas in turns, so that one's softmax runs
    while the other's products occupy the tensor cores (FlashAttention-3's inter-warpgroup
    overlap).  Consumer ``c`` waits for its turn on named barrier ``1 + c`` (``bar.sync``,
    256 threads: its own 128 and the other consumer's ``bar.arrive``) and hands the turn
    over after issuing, with ``bar.arrive`` on the other's barrier.  Consumer 1 grants the
    first turn; it hands over after every block but its last, consumer 0 after every
    block, so each barrier completes exactly ``n_kv`` times (PTX ISA 9.7.13.1).
    """
    count = T.uint32(256)

    @T.macro
    def take_turn(c):
        if cfg.pingpong:
            T.cuda.tile.apply(T.ptx["bar.sync"], id=T.Cast("uint32", 1 + c), count=count)

    @T.macro
    def give_turn(c, j, n_kv):
        if cfg.pingpong:
            if T.Or(c == 0, j < n_kv - 1):
                T.cuda.tile.apply(T.ptx["bar.arrive"], id=T.Cast("uint32", 2 - c), count=count)

    @T.macro
    def first_turn(c):
        if cfg.pingpong:
            if c == 1:
                T.cuda.tile.apply(T.ptx["bar.arrive"], id=T.uint32(1), count=count)

    return take_turn, give_turn, first_turn
