"""The backward's preprocessing: ``Dsum = rowsum(dO * O)`` in float32, one pass over dO and O.

Each row of ``head_dim`` 16-bit elements (one query of one head) is read by ``head_dim /
8`` consecutive lanes, one 16-byte vector each (``ld.global.v4.b32``): a warp's load is
one contiguous 512-byte stretch covering ``256 / head_dim`` rows.  Each lane widens its 8
pairs exactly to f32 (:func:`~tvm_tirx.kernels.pairs.make_unpack_pairs`), sums their
products, and the row's lanes add their sums (``shfl.sync.bfly``,
:func:`~tvm_tirx.script.lane_reduce.reduce_lanes`); the row's first lane stores the f32
result into ``Dsum[b, h, s]`` (the ``(batch, heads, seq_len)`` layout the backward kernel
reads).  Memory traffic: one read of dO and O, 4 bytes written per row -- against
torch's ``(dO.float() * O.float()).sum(-1)``, which writes and reads float32 copies of
both.

Hardware facts: PTX ISA 9.7.9.8 / 9.7.9.10 (``ld`` / ``st``), 9.7.10.4 (``mov`` unpack),
9.7.10.24 (``cvt``), 9.7.10.6 (``shfl.sync``).
"""

from __future__ import annotations

from tvm.script import tirx as T

from ..extents import MAX_ELEMENTS, is_extent, is_int
from ..pairs import VECTOR, WIDEN_CONVERTS, make_unpack_pairs

__all__ = ["DSUM_HEAD_DIMS", "make_dsum"]

#: the head dims a row fits one warp at one vector a lane (``head_dim / 8`` lanes, 2 to 32)
DSUM_HEAD_DIMS = (64, 128, 256)
#: warps per CTA
WARPS = 4
ELEMENTS_MESSAGE = (f"make_dsum: batch x seq_len x heads x head_dim must be at most {MAX_ELEMENTS} elements "
                    "(int32 offsets)")


def _check(batch, seq_len, heads, head_dim, dtype) -> None:
    if not isinstance(dtype, str) or dtype not in WIDEN_CONVERTS:
        raise ValueError(f"dtype: expected one of {sorted(WIDEN_CONVERTS)}, found {dtype!r}")
    if type(head_dim) is not int or head_dim not in DSUM_HEAD_DIMS:  # noqa: E721  (not bool)
        raise ValueError(f"head_dim: expected one of {list(DSUM_HEAD_DIMS)}, found {head_dim!r}")
    if type(heads) is not int or heads < 1:  # noqa: E721
        raise ValueError(f"heads: expected a positive int, found {heads!r}")
    for name, value in (("batch", batch), ("seq_len", seq_len)):
        if not is_extent(value):
            raise ValueError(f"{name}: expected a positive int or an int32 run-time extent (T.dynamic), "
                             f"found {value!r}")
    elements = batch * seq_len * heads * head_dim if is_int(batch) and is_int(seq_len) else None
    if elements is not None and elements > MAX_ELEMENTS:
        raise ValueError(f"batch x seq_len x heads x head_dim = {elements}: {ELEMENTS_MESSAGE}")


def _make_row_dot(dtype: str):
    """The macro ``row_dot(acc, do_words, o_words)``: adds to ``acc[0, 0]`` the products of
    a lane's 8 elements of dO and O (``(4, 1)`` uint32 words each), in f32."""
    unpack = make_unpack_pairs(dtype, VECTOR)

    @T.macro
    def row_dot(acc, do_words, o_words):
        a = T.alloc_local((VECTOR,), "float32")
        b = T.alloc_local((VECTOR,), "float32")
        unpack(a, do_words)
        unpack(b, o_words)
        for e in T.unroll(VECTOR):
            acc[0, 0] = acc[0, 0] + a[e] * b[e]

    return row_dot


