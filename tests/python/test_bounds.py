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
    with pytest.raises(TileError, match=r"(?m)found bytes \[7664, 7680\) at threadIdx\.x=255, blockIdx\.x=7$"):
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


# -- run-time extents: bounds proved from guards, predicates, loop ranges and T.assume (issue 23)


n_rt = T.dynamic("n_rt")


def _copy(off_by_one):
    @T.function
    def copy(a: T.Tensor((n_rt,), "float32"), c: T.Tensor((n_rt,), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=T.ceildiv(n_rt, 256), block=256))
        i = T.cuda.block_idx("x") * 256 + T.cuda.thread_idx("x")
        r = T.alloc_local((1,), "float32")
        if (i <= n_rt) if off_by_one else (i < n_rt):
            T.cuda.tile.apply(T.ptx["ld.global.f32"], r, a.sub[i : i + 1])
            T.cuda.tile.apply(T.ptx["st.global.f32"], c.sub[i : i + 1], r)

    return copy


def test_guard_on_a_run_time_extent_is_a_fact_of_the_proof():
    # the off-by-one guard was accepted ("the bounds are the author's responsibility")
    assert testing.count_ptx(testing.lower(_copy(False)), "*") == 2
    with pytest.raises(
        TileError,
        match=r"ld.global.f32: src \(operand 2\): view not provably within the tensor's bounds: "
        r"expected bytes within \[0, n_rt \* 4\) of a .*\(given blockIdx.x \* 256 \+ threadIdx.x <= n_rt\), "
        r"found .*blockIdx.x \* 1024 \+ threadIdx.x \* 4 \+ 4 <= n_rt \* 4 does not follow",
    ):
        testing.lower(_copy(True))


@T.function
def rows_of_a_run_time_loop(A: T.Tensor((n_rt, 4), "float32", align=16), B: T.Tensor((4,), "float32", align=16)):
    # the loop bounds k: no pred=k < n_rt needed (it was refused without one)
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
    r = T.alloc_local((4,), "float32")
    for k in T.serial(n_rt):
        T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[k, :])
    T.cuda.tile.apply(T.ptx["st.global.v4.b32"], B, r)


def test_loop_range_over_a_run_time_extent_is_a_fact_of_the_proof():
    assert testing.lower(rows_of_a_run_time_loop).script().count("T.ptx.ld(") == 1


def _gather(assume, rewrite=False):
    """Each thread reads row Idx[t] of A; the author states 0 <= j < n_rt with T.assume."""

    @T.function
    def gather(A: T.Tensor((n_rt,), "float32"), Idx: T.Tensor((256,), "int32"), C: T.Tensor((256,), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=256))
        t = T.cuda.thread_idx("x")
        r = T.alloc_local((1,), "float32")
        j = T.alloc_local((1,), "int32")
        T.cuda.tile.apply(T.ptx["ld.global.b32"], j, Idx.sub[t : t + 1])
        if assume:
            T.assume(0 <= j[0] and j[0] < n_rt)
        if rewrite:  # j changes after the assumption: it no longer says anything of j
            T.cuda.tile.apply(T.ptx["ld.global.b32"], j, Idx.sub[255 - t : 256 - t])
        T.cuda.tile.apply(T.ptx["ld.global.f32"], r, A.sub[j[0] : j[0] + 1])
        T.cuda.tile.apply(T.ptx["st.global.f32"], C.sub[t : t + 1], r)

    return gather


def test_assumption_states_what_the_prover_cannot_derive():
    assert testing.count_ptx(testing.lower(_gather(True)), "ld.*") == 2
    with pytest.raises(TileError, match=r"found byte offset j \* 4 \+ \[0, 4\): j \* 4 >= 0 does not follow \(guard the access .* T.assume"):
        testing.lower(_gather(False))


def test_assumption_ends_where_its_memory_is_written():
    with pytest.raises(TileError, match=r"view not provably within the tensor's bounds"):
        testing.lower(_gather(True, rewrite=True))


def test_assumption_needs_a_boolean_condition():
    with pytest.raises(TileError, match=r"test_bounds.py:\d+: T.assume needs a boolean condition: expected a bool expression .* found Idx\[t\] \(int32\)") as info:

        @T.function
        def not_a_condition(Idx: T.Tensor((256,), "int32")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=256))
            t = T.cuda.thread_idx("x")
            T.assume(Idx[t])

    assert "T.assume(Idx[t])" in "".join(getattr(info.value, "__notes__", ()))
    with pytest.raises(TileError, match="T.assume needs a boolean condition"):
        T.assume(1)
    # a boolean condition, and a Python bool, are accepted
    assert "bool" in str(T.assume(True).args[0].ty)


