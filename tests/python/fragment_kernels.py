"""Scheduled ``s_tir`` kernels that move one register fragment with the warp-level
intrinsics of :mod:`tvm_tirx.schedule.tensor_intrin` (shared by the CPU and GPU tests).

``round_trip(count, trans, short)``: ``B = A`` over :data:`CTAS` memory tiles of
one fragment each, one tile per CTA (``blockIdx.x``): global -> shared
(cooperative vector copy, 32 threads) -> fragment (``ldmatrix_x<count>[_trans]``)
-> shared (``stmatrix_x<count>[_trans]``) -> global.  The fragment is
``(rows, cols)`` of :data:`SHAPES`; the memory tile is ``(rows, cols)``, or
``(cols, rows)`` when ``trans``.
"""

import tvm

from tvm_tirx.schedule.tensor_intrin._fragments import fragment_index

#: ``x<count>`` -> fragment (rows, cols)
SHAPES = {1: (8, 8), 2: (8, 16), 4: (16, 16)}
DTYPES = {"f16": "float16", "bf16": "bfloat16"}
#: tiles (CTAs) of a round trip
CTAS = 2


def memory_shape(count, trans):
    """``(CTAS, r, c)``: the round trip's tensors, one memory tile per CTA."""
    rows, cols = SHAPES[count]
    return (CTAS, cols, rows) if trans else (CTAS, rows, cols)


def _copy(shape, dtype):
    from tvm.script import tirx as T

    @T.prim_func(s_tir=True)
    def copy(A: T.Buffer(shape, dtype), B: T.Buffer(shape, dtype)):
        for t, i, j in T.grid(*shape):
            with T.sblock("B"):
                vt, vi, vj = T.axis.remap("SSS", [t, i, j])
                B[vt, vi, vj] = A[vt, vi, vj]

    return copy


def _cooperative(sch, block, elements, threads):
    """Spread ``block``'s tile loops over ``threads`` ``threadIdx.x`` lanes, ``elements / threads`` a vector."""
    _, tx, vec = sch.split(sch.fuse(*sch.get_loops(block)[-2:]), [None, threads, elements // threads])
    sch.bind(tx, "threadIdx.x")
    sch.vectorize(vec)


def round_trip(count, trans, short, threads=32, pad=None):
    """The schedule of the round trip (module docstring): ``threads`` lanes
    copy the tiles; ``pad`` (elements) pads the shared stage's rows with
    ``storage_align`` (``None``: unpadded)."""
    shape = memory_shape(count, trans)
    rows, cols = SHAPES[count]
    index = fragment_index(rows, cols)
    sch = tvm.s_tir.Schedule(_copy(shape, DTYPES[short]))
    block = sch.get_sblock("B")
    cta = sch.get_loops(block)[0]
    sch.bind(cta, "blockIdx.x")
    staged = sch.cache_read(block, 0, "shared")
    frag = sch.cache_read(block, 0, "warp")
    out = sch.cache_write(block, 0, "shared")
    for stage in (frag, staged):
        sch.compute_at(stage, cta)
    sch.reverse_compute_at(out, cta)
    _cooperative(sch, staged, rows * cols, threads)
    _cooperative(sch, out, rows * cols, threads)
    if pad is not None:
        # rows of shape[-1] + pad elements: the smallest stride >= shape[-1] that is offset mod factor
        sch.storage_align(staged, 0, axis=-2, factor=64, offset=(shape[-1] + pad) % 64)
    place = (lambda t, a, b: (t, *index(b, a))) if trans else (lambda t, a, b: (t, *index(a, b)))
    sch.transform_layout(frag, ("write", 0), place)
    suffix = f"x{count}{'_trans' if trans else ''}_{short}"
    sch.tensorize(sch.get_loops(frag)[1], f"tvm_tirx.ldmatrix_{suffix}")
    sch.tensorize(sch.get_loops(block)[1], f"tvm_tirx.stmatrix_{suffix}")
    return sch


def accumulator_fill(cols):
    """``C = 0`` over :data:`CTAS` 16 x ``cols`` f32 tiles, one per CTA: the
    fragment is zeroed by ``mma_fill_16x<cols>_f32``, stored to a shared stage
    by ``mma_store_16x<cols>_f32_shared`` and copied out by 32 threads."""
    from tvm.script import tirx as T

    shape = (CTAS, 16, cols)

    @T.prim_func(s_tir=True)
    def zeros(C: T.Buffer(shape, "float32")):
        for t, i, j in T.grid(*shape):
            with T.sblock("C"):
                vt, vi, vj = T.axis.remap("SSS", [t, i, j])
                C[vt, vi, vj] = T.float32(0)

    index = fragment_index(16, cols)
    sch = tvm.s_tir.Schedule(zeros)
    block = sch.get_sblock("C")
    cta = sch.get_loops(block)[0]
    sch.bind(cta, "blockIdx.x")
    staged = sch.cache_write(block, 0, "shared")
    frag = sch.cache_write(block, 0, "warp")
    sch.reverse_compute_at(frag, cta)
    sch.reverse_compute_at(staged, cta)
    _cooperative(sch, staged, 16 * cols, 32)
    sch.transform_layout(block, ("write", 0), lambda t, a, b: (t, *index(a, b)))
    sch.tensorize(sch.get_loops(block)[1], f"tvm_tirx.mma_fill_16x{cols}_f32")
    sch.tensorize(sch.get_loops(frag)[1], f"tvm_tirx.mma_store_16x{cols}_f32_shared")
    return sch
