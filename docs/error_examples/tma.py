"""The ``tma`` family (``cp.async.bulk.tensor``, ``cp.reduce.async.bulk.tensor``): box, image and tensor map.

Each ``Case`` is a kernel file that breaks one rule: ``docs/gen_errors.py`` runs it
and puts the message it raises on the error page (see :mod:`error_examples`).
"""

from __future__ import annotations

from . import COLLECTIVE, PRED, PROTOCOL, Case, example


_TMA_LOAD = "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"


def _tma(call: str, tile="(8, 32)", dtype="float32", gshape="(8, 32)", gdtype=None, galign=16, layout="") -> str:
    """An example kernel around one TMA tile call (``s`` shared, ``A`` global, ``bar`` mbarrier)."""
    lay = f", layout={layout}" if layout else ""
    return example(f'''
        @T.function
        def kernel(A: T.Tensor({gshape}, "{gdtype or dtype}", align={galign})):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32, dynamic_smem_bytes=16384))
            s = T.alloc_shared({tile}, "{dtype}", scope="shared.dyn", align=1024{lay})
            bar = T.alloc_shared((1,), "uint64", scope="shared.dyn", align=8)
            if T.cuda.thread_idx("x") == 0:
                {call}
    ''')


def _tma_load(extra="", a="A") -> str:
    return f'T.cuda.tile.apply(T.ptx["{_TMA_LOAD}"], s, {a}, mbar=bar, coords=(0, 0){extra})'