def make_dsum(batch, seq_len, heads: int, head_dim: int, dtype: str = "bfloat16", zero_dq: bool = False):
    """``Dsum = rowsum(dO * O)`` for the attention backward: a ``T.function`` to pass to
    :func:`tvm_tirx.compile` (any CUDA arch from sm_80).

    Parameters
    ----------
    batch, seq_len : int or tvm.tirx.Var
        Sizes of dO and O: positive ints, or int32 run-time extents (``T.dynamic``).
    heads : int
        Query heads.
    head_dim : int
        64, 128 or 256 elements.
    dtype : str
        ``"bfloat16"`` or ``"float16"``: dO and O; the products and sums are f32, the
        values widened exactly.
    zero_dq : bool
        Also zero the backward kernel's float32 ``dQacc`` in the same pass: each lane
        stores zeros over the 8 columns of its row it reads (two ``st.global.v4.b32``),
        instead of a memset of its own before the backward kernel (the torch operator's
        Dsum kernel: :func:`~tvm_tirx.ops.attention_backward_kernels.dsum_kernel`).

    Returns
    -------
    tvm.tirx.PrimFunc
        ``dsum(dO, O, Dsum)``, or ``dsum(dO, O, Dsum, dQacc)`` with ``zero_dq``: dO and O
        ``(batch, seq_len, heads, head_dim)``, contiguous and 16-byte aligned; Dsum
        ``(batch, heads, seq_len)`` float32, overwritten; dQacc ``(batch, seq_len, heads,
        head_dim)`` float32, contiguous and 16-byte aligned, zeroed.  With run-time sizes
        the host refuses more than 2**31 - 1 elements before the launch.

    Raises
    ------
    ValueError
        A dtype, head_dim, heads or size it does not take; ``zero_dq`` not a bool.
    """
    _check(batch, seq_len, heads, head_dim, dtype)
    if not isinstance(zero_dq, bool):
        raise ValueError(f"zero_dq: expected a bool, found {zero_dq!r}")
    body = _make_body(batch, seq_len, heads, head_dim, dtype)
    shape = (batch, seq_len, heads, head_dim)
    do_spec, o_spec = T.Tensor(shape, dtype, align=16), T.Tensor(shape, dtype, align=16)  # one object per parameter
    out_spec = T.Tensor((batch, heads, seq_len), "float32", align=16)
    if zero_dq:
        dq_spec = T.Tensor(shape, "float32", align=16)

        @T.function
        def dsum_zero_dq(dO: do_spec, O: o_spec, Dsum: out_spec, dQacc: dq_spec):
            body(dO, O, Dsum, dQacc)

        return dsum_zero_dq

    @T.function
    def dsum(dO: do_spec, O: o_spec, Dsum: out_spec):
        body(dO, O, Dsum, None)

    return dsum


def _make_body(batch, seq_len, heads: int, head_dim: int, dtype: str):
    """The macro ``body(dO, O, Dsum, dQacc)`` of :func:`make_dsum` (``dQacc`` None: not zeroed)."""
    lanes = head_dim // VECTOR  # per row
    per_cta = WARPS * (32 // lanes)  # rows
    launch = T.cuda.LaunchConfig(grid=(T.ceildiv(seq_len * heads, per_cta), batch), block=32 * WARPS)
    elements = T.Cast("int64", batch) * seq_len * heads * head_dim
    run_time = not (is_int(batch) and is_int(seq_len))
    row_dot = _make_row_dot(dtype)

    @T.macro
    def zero(dQacc, b, s, h, part):  # a lane's 8 float32 columns: two 16-byte stores
        zeros = T.alloc_local((4,), "uint32")
        for i in T.unroll(4):
            zeros[i] = T.uint32(0)
        for i in T.unroll(2):
            T.cuda.tile.apply(T.ptx["st.global.v4.b32"],
                              dQacc.view("uint32").view(batch, seq_len, heads, lanes, 2, 4).sub[b, s, h, part, i, :],
                              zeros)

    @T.macro
    def body(dO, O, Dsum, dQacc):
        if run_time:
            assert elements <= T.int64(MAX_ELEMENTS), ("ValueError", [ELEMENTS_MESSAGE])
        T.device_entry(launch=launch)
        b = T.cuda.block_idx("y")
        row = T.cuda.block_idx("x") * per_cta + T.cuda.thread_idx("x") // lanes  # of batch entry b: s * heads + h
        s, h, part = row // heads, row % heads, T.cuda.thread_idx("x") % lanes
        words_do = T.alloc_local((4, 1), "uint32")
        words_o = T.alloc_local((4, 1), "uint32")
        acc = T.alloc_local((1, 1), "float32")
        acc[0, 0] = T.float32(0)  # a lane past seq_len adds 0 to the butterfly
        if s < seq_len:
            T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], words_do.view(4),
                              dO.view("uint32").view(batch, seq_len, heads, lanes, 4).sub[b, s, h, part, :])
            T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], words_o.view(4),
                              O.view("uint32").view(batch, seq_len, heads, lanes, 4).sub[b, s, h, part, :])
            row_dot(acc, words_do, words_o)
            if dQacc is not None:
                zero(dQacc, b, s, h, part)
        T.cuda.tile.reduce_lanes(T.ptx["add.f32"], acc, lanes=lanes)
        if s < seq_len and part == 0:
            T.cuda.tile.apply(T.ptx["st.global.b32"], Dsum.sub[b, h, s:s + 1], acc.view(1))

    return body
