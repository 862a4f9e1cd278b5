"""Rotary position embedding in the rotate-half form, fused into one pass over X.

``Y = X * cos + rotate_half(X) * sin`` with ``rotate_half(x) = concat(-x[..., h:],
x[..., :h])`` and ``h = head_dim / 2`` (the form of Llama and most Hugging Face models):
for ``d < h``, ``Y[d] = X[d] cos[d] - X[d + h] sin[d]`` and ``Y[d + h] = X[d + h] cos[d + h]
+ X[d] sin[d + h]``.  X is ``(batch, seq, heads, head_dim)``, the tables ``(seq,
head_dim)`` indexed by position.  Each thread owns one 16-byte vector of a row's lower
half and the matching vector of its upper half: it loads both (``ld.global.v4.b32``), the
four table vectors they need, computes the eight pairs in f32 (exact widening, one
rounding per output) and stores two vectors.  One read and one write of X; the tables
stay in L1/L2.

Hardware facts: PTX ISA 9.7.9.8 / 9.7.9.10 (``ld`` / ``st`` vectors), 9.7.10.4 (``mov``
unpack), 9.7.10.24 (``cvt``).
"""

from __future__ import annotations

from tvm.script import tirx as T

from .extents import MAX_ELEMENTS, is_extent, is_int
from .pairs import VECTOR, WIDEN_CONVERTS, make_pack_pairs, make_unpack_pairs

__all__ = ["HEAD_DIMS", "BLOCK", "make_rotary", "check_rotary"]

#: head_dims supported: halves of whole 16-byte vectors
HEAD_DIMS = (64, 128, 256)
BLOCK = 128  # threads per CTA
ELEMENTS_MESSAGE = f"make_rotary: batch x seq_len x heads x head_dim must be at most {MAX_ELEMENTS} (int32 offsets)"


def check_rotary(batch, seq_len, heads, head_dim, dtype: str) -> None:
    """Raise ``ValueError`` naming the argument :func:`make_rotary` refuses, if any."""
    if not isinstance(dtype, str) or dtype not in WIDEN_CONVERTS:
        raise ValueError(f"dtype: expected one of {sorted(WIDEN_CONVERTS)}, found {dtype!r}")
    if not is_int(head_dim) or head_dim not in HEAD_DIMS:
        raise ValueError(f"head_dim: expected one of {list(HEAD_DIMS)} (an int), found {head_dim!r}")
    if not is_int(heads) or heads <= 0:
        raise ValueError(f"heads: expected a positive int, found {heads!r}")
    for name, value in (("batch", batch), ("seq_len", seq_len)):
        if not is_extent(value):
            raise ValueError(f"{name}: expected a positive int or an int32 run-time extent (T.dynamic), "
                             f"found {value!r}")
    if is_int(batch) and is_int(seq_len) and batch * seq_len * heads * head_dim > MAX_ELEMENTS:
        raise ValueError(f"batch x seq_len x heads x head_dim = {batch * seq_len * heads * head_dim}: "
                         f"{ELEMENTS_MESSAGE}")


def _make_rotate(dtype: str):
    """The macro ``rotate(lo, hi, c_lo, c_hi, s_lo, s_hi)``: the words of one vector pair
    (``(4, 1)`` each) rotated in place, from the table words of their columns."""
    unpack, pack = make_unpack_pairs(dtype, VECTOR), make_pack_pairs(dtype, VECTOR)

    @T.macro
    def rotate(lo, hi, c_lo, c_hi, s_lo, s_hi):
        f = T.alloc_local((6, VECTOR), "float32")  # x_lo, x_hi, cos_lo, cos_hi, sin_lo, sin_hi
        unpack(f.sub[0, :], lo)
        unpack(f.sub[1, :], hi)
        unpack(f.sub[2, :], c_lo)
        unpack(f.sub[3, :], c_hi)
        unpack(f.sub[4, :], s_lo)
        unpack(f.sub[5, :], s_hi)
        for e in T.unroll(VECTOR):
            y_lo = f[0, e] * f[2, e] - f[1, e] * f[4, e]
            f[1, e] = f[1, e] * f[3, e] + f[0, e] * f[5, e]
            f[0, e] = y_lo
        pack(lo.view(4), f.sub[0, :])
        pack(hi.view(4), f.sub[1, :])

    return rotate