CASES = [
    Case(
        COLLECTIVE,
        r"box differs from the shared image",
        "TMA box= that is not the shared tile's shape",
        _tma(_tma_load(", box=(8, 16)")),
        "parse",
        "The box a TMA copies is the shared operand's last N extents (N from ``.Nd``); "
        "``box=`` may restate it but not change it.",
        "Drop ``box=``, or give the shared view the box's shape (``s.sub[...]``).",
    ),
    Case(
        COLLECTIVE,
        r"coordinate count",
        "TMA coords= of the wrong length",
        _tma(_tma_load().replace("coords=(0, 0)", "coords=(0, 0, 0)")),
        "parse",
        "``coords`` gives the box's first element: one int32 per tensor axis, "
        "outermost first, as many as the opcode's ``.Nd``.",
        "Pass one coordinate per axis of the global tensor.",
    ),
    Case(
        COLLECTIVE,
        r"coord_steps do not match the repeat axes",
        "TMA repeat axes without coord_steps",
        _tma(_tma_load(), tile="(2, 8, 32)"),
        "parse",
        "Leading axes of the shared operand beyond the box are repeat axes: each "
        "coordinate issues one copy, whose coordinates are ``coords`` plus the repeat "
        "coordinate times that axis' ``coord_steps`` entry.",
        "Pass ``coord_steps=`` with one tuple of N steps per repeat axis, e.g. "
        "``coord_steps=((8, 0),)`` for boxes stacked along the rows.",
    ),
    Case(
        COLLECTIVE,
        r"box extent out of range",
        "TMA box over 256 elements along an axis",
        _tma(_tma_load(), tile="(300, 4)", gshape="(300, 4)"),
        "parse",
        "A tensor map's box extents are 1..256 (``cuTensorMapEncodeTiled``).",
        "Split the box: make the long axis a repeat axis with ``coord_steps``.",
    ),
    Case(
        COLLECTIVE,
        r"inner box row not a multiple of 16 bytes",
        "TMA box row of 12 bytes",
        _tma(_tma_load(), tile="(8, 3)", gshape="(8, 4)"),
        "parse",
        "The box's innermost extent times the element size must be a multiple of 16 "
        "bytes (``cuTensorMapEncodeTiled``).",
        "Widen the box's last axis to a multiple of 16 bytes.",
    ),
    Case(
        COLLECTIVE,
        r"inner box row wider than the swizzle span",
        "TMA box row wider than its swizzle",
        _tma(_tma_load(", swizzle=1")),
        "parse",
        "With a swizzle, the box's inner row may not exceed the swizzle span: 32, 64 or "
        "128 bytes for ``swizzle=1, 2, 3``.",
        "Use a wider swizzle, or split the row into boxes with a repeat axis.",
    ),
    Case(
        COLLECTIVE,
        r"shared layout and swizzle= disagree",
        "TMA swizzle= other than the tile's",
        _tma(_tma_load(", swizzle=1"), layout="ComposeLayout(2, 3, 3, TileLayout(S[(8, 32)]))"),
        "parse",
        "The shared tile is laid out as the image of one swizzle mode (here the 128-byte "
        "one, ``swizzled_layout((8, 32), \"float32\", 3)``, which is this ``ComposeLayout``) "
        "and the call asks the TMA for another; the "
        "TMA would write the chunks where the layout does not look for them.",
        "Pass the tile's mode, ``swizzle=3``, or allocate the tile with "
        "``swizzled_layout(shape, dtype, swizzle)`` for the mode you pass.",
    ),
    Case(
        COLLECTIVE,
        r"shared layout is not the TMA image",
        "TMA swizzle on a row-major tile",
        _tma(_tma_load(", swizzle=3")),
        "parse",
        "The TMA writes the box in a fixed order: row-major, or with ``swizzle=`` the "
        "16-byte chunks of each 128-byte row permuted; the shared operand's layout must "
        "say the same, so that every later access reads what the TMA wrote.",
        "Allocate the tile with ``layout=swizzled_layout(shape, dtype, swizzle)`` "
        "(``tvm_tirx.tile.families.tma``), the layout the message shows.",
    ),
    Case(
        COLLECTIVE,
        r"element types differ",
        "TMA between tensors of different element types",
        _tma(_tma_load(), gdtype="int32"),
        "parse",
        "A TMA copies elements without converting them: the tensor map's type is the "
        "global tensor's, and the shared image must hold the same type.",
        "Use the same dtype on both sides (``.view(dtype)`` reinterprets bits).",
    ),
    Case(
        COLLECTIVE,
        r"element type not reducible with this operation",
        "TMA reduction of a type the operation does not take",
        _tma('T.cuda.tile.apply(T.ptx["cp.reduce.async.bulk.tensor.2d.global.shared::cta.inc.bulk_group"], A, s, coords=(0, 0))'),
        "parse",
        "Each reduction takes the element types PTX ISA 9.7.9.25.5.2 lists: ``.inc`` "
        "and ``.dec`` only ``u32``; ``.add`` ``u32 s32 u64 f32 f16 bf16`` ...",
        "Reduce a type the operation takes, or use another operation.",
    ),
    Case(
        COLLECTIVE,
        r"global tensor not strided with a contiguous inner axis",
        "TMA from a transposed view",
        _tma(_tma_load(a="A.permute(1, 0)"), tile="(8, 8)", gshape="(8, 8)"),
        "parse",
        "A tensor map walks the tensor's innermost axis contiguously; the other axes "
        "have byte strides.",
        "Map the tensor as it is stored and transpose in shared memory (or with the box).",
    ),
    Case(
        COLLECTIVE,
        r"global stride not a multiple of 16 bytes",
        "TMA over rows of 24 bytes",
        _tma(_tma_load(), tile="(8, 4)", gshape="(8, 6)"),
        "parse",
        "Every byte stride of a tensor map (all axes but the innermost) is a multiple of "
        "16 (``cuTensorMapEncodeTiled``).",
        "Pad the rows to a multiple of 16 bytes.",
    ),
    Case(
        COLLECTIVE,
        r"global extent out of range",
        "TMA over an axis of more than 2**32 elements",
        _tma('T.cuda.tile.apply(T.ptx["cp.async.bulk.tensor.1d.shared::cluster.global.mbarrier::complete_tx::bytes"], s, A, mbar=bar, coords=(0,))',
             tile="(16,)", dtype="uint8", gshape=f"({2**32 + 16},)"),
        "parse",
        "A tensor map's extents are at most 2**32 elements per axis.",
        "View the tensor with more axes (``A.view(rows, cols)``).",
    ),
    Case(
        COLLECTIVE,
        r"tensor map base not 16-byte aligned",
        "TMA from a view that starts off 16 bytes",
        _tma(_tma_load(a="A.sub[:, 1:33]"), gshape="(8, 64)"),
        "parse",
        "A tensor map's base address is 16-byte aligned: the tensor is declared with "
        "``align>=16`` and a view starts at a multiple of 16 bytes.",
        "Start the view at a multiple of 16 bytes, or keep the whole tensor and move "
        "the box with ``coords``.",
    ),
    Case(
        COLLECTIVE,
        r"tensor map of a tensor that is not a kernel parameter",
        "TMA from a global allocation",
        _tma('G = T.alloc_buffer((8, 32), "float32", scope="global", align=16)\n                '
             + _tma_load(a="G")),
        "lower",
        "The tensor map is encoded on the host from a kernel parameter's pointer; a "
        "tensor the kernel allocates has none there.",
        "Pass the tensor as a kernel parameter, or encode a map yourself and pass "
        "``T.address_of(map)``.",
    ),
    Case(
        PRED,
        r"invalid parameter 'swizzle'",
        "TMA swizzle= out of range",
        _tma(_tma_load(", swizzle=4")),
        "parse",
        "A family parameter has its own check; ``swizzle`` is 0 (none), 1 (32B), "
        "2 (64B) or 3 (128B).",
        "Pass one of the values the message lists.",
    ),
]

