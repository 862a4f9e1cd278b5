"""The epilogue of a consumer: its ``dV`` and ``dK`` rows, converted to the input dtype
and stored under ``key < seq_len``."""

from __future__ import annotations

from tvm.script import tirx as T

from ...tile.fragments import accumulator_row
from ..pairs import make_pack_pairs
from .config import BackwardConfig

__all__ = ["make_epilogue"]


def make_epilogue(cfg: BackwardConfig):
    """The macro ``epilogue(dK, dV, regs, keys, k0, place)`` (a :class:`.state.Registers`,
    a :class:`.state.Keys`, a :class:`.state.Place`; ``k0`` the warpgroup's first key):
    each of ``dV`` and ``dK`` (float32 ``(64, head_dim)`` accumulators; ``dK`` already
    carries the softmax scale, folded into ``dS``) is rounded to 16-bit pairs
    (``cvt.rn.bf16x2.f32`` / ``.f16x2``, into ``regs.W``) and stored, one ``st.global.b32``
    per word under ``key < seq_len``, into ``(batch, seq_len, kv_heads, head_dim)`` at
    ``[b, key, hk, 8 j + 2 t]`` (the word of accumulator columns ``8 j + 2 t``, ``+ 1``;
    PTX ISA 9.7.15.5.1.1)."""
    head_dim, batch = cfg.head_dim, cfg.batch
    pack = make_pack_pairs(cfg.dtype, head_dim // 2)

    @T.macro
    def store(out, acc, regs, keys, k0, place):
        pack(regs.W.local(), acc.local())
        words = out.view("uint32")
        wl = regs.W.local()
        for j in T.unroll(head_dim // 8):
            for hh in T.unroll(2):
                row = accumulator_row(k0, place.tid, hh)
                col = j * 4 + place.tid % 4  # in words: columns 8 j + 2 t
                if row < place.seq_len:
                    # b < batch (blockIdx.z) and row < seq_len: the prover does not multiply two
                    # run-time extents, so the product's bound is stated (as the forward's epilogue)
                    T.assume(keys.b * place.seq_len + row < batch * place.seq_len)
                    T.cuda.tile.apply(T.ptx["st.global.b32"], words.sub[keys.b, row, keys.hk, col : col + 1],
                                      wl.view(head_dim // 8, 2, 1).sub[j, hh, :])

    @T.macro
    def epilogue(dK, dV, regs, keys, k0, place):
        store(dV, regs.dV, regs, keys, k0, place)
        store(dK, regs.dK, regs, keys, k0, place)

    return epilogue