def test_check_assumptions_builds_a_run_time_check():
    import tvm_tirx

    plain = tvm_tirx.compile(_gather(True), arch="sm_90a")
    checked = tvm_tirx.compile(_gather(True), arch="sm_90a", options={"check_assumptions": True})
    assert "tvm_tirx_trap" not in plain.cuda_source
    source = checked.cuda_source
    assert source.count("tvm_tirx_trap(\"") == 1, source
    assert "test_bounds.py:" in source and "T.assume(0 <= j and j < n_rt) does not hold" in source
    assert "(j_ptr[0] < 0) || (n_rt <= j_ptr[0])" in source  # the check is the negated condition
    testing.assemble(checked)


_TRAP_SCRIPT = """
import torch, tvm_tirx
from test_bounds import _gather
k = tvm_tirx.compile(_gather(True), target="cuda", options={"check_assumptions": True})
a = torch.randn(100, device="cuda")
c = torch.empty(256, device="cuda")
good = torch.randint(0, 100, (256,), device="cuda", dtype=torch.int32)
k(a, good, c)
torch.cuda.synchronize()
assert torch.equal(c, a[good.long()]), "wrong result"
print("in range: ok", flush=True)
bad = good.clone()
bad[7] = 100
k(a, bad, c)
torch.cuda.synchronize()
print("out of range: no trap", flush=True)
"""


@pytest.mark.gpu
def test_check_assumptions_traps_with_its_line_on_the_gpu(torch_cuda):
    # in a process of its own: a trap leaves the CUDA context unusable
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": os.path.dirname(__file__) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, "-c", _TRAP_SCRIPT], capture_output=True, text=True, timeout=300, env=env)
    text = out.stdout + out.stderr
    assert "in range: ok" in text, text
    assert "out of range: no trap" not in text, text
    assert out.returncode != 0, text
    assert "thread (7,0,0): " in text and "T.assume(0 <= j and j < n_rt) does not hold" in text, text


# -- machine integers (issue 44 item 2): casts that change the value, int32 index overflow ------


def _cast_gather(src_dtype, guard):
    """Each thread reads ``A[t]`` with ``t`` a ``src_dtype`` index from memory cast to
    ``int32``, under the if-condition ``guard``: ``"t < n"``, ``"0 <= t < n"`` (the cast's
    result checked), ``"j < n"`` (the loaded value bounded before the cast, in its own
    type), ``"0 <= j, t < n"`` (the loaded value's sign, then the cast's result)."""

    @T.function
    def gather(A: T.Tensor((n_rt,), "float32"), Idx: T.Tensor((256,), src_dtype), C: T.Tensor((256,), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=256))
        tid = T.cuda.thread_idx("x")
        r = T.alloc_local((1,), "float32")
        j = T.alloc_local((1,), src_dtype)
        if src_dtype == "int64":
            T.cuda.tile.apply(T.ptx["ld.global.b64"], j, Idx.sub[tid : tid + 1])
        else:
            T.cuda.tile.apply(T.ptx["ld.global.b32"], j, Idx.sub[tid : tid + 1])
        t = T.cast(j[0], "int32")
        if guard == "t < n":
            if t < n_rt:
                T.cuda.tile.apply(T.ptx["ld.global.f32"], r, A.sub[t : t + 1])
        elif guard == "0 <= t < n":
            if 0 <= t and t < n_rt:
                T.cuda.tile.apply(T.ptx["ld.global.f32"], r, A.sub[t : t + 1])
        elif guard == "j < n":
            if 0 <= j[0] and j[0] < T.cast(n_rt, src_dtype):
                T.cuda.tile.apply(T.ptx["ld.global.f32"], r, A.sub[t : t + 1])
        else:
            if 0 <= j[0] and t < n_rt:
                T.cuda.tile.apply(T.ptx["ld.global.f32"], r, A.sub[t : t + 1])
        T.cuda.tile.apply(T.ptx["st.global.f32"], C.sub[tid : tid + 1], r)

    return gather