# -- protocols --------------------------------------------------------------------------------------

CASES += [
    Case(
        PROTOCOL,
        r"CTA may exit while a peer CTA still writes or signals it",
        "CTA may exit while its peer still multicasts into it",
        example(f'''
            @T.function
            def kernel(A: T.Tensor((8, 32), "float32", align=16), B: T.Tensor((2, 8, 32), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=256, cluster=2, dynamic_smem_bytes=2048))
                tile = T.alloc_shared((8, 32), "float32", scope="shared.dyn", align=128)
                bar = T.alloc_shared((1,), "uint64", scope="shared.dyn", align=8)
                tid = T.cuda.thread_idx("x")
                rank = T.cuda.cluster_ctaid("x")
                if tid == 0:
                    T.cuda.tile.apply(T.ptx["mbarrier.init.shared::cta.b64"], bar, count=T.uint32(1))
                    T.ptx["fence.mbarrier_init.release.cluster"]()
                T.cuda.cluster_sync()
                if tid == 0:
                    T.cuda.tile.apply(T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"], bar, tx=T.uint32(1024))
                    if rank == 0:
                        T.cuda.tile.apply(T.ptx["{_TMA_LOAD}.multicast::cluster"], tile, A, mbar=bar,
                                          coords=(0, 0), cta_mask=T.uint16(3))
                T.cuda.mbarrier_wait_phase(bar, 0)
                B[rank, tid // 32, tid % 32] = tile[tid // 32, tid % 32]
        '''),
        "lower",
        "CTA 0 multicasts into both CTAs' shared memory and signals both barriers. Nothing keeps a "
        "CTA from finishing (and its shared memory from being handed to another CTA) while the "
        "other may still write into it or arrive on its barrier.",
        "End the kernel with ``T.cuda.cluster_sync()``: every CTA of the cluster waits for the others.",
    ),
    Case(
        PROTOCOL,
        r"CTA may exit while a peer CTA still writes or signals it.*or in a 2-CTA cluster a remote arrive",
        "Exit handshake that only one CTA of the cluster waits for",
        example(f'''
            @T.function
            def kernel(A: T.Tensor((8, 32), "float32", align=16), B: T.Tensor((2, 8, 32), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=256, cluster=2, dynamic_smem_bytes=2048))
                tile = T.alloc_shared((8, 32), "float32", scope="shared.dyn", align=128)
                bar = T.alloc_shared((1,), "uint64", scope="shared.dyn", align=8)
                done = T.alloc_shared((1,), "uint64", scope="shared.dyn", align=8)
                tid = T.cuda.thread_idx("x")
                rank = T.cuda.cluster_ctaid("x")
                if tid == 0:
                    T.cuda.tile.apply(T.ptx["mbarrier.init.shared::cta.b64"], bar, count=T.uint32(1))
                    T.cuda.tile.apply(T.ptx["mbarrier.init.shared::cta.b64"], done, count=T.uint32(1))
                    T.ptx["fence.mbarrier_init.release.cluster"]()
                T.cuda.cluster_sync()
                if tid == 0:
                    T.cuda.tile.apply(T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"], bar, tx=T.uint32(1024))
                    if rank == 0:
                        T.cuda.tile.apply(T.ptx["{_TMA_LOAD}.multicast::cluster"], tile, A, mbar=bar,
                                          coords=(0, 0), cta_mask=T.uint16(3))
                T.cuda.mbarrier_wait_phase(bar, 0)
                B[rank, tid // 32, tid % 32] = tile[tid // 32, tid % 32]
                if tid == 0:
                    T.cuda.tile.apply(T.ptx["mbarrier.arrive.release.cluster.shared::cluster.b64"], done,
                                      remote_cta_id=T.uint32(1) - rank)
                if rank == 0:
                    T.cuda.mbarrier_wait_phase(done, 0)
        '''),
        "lower",
        "Each CTA tells its peer it is done with a remote arrive, but only CTA 0 waits for its "
        "peer's: CTA 1 may leave while CTA 0 still multicasts into it.  The handshake stands for "
        "a cluster barrier only when every CTA makes both the arrive and the wait.",
        "Wait on ``done`` in every CTA (no ``rank`` in the guard), or end with ``T.cuda.cluster_sync()``.",
    ),
]