def _words(tensor, per_row):
    """``tensor`` ``(..., head_dim)`` as b32 words ``(..., 2, per_row, 4)``: (half, vector, word)."""
    return tensor.view("uint32").view(*tensor.shape[:-1], 2, per_row, 4)


def make_rotary(batch, seq_len, heads: int, head_dim: int, dtype: str = "bfloat16"):
    """Rotary embedding of X by position tables: a ``T.function`` ``rotary(X, Cos, Sin, Y)``
    to pass to :func:`tvm_tirx.compile` (any CUDA arch from sm_80).

    Parameters
    ----------
    batch, seq_len : int or tvm.tirx.Var
        Positive ints or int32 run-time extents (``T.dynamic``): one compiled kernel then
        serves every size.  Position ``p`` of the sequence reads row ``p`` of the tables.
    heads : int
        Heads of X (static).
    head_dim : int
        64, 128 or 256 elements.
    dtype : str
        ``"bfloat16"`` or ``"float16"``: X, the tables and Y; the arithmetic is f32.

    Returns
    -------
    tvm.tirx.PrimFunc
        ``rotary(X (batch, seq_len, heads, head_dim), Cos (seq_len, head_dim), Sin
        (seq_len, head_dim), Y (like X))`` computing ``X * Cos + rotate_half(X) * Sin``
        (the tables broadcast over batch and heads), every tensor contiguous and 16-byte
        aligned.  With run-time sizes the host refuses more than 2**31 - 1 elements of X
        before the launch.

    Raises
    ------
    ValueError
        A dtype, head_dim or size it refuses (:func:`check_rotary`).
    """
    check_rotary(batch, seq_len, heads, head_dim, dtype)
    batch, seq_len = (int(v) if is_int(v) else v for v in (batch, seq_len))
    heads, head_dim = int(heads), int(head_dim)
    per_row = head_dim // 2 // VECTOR  # threads per (token, head) row: vectors in a half
    rows = batch * seq_len * heads
    rotate = _make_rotate(dtype)
    launch = T.cuda.LaunchConfig(grid=T.ceildiv(rows * per_row, BLOCK), block=BLOCK)
    elements = T.Cast("int64", batch) * seq_len * heads * head_dim
    run_time = not (is_int(batch) and is_int(seq_len))
    x_spec, y_spec = (T.Tensor((batch, seq_len, heads, head_dim), dtype, align=16) for _ in range(2))
    cos_spec, sin_spec = (T.Tensor((seq_len, head_dim), dtype, align=16) for _ in range(2))

    @T.function
    def rotary(X: x_spec, Cos: cos_spec, Sin: sin_spec, Y: y_spec):
        if run_time:
            assert elements <= T.int64(MAX_ELEMENTS), ("ValueError", [ELEMENTS_MESSAGE])
        T.device_entry(launch=launch)
        t = T.cuda.block_idx("x") * BLOCK + T.cuda.thread_idx("x")
        row = t // per_row  # (token, head) rows, heads fastest
        v = t % per_row
        h = row % heads
        pos = row // heads % seq_len
        b = row // heads // seq_len
        x = T.alloc_local((2, 4, 1), "uint32")
        tab = T.alloc_local((2, 2, 4, 1), "uint32")  # (cos, sin) x (lower, upper half)
        if b < batch:
            # pos < seq_len (a remainder) and b < batch: the prover does not multiply two run-time
            # extents, so the product's bound is stated (checked with check_assumptions)
            T.assume(b * seq_len + pos < batch * seq_len)
            T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], x.view(2, 4), _words(X, per_row).sub[b, pos, h, :, v, :])
            T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], tab.sub[0].view(2, 4), _words(Cos, per_row).sub[pos, :, v, :])
            T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], tab.sub[1].view(2, 4), _words(Sin, per_row).sub[pos, :, v, :])
            rotate(x.sub[0], x.sub[1], tab.sub[0, 0], tab.sub[0, 1], tab.sub[1, 0], tab.sub[1, 1])
            T.cuda.tile.apply(T.ptx["st.global.v4.b32"], _words(Y, per_row).sub[b, pos, h, :, v, :], x.view(2, 4))

    return rotary