def test_uint32_index_cast_to_int32_is_not_known_to_be_non_negative():
    # a uint32 of 2**31 or more is negative as an int32: `t < n_rt` holds and A[t] is read
    # before A (accepted before issue 44: the prover took the cast for the uint32 value)
    with pytest.raises(
        TileError,
        match=r"test_bounds.py:\d+: ld.global.f32: src \(operand 2\): view not provably within the tensor's bounds: "
        r".*T.Cast\(\"int32\", j\) \* 4 >= 0 does not follow; T.Cast\(\"int32\", j\) is any int32 in "
        r"\[-2147483648, 2147483647\]: a uint32 value outside that range does not keep its value",
    ):
        testing.lower(_cast_gather("uint32", "t < n"))
    # the positive twins: the cast's result checked, or the loaded value bounded before the cast
    assert testing.count_ptx(testing.lower(_cast_gather("uint32", "0 <= t < n")), "ld.*") == 2
    assert testing.count_ptx(testing.lower(_cast_gather("uint32", "j < n")), "ld.*") == 2


def test_int64_index_narrowed_to_int32_loses_its_high_bits():
    # j = 2**31 passes `0 <= j`, and its int32 cast is negative
    with pytest.raises(TileError, match=r"does not follow; T.Cast\(\"int32\", j\) is any int32 .* a int64 value"):
        testing.lower(_cast_gather("int64", "0 <= j, t < n"))
    # the positive twin: 0 <= j < n_rt in int64 proves that the cast keeps j's value
    assert testing.count_ptx(testing.lower(_cast_gather("int64", "j < n")), "ld.*") == 2


total_rt = T.dynamic("total_rt")


def _flat_rows(bound):
    """2**20 rows of ``n_rt`` columns in a flat tensor, one row per thread, read column
    by column: the element offset ``row * n_rt + col`` is int32 arithmetic, and so is
    the guard that compares it with the tensor's size."""

    @T.function
    def rows(A: T.Tensor((total_rt,), "float32"), W: T.Tensor((n_rt,), "float32")):
        if bound == "assert":
            assert n_rt <= 2048, "rows of at most 2048 columns"
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1 << 12, block=256))
        row = T.cuda.block_idx("x") * 256 + T.cuda.thread_idx("x")
        r = T.alloc_local((1,), "float32")
        if bound == "assume":
            T.assume(n_rt <= 2048)
        for col in T.serial(n_rt):
            if row * n_rt + col < total_rt:
                T.cuda.tile.apply(T.ptx["ld.global.f32"], r, A.sub[row * n_rt + col : row * n_rt + col + 1])

    return rows


def test_a_guard_computed_with_wrapping_arithmetic_says_nothing():
    # row * n_rt wraps for n_rt > 2048: the guard compares the wrapped value, which may be
    # negative, and the load reads before A (accepted before issue 44: ideal integers)
    with pytest.raises(
        TileError,
        match=r"test_bounds.py:\d+: ld.global.f32: src \(operand 2\): view not provably within the tensor's bounds: "
        r".* does not follow; \(blockIdx.x \* 256 \+ threadIdx.x\) \* n_rt may also overflow int32 \(guard",
    ):
        testing.lower(_flat_rows(None))
    # the positive twins: the size stated with T.assume, or checked by the host before the launch
    assert testing.lower(_flat_rows("assume")).script().count("T.ptx.ld(") == 1
    assert testing.lower(_flat_rows("assert")).script().count("T.ptx.ld(") == 1


def _pairs_of_8_gib(wide):
    """2**23 CTAs of 256 threads read two halves each of a (2**32,) float16 tensor (8 GiB,
    a static int64 extent): the element offset ``(cta * 256 + tid) * 2`` is inside the
    tensor, and computed in int32 (``wide``: in int64) it wraps past 2**31 - 1."""

    @T.function
    def pairs(A: T.Tensor((1 << 32,), "float16", align=4)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1 << 23, block=256))
        r = T.alloc_local((2,), "float16")
        if wide:
            i = T.cast(T.cuda.block_idx("x"), "int64") * 256 + T.cuda.thread_idx("x")
            T.cuda.tile.apply(T.ptx["ld.global.v2.b16"], r, A.sub[i * 2 : i * 2 + 2])
        else:
            i = T.cuda.block_idx("x") * 256 + T.cuda.thread_idx("x")
            T.cuda.tile.apply(T.ptx["ld.global.v2.b16"], r, A.sub[i * 2 : i * 2 + 2])

    return pairs


def test_index_arithmetic_that_may_overflow_int32_is_refused():
    # inside A, but the int32 offset wraps from CTA 2**22 on (accepted before issue 44)
    with pytest.raises(
        TileError,
        match=r"test_bounds.py:\d+: ld.global.v2.b16: src \(operand 2\): index arithmetic may overflow int32: "
        r"expected \(blockIdx.x \* 256 \+ threadIdx.x\) \* 2 within the int32 range \[-2147483648, 2147483647\] "
        r"at every point that reaches the call, found element offset .*: "
        r"\(blockIdx.x \* 256 \+ threadIdx.x\) \* 2 <= 2147483647 does not follow \(int32 arithmetic wraps: .*T.assume",
    ):
        testing.lower(_pairs_of_8_gib(False))
    # the positive twin: the offset computed in int64
    assert testing.count_ptx(testing.lower(_pairs_of_8_gib(True)), "ld.*") == 1


