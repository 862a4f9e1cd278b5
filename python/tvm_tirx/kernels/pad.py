"""Zero columns appended to each row of a matrix, in one pass: ``Out (m, words + pad) =
[In (m, words) | 0]``, both seen as 32-bit words (any dtype whose rows are a multiple of
16 bytes).

The GEMM operators pad K this way where the tile kernel reads rows of a multiple of 64
bytes at full rate and the operands' rows are not (:func:`~.gemm.planner.k_padding`).
``torch.nn.functional.pad`` does it in two passes: a fill of the whole output, then a copy
that takes one element per thread because the rows of the two tensors are not aligned
alike (on an H100, 2026-12-06, ``ncu``: 17 + 67 us for one 5000 x 5000 bf16 operand, 168
us for both, against 441 us for the GEMM that needs them).  Here each thread writes one
16-byte vector of an output row: the input's vector at the same column
(``ld.global.v4.b32``), or zeros past the input's row; one read of ``In`` and one write
of ``Out``.

Hardware facts: PTX ISA 9.7.9.8 / 9.7.9.10 (``ld`` / ``st`` vectors of four ``.b32``).
"""

from __future__ import annotations

from tvm.script import tirx as T

from .extents import MAX_ELEMENTS, is_int

__all__ = ["VECTOR", "THREADS", "make_pad_rows"]

VECTOR = 4  # words per thread: one 16-byte vector
THREADS = 256  # threads per CTA: one CTA covers 256 vectors (4 KiB) of one output row
MAX_GRID_Y = 65535  # CTAs along a grid's y (CUDA's limit): the CTAs of one row
ELEMENTS_MESSAGE = f"pad_rows: m x (words + pad) must be at most {MAX_ELEMENTS} words (int32 offsets)"


def make_pad_rows(words: int, pad: int):
    """The kernel ``pad_rows(In, Out)`` appending ``pad`` zero words to each of ``In``'s rows.

    Parameters
    ----------
    words : int
        Words (32-bit) per row of ``In``: a positive multiple of :data:`VECTOR` (rows of a
        multiple of 16 bytes).
    pad : int
        Zero words appended per row: a positive multiple of :data:`VECTOR`.

    Returns
    -------
    tvm.tirx.PrimFunc
        ``pad_rows(In (m, words) uint32, Out (m, words + pad) uint32)``, ``m`` a run-time
        extent, both contiguous and 16-byte aligned (a torch tensor of another dtype
        passes as ``.view(torch.int32)``): grid ``(m, ceil((words + pad) / 4 / 256))``
        of 256 threads.  The host refuses ``m * (words + pad)`` above
        :data:`~.extents.MAX_ELEMENTS` before the launch.

    Raises
    ------
    ValueError
        ``words`` or ``pad`` not a positive int multiple of :data:`VECTOR`; rows of more
        than ``65535 * 1024`` words (the grid's y).
    """
    for name, value in (("words", words), ("pad", pad)):
        if not is_int(value) or value <= 0 or value % VECTOR:
            raise ValueError(f"make_pad_rows: {name} must be a positive multiple of {VECTOR} (whole 16-byte "
                             f"vectors), found {value!r}")
    words, pad = int(words), int(pad)
    if -(-(words + pad) // (VECTOR * THREADS)) > MAX_GRID_Y:
        raise ValueError(f"make_pad_rows: words + pad must be at most {MAX_GRID_Y * VECTOR * THREADS} (one CTA per "
                         f"{VECTOR * THREADS} words of a row, at most {MAX_GRID_Y} per row: gridDim.y), found "
                         f"{words + pad}")
    m = T.dynamic("m")
    width = words + pad
    vectors_in, vectors_out = words // VECTOR, width // VECTOR
    launch = T.cuda.LaunchConfig(grid=(m, -(-vectors_out // THREADS)), block=THREADS)
    elements = T.Cast("int64", m) * width

    @T.function
    def pad_rows(In: T.Tensor((m, words), "uint32", align=16), Out: T.Tensor((m, width), "uint32", align=16)):
        assert elements <= T.int64(MAX_ELEMENTS), ("ValueError", [ELEMENTS_MESSAGE])
        T.device_entry(launch=launch)
        row = T.cuda.block_idx("x")
        v = T.cuda.block_idx("y") * THREADS + T.cuda.thread_idx("x")
        r = T.alloc_local((VECTOR,), "uint32")
        if v < vectors_out:
            if v < vectors_in:
                T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, In.view(m, vectors_in, VECTOR).sub[row, v, :])
            else:
                for j in T.unroll(VECTOR):
                    r[j] = T.uint32(0)
            T.cuda.tile.apply(T.ptx["st.global.v4.b32"], Out.view(m, vectors_out, VECTOR).sub[row, v, :], r)

    return pad_rows
