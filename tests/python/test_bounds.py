"""The bounds rule over the points that reach a call: threads, CTA ids and loop values
under the enclosing guards and the call's predicate (docs/tile_contract.rst, "bounds").

Each kernel here came from a user trying to break the rule (a fresh-user review); the
first group was wrongly rejected or accepted before the rule enumerated guarded points.
"""

import pytest

from tvm_tirx import TileError, testing
from tvm_tirx.script import tirx as T


@T.function
def guard_on_cta_id(A: T.Tensor((256, 4), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=5, block=64))
    tid = T.cuda.thread_idx("x")
    bid = T.cuda.block_idx("x")
    r = T.alloc_local((4,), "float32")
    if bid < 4:
        T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[bid * 64 + tid, :])


@T.function
def guard_on_loop_counter(A: T.Tensor((256, 4), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tid = T.cuda.thread_idx("x")
    r = T.alloc_local((4,), "float32")
    for k in range(5):
        if k < 4:
            T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[k * 64 + tid, :])


@T.function
def loop_with_step(A: T.Tensor((256, 4), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    tid = T.cuda.thread_idx("x")
    r = T.alloc_local((4,), "float32")
    for k in range(0, 8, 2):
        T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[k * 32 + tid, :])


@T.function
def loop_with_step_alignment(A: T.Tensor((64, 5), "float32", align=16)):
    # rows 0, 4, 8, 12 of 20-byte rows: byte offsets 0, 80, 160, 240, all 16-aligned
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
    r = T.alloc_local((4,), "float32")
    for k in range(0, 8, 2):
        T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[k * 2, 0:4])


@T.function
def triangular_loops(A: T.Tensor((256, 4), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tid = T.cuda.thread_idx("x")
    r = T.alloc_local((4,), "float32")
    for k in range(4):
        for j in range(k + 1):
            T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[j * 64 + tid, :])


N = T.int32()


@T.function
def symbolic_rows_guarded(A: T.Tensor((N, 4), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tid = T.cuda.thread_idx("x")
    r = T.alloc_local((4,), "float32")
    if tid < N:
        T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid, :])


@T.function
def right_predicate(A: T.Tensor((64, 4), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
    tid = T.cuda.thread_idx("x")
    r = T.alloc_local((4,), "float32")
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid, :], pred=tid < 64)


@pytest.mark.parametrize(
    "kernel",
    [
        guard_on_cta_id,
        guard_on_loop_counter,
        loop_with_step,
        loop_with_step_alignment,
        triangular_loops,
        symbolic_rows_guarded,
        right_predicate,
    ],
    ids=lambda k: k.attrs["global_symbol"] if k.attrs and "global_symbol" in k.attrs else str(k),
)
def test_in_bounds_at_every_point_that_reaches_the_call(kernel):
    lowered = testing.lower(kernel).script()
    assert lowered.count("T.ptx.ld(") == 1 and '"v4", "b32"' in lowered


@T.function
def wrong_predicate(A: T.Tensor((64, 4), "float32", align=16)):
    # threads 64..99 pass the predicate and read past row 63
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
    tid = T.cuda.thread_idx("x")
    r = T.alloc_local((4,), "float32")
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid, :], pred=tid < 100)


@T.function
def symbolic_rows_unguarded(A: T.Tensor((N, 4), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tid = T.cuda.thread_idx("x")
    r = T.alloc_local((4,), "float32")
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid, :])


@T.function
def guard_that_misses_a_block(A: T.Tensor((256, 4), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=5, block=64))
    tid = T.cuda.thread_idx("x")
    bid = T.cuda.block_idx("x")
    r = T.alloc_local((4,), "float32")
    if bid < 5:
        T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[bid * 64 + tid, :])


@pytest.mark.parametrize(
    "kernel, message",
    [
        (wrong_predicate, r"provably out of the tensor's bounds: expected bytes within \[0, 1024\) of A "
         r"\(256 x float32\) where the predicate holds, found bytes \[1584, 1600\) at tid=99"),
        (symbolic_rows_unguarded, r"view not provably within the tensor's bounds: .*found byte offset tid \* 16"),
        (guard_that_misses_a_block, r"provably out of the tensor's bounds: .*found bytes \[5104, 5120\) at tid=63, bid=4"),
    ],
    ids=["wrong pred", "symbolic size, no guard", "guard keeps block 4"],
)
def test_rejected_with_the_point_or_expression(kernel, message):
    with pytest.raises(TileError, match=message):
        testing.lower(kernel)


# -- launch ids nobody named (issue 17 item 9) -------------------------------------------------


@T.function
def unnamed_ids_out_of_bounds(A: T.Tensor((256, 4), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=8, block=256))
    r = T.alloc_local((4,), "float32")
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[T.cuda.block_idx("x") * 32 + T.cuda.thread_idx("x"), :])


@T.function
def unnamed_ids_misaligned(A: T.Tensor((64, 1024), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=4, block=64))
    r = T.alloc_local((4,), "float32")
    T.cuda.tile.apply(
        T.ptx["ld.global.v4.b32"], r,
        A.sub[T.cuda.block_idx("x"), T.cuda.thread_idx("x") * 4 + 1 : T.cuda.thread_idx("x") * 4 + 5],
    )


def test_points_and_expressions_name_unnamed_launch_ids_by_their_cuda_names():
    with pytest.raises(TileError, match=r"found bytes \[7664, 7680\) at threadIdx\.x=255, blockIdx\.x=7$"):
        testing.lower(unnamed_ids_out_of_bounds)
    with pytest.raises(TileError) as err:
        testing.lower(unnamed_ids_misaligned)
    message = str(err.value)
    assert "blockIdx.x * 4096 + threadIdx.x * 16 + 4" in message, message
    assert "=," not in message and " v " not in message and "v_1" not in message



def _four_gib_load(shift):
    """2**20 CTAs of 256 threads load 16 bytes each of a 4 GiB float32 tensor (2**28 rows
    of 4): row ``cta * 256 + tid + shift`` -- the whole tensor for shift 0, one row past
    its end for shift 1."""

    @T.function
    def k(A: T.Tensor((1 << 28, 4), "float32", align=16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1 << 20, block=256))
        r = T.alloc_local((4,), "float32")
        T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[T.cuda.block_idx("x") * 256 + T.cuda.thread_idx("x") + shift, :])

    return k


def test_byte_offsets_past_2_gib_do_not_wrap():
    # the bounds were computed in 32-bit bytes: a 4 GiB tensor had "bytes within [0, 0)"
    # and this load of exactly the tensor was refused
    testing.lower(_four_gib_load(0))
    with pytest.raises(TileError, match=r"bytes within \[0, 4294967296\) of A"):
        testing.lower(_four_gib_load(1))
