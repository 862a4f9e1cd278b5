"""Dtype views and aliases: the exact byte address of ``X.view(dtype)`` and the bounds
rule in bytes of the root allocation (issue 17, items 1 and 2).

apache-tvm's ``.view(dtype)`` to a wider dtype divides the element offset by the
ratio of the widths, rounding down: a view that starts between two wide elements
would address the one before.  Such a view is rejected; one that starts on a wide
element is exact.  Bounds are proven in bytes, so a narrowing view reads as many
bytes as the tensor has and an alias of wider elements cannot read past it.
"""

import pytest

from tvm_tirx import TileError, testing
from tvm_tirx.script import tirx as T


def _load_through_view(src_dtype, cols, start, view_dtype, n, opcode, space):
    """A kernel that loads ``n`` ``view_dtype`` elements from row ``tid`` of a
    ``(64, cols)`` ``src_dtype`` tensor, starting at element ``start`` of the row."""
    ratio = _bits(view_dtype) // _bits(src_dtype)
    width = n * ratio

    if space == "global":

        @T.function
        def k(A: T.Tensor((64, cols), src_dtype, align=16)):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
            tid = T.cuda.thread_idx("x")
            r = T.alloc_local((n,), view_dtype)
            T.cuda.tile.apply(T.ptx[opcode], r, A.sub[tid, start : start + width].view(view_dtype))

    else:

        @T.function
        def k():
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
            tid = T.cuda.thread_idx("x")
            A = T.alloc_shared((64, cols), src_dtype, align=16)
            r = T.alloc_local((n,), view_dtype)
            T.cuda.tile.apply(T.ptx[opcode], r, A.sub[tid, start : start + width].view(view_dtype))

    return k


def _bits(dtype):
    import tvm  # pylint: disable=import-outside-toplevel

    return tvm.DataType(dtype).bits


# (tensor dtype, row length, first element, view dtype, opcode)
MISALIGNED = [
    ("uint8", 8, 2, "uint32", "b32"),  # bytes 2..5 as one uint32: used to load bytes 0..3
    ("float16", 8, 1, "uint32", "b32"),  # an odd half: used to load halves 0..1
    ("float32", 8, 1, "uint64", "b64"),  # an odd float: used to load floats 0..1
]


@pytest.mark.parametrize("space", ["global", "shared"])
@pytest.mark.parametrize("src, cols, start, view, bits", MISALIGNED, ids=lambda x: str(x))
def test_a_wider_view_between_two_wide_elements_is_rejected(src, cols, start, view, bits, space):
    kernel = _load_through_view(src, cols, start, view, 1, f"ld.{space}.{bits}", space)
    with pytest.raises(TileError, match=rf"dtype view not aligned to its element size: .*"
                       rf"a multiple of {_bits(view) // 8}\b.*found byte offset .* = {start * _bits(src) // 8} at tid=0"):
        testing.lower(kernel)


@pytest.mark.parametrize("space", ["global", "shared"])
def test_a_wider_view_on_a_wide_element_is_exact(space):
    # bytes 4..7 of each 8-byte row: element 1 of the uint32 view of row tid
    kernel = _load_through_view("uint8", 8, 4, "uint32", 1, f"ld.{space}.b32", space)
    lowered = testing.lower(kernel).script()
    assert lowered.count("T.ptx.ld(") == 1
    # the address is the view's element (tid * 8 + 4) // 4 = tid * 2 + 1 of uint32
    assert "(tid * 8 + 4) // 4" in lowered or "tid * 2 + 1" in lowered


def test_the_rounded_view_message_names_the_point():
    kernel = _load_through_view("uint8", 8, 2, "uint32", 1, "ld.global.b32", "global")
    with pytest.raises(TileError) as err:
        testing.lower(kernel)
    assert "ld.global.b32: src (operand 2)" in str(err.value)
    assert "= 2 at tid=0" in str(err.value)


def test_a_register_view_between_two_wide_elements_is_rejected():
    # registers 1..2 of a float16 array as one uint32 would be registers 0..1
    @T.function
    def k(A: T.Tensor((64,), "uint32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        tid = T.cuda.thread_idx("x")
        h = T.alloc_local((4,), "float16")
        T.cuda.tile.apply(T.ptx["ld.global.b32"], h.sub[1:3].view("uint32"), A.sub[tid : tid + 1])

    with pytest.raises(TileError, match="dtype view not aligned to its element size"):
        testing.lower(k)


# -- bounds in bytes (item 2) -----------------------------------------------------------------


@T.function
def narrowing_view(A: T.Tensor((256,), "float32", align=16)):
    # each thread reads its float32 as two float16 halves: bytes 4 * tid .. 4 * tid + 3
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=256))
    tid = T.cuda.thread_idx("x")
    r = T.alloc_local((2,), "float16")
    T.cuda.tile.apply(T.ptx["ld.global.v2.b16"], r, A.sub[tid : tid + 1].view("float16"))


@T.function
def vector_dtype_viewed_as_scalars(A: T.Tensor((64,), "float32x4", align=16)):
    # 64 float32x4 = 1024 bytes, read as 256 float32 (4 per thread)
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tid = T.cuda.thread_idx("x")
    flat = T.decl_buffer((256,), "float32", data=A.data, align=16)
    r = T.alloc_local((4,), "float32")
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, flat.sub[tid * 4 : tid * 4 + 4])


@T.function
def wide_alias_inside(A: T.Tensor((256,), "float32", align=16)):
    # 128 float64 over 256 float32: the same 1024 bytes
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
    tid = T.cuda.thread_idx("x")
    W = T.decl_buffer((128,), "float64", data=A.data, align=16)
    r = T.alloc_local((1,), "float64")
    T.cuda.tile.apply(T.ptx["ld.global.b64"], r, W.sub[tid : tid + 1])


@pytest.mark.parametrize("kernel", [narrowing_view, vector_dtype_viewed_as_scalars, wide_alias_inside],
                         ids=["float32 as float16", "float32x4 as float32", "float64 alias inside"])
def test_views_inside_the_allocation_are_accepted(kernel):
    assert testing.count_ptx(testing.lower(kernel), "ld.*") == 1


@T.function
def wide_alias_past_the_end(A: T.Tensor((256,), "float32", align=16)):
    # 256 float64 over 256 float32: threads 128..255 read past the 1024 bytes
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=256))
    tid = T.cuda.thread_idx("x")
    W = T.decl_buffer((256,), "float64", data=A.data)
    r = T.alloc_local((1,), "float64")
    T.cuda.tile.apply(T.ptx["ld.global.b64"], r, W.sub[tid : tid + 1])


def test_a_wider_alias_reading_past_the_allocation_is_rejected():
    with pytest.raises(TileError, match=r"view provably out of the tensor's bounds: expected bytes within "
                       r"\[0, 1024\) of A \(256 x float32\), found bytes \[2040, 2048\) at tid=255"):
        testing.lower(wide_alias_past_the_end)


def test_a_narrowing_view_past_the_end_is_rejected_in_bytes():
    @T.function
    def k(A: T.Tensor((256,), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=256))
        tid = T.cuda.thread_idx("x")
        r = T.alloc_local((2,), "float16")
        # the next float32 as two halves: thread 255 reads bytes 1024..1027
        T.cuda.tile.apply(T.ptx["ld.global.v2.b16"], r, A.sub[tid + 1 : tid + 2].view("float16"))

    with pytest.raises(TileError, match=r"found bytes \[1024, 1028\) at tid=255"):
        testing.lower(k)