def test_a_tensor_with_int32_extents_holds_fewer_than_2_31_elements():
    # the fact that bounds A.sub[row, col] of a (m_rt, n_rt) tensor under row < m_rt: the
    # kernel's argument check refuses a larger tensor before the launch
    from tvm_tirx.build.arguments import ParamSpec

    @T.function
    def rows(A: T.Tensor((m_rt, n_rt), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1 << 12, block=256))
        row = T.cuda.block_idx("x") * 256 + T.cuda.thread_idx("x")
        r = T.alloc_local((1,), "float32")
        for col in T.serial(n_rt):
            if row < m_rt:
                T.cuda.tile.apply(T.ptx["ld.global.f32"], r, A.sub[row, col : col + 1])

    assert testing.lower(rows).script().count("T.ptx.ld(") == 1
    spec = ParamSpec.of(rows.params[0])
    assert spec.bind_shape((1 << 20, 2047), {}) is None
    assert spec.bind_shape((1 << 20, 2049), {}) == ("*", (1 << 20) * 2049)
    with pytest.raises(ValueError, match=r"argument 'A': expected at most 2147483647 elements \(the kernel computes its offsets in int32\), got shape \(1048576, 2049\)"):
        spec._require_shape("rows", (1 << 20, 2049), {})  # pylint: disable=protected-access


m_rt = T.dynamic("m_rt")


def test_check_assumptions_computes_the_condition_in_int64():
    # an assumption is read over mathematical integers: its run-time check must not wrap
    @T.function
    def rows(A: T.Tensor((total_rt,), "float32"), W: T.Tensor((n_rt,), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1 << 12, block=256))
        row = T.cuda.block_idx("x") * 256 + T.cuda.thread_idx("x")
        r = T.alloc_local((1,), "float32")
        T.assume(n_rt <= 2047)
        for col in T.serial(n_rt):
            T.assume(row * n_rt + col < total_rt)
            T.cuda.tile.apply(T.ptx["ld.global.f32"], r, A.sub[row * n_rt + col : row * n_rt + col + 1])

    import tvm_tirx

    source = tvm_tirx.compile(rows, arch="sm_90a", options={"check_assumptions": True}).cuda_source
    assert source.count('tvm_tirx_trap("') == 2, source
    assert "(int64_t)n_rt" in source and "(int64_t)total_rt" in source, source


def test_a_proof_keeps_the_type_range_of_its_vars_query_after_query():
    # apache-tvm's Z3 back end states an int32 var's range only in the first query that
    # meets it: the same proof then failed from the second query on
    from tvm import tirx

    from tvm_tirx.tile.analysis.prover import make_analyzer, proves

    analyzer = make_analyzer()
    j, n = tirx.Var("j", "int64"), tirx.Var("n", "int32")
    facts = [tirx.IntImm("int64", 0) <= j, j < tirx.Cast("int64", n)]
    assert [proves(analyzer, j <= 2**31 - 1, facts) for _ in range(3)] == [True, True, True]


def test_every_proof_runs_in_a_solver_of_its_own():
    # one Z3 solver answering every query of a kernel made a proof near the budget depend on
    # the queries before it and on object addresses (the deterministic attention backward in
    # sections of one head compiled in some processes only): proves() asks a clone
    import tvm
    from tvm import tirx
    from tvm.sym import ProofStrength

    from tvm_tirx.tile.analysis.prover import make_analyzer, proves

    analyzer = make_analyzer()
    if not analyzer.is_z3_enabled:
        pytest.skip("apache-tvm without Z3")
    g, n = tirx.Var("g", "int32"), tirx.Var("n", "int32")
    analyzer.bind(g, tvm.ir.Range(0, n * 4))
    assert proves(analyzer, tirx.truncdiv(g, n) < 4, [n > 0])  # the clone has g's range
    assert not proves(analyzer, tirx.truncdiv(g, n) < 3, [n > 0])
    assert "num-checks" not in str(analyzer.get_z3_stats())  # the analyzer's own solver ran none
    analyzer.can_prove(tirx.truncdiv(g, n) < 4, ProofStrength.SYMBOLIC_BOUND)
    assert "num-checks" in str(analyzer.get_z3_stats())  # where a query on it would show
