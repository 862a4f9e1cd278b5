"""tvm_tirx.schedule.tensor_intrin: tile calls put into scheduled s_tir PrimFuncs by ``sch.tensorize``.

Each kernel is scheduled the usual TVM way (split, bind, cache_read /
cache_write, compute_at) and its cache blocks are tensorized with our
intrinsics; the build checks the tile calls on the scheduled kernel.
"""

import pytest
import tvm

from tvm_tirx import TileError, testing
from tvm_tirx.schedule import tensor_intrin

pytestmark = pytest.mark.skipif(
    not tensor_intrin.tensorize_supported(),
    reason="Schedule.tensorize crashes with this apache-tvm-ffi (needs 0.1.14.post0, see tensorize_supported)",
)

THREADS = 64
DTYPES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16", "i32": "int32", "u32": "uint32"}


def _copy_func(dtype, n, rows_pad=0):
    """``B[i, j] = A[i, j]`` over ``(2 * THREADS, n)`` tiles; A's rows are ``n + rows_pad`` long."""
    from tvm.script import tirx as T

    rows = 2 * THREADS

    @T.prim_func(s_tir=True)
    def copy(A: T.Buffer((rows, n + rows_pad), dtype), B: T.Buffer((rows, n), dtype)):
        for i, j in T.grid(rows, n):
            with T.sblock("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj]

    return copy


def _schedule(func, stages):
    """Bind rows to ``blockIdx.x`` x ``threadIdx.x``; stage A through ``stages``
    (``[(scope, intrinsic), ...]`` from the register end outwards) and B through
    a local cache; tensorize every stage.  Returns the schedule."""
    sch = tvm.s_tir.Schedule(func)
    block = sch.get_sblock("B")
    i, _ = sch.get_loops(block)
    bx, tx = sch.split(i, [None, THREADS])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    store = sch.cache_write(block, 0, "local")
    sch.reverse_compute_at(store, tx)
    consumer, made = block, []
    for scope, _ in stages:
        consumer = sch.cache_read(consumer, 0, scope)
        made.append(consumer)
    for stage in made:
        sch.compute_at(stage, tx)
    for stage, (_, intrin) in zip(made, stages):
        sch.tensorize(sch.get_loops(stage)[-1], intrin)
    return sch, store


def _vector_schedule(short, n, store_intrin=None, stages=None):
    sch, store = _schedule(_copy_func(DTYPES[short], n), stages or [("local", f"tvm_tirx.ld_global_v{n}_{short}")])
    sch.tensorize(sch.get_loops(store)[-1], store_intrin or f"tvm_tirx.st_global_v{n}_{short}")
    return sch


def _tile_calls(mod):
    import tvm_ffi
    from tvm_tirx.tile.rules.op import decode, is_tile_call

    found = []
    tvm_ffi.structural_walk(
        mod["main"].body, (tvm.tirx.Evaluate, lambda e: found.append(decode(e.value)) if is_tile_call(e.value) else None)
    )
    return found


def test_every_intrinsic_is_listed_and_registered():
    names = tensor_intrin.list_intrinsics()
    assert len(names) == len(set(names)) == 45 + 34
    for name in names:
        assert name.startswith("tvm_tirx.")
        assert tvm.s_tir.TensorIntrin.get(name) is not None
    assert "tvm_tirx.ld_global_v4_f32" in names and "tvm_tirx.cp_async_cg_16B_f16" in names


@pytest.mark.parametrize("short", sorted(DTYPES))
@pytest.mark.parametrize("space", ["global", "shared"])
@pytest.mark.parametrize("n", [2, 4])
def test_tensorize_puts_the_tile_call_in_the_block(short, space, n):
    bits = 16 if short in ("f16", "bf16") else 32
    if space == "global":
        sch = _vector_schedule(short, n)
        expected = [f"st.global.v{n}.b{bits}", f"ld.global.v{n}.b{bits}"]
    else:
        stages = [("local", f"tvm_tirx.ld_shared_v{n}_{short}"), ("shared", f"tvm_tirx.st_shared_v{n}_{short}"),
                  ("local", f"tvm_tirx.ld_global_v{n}_{short}")]  # fmt: skip
        sch = _vector_schedule(short, n, stages=stages)
        expected = [f"st.global.v{n}.b{bits}", f"ld.shared.v{n}.b{bits}", f"st.shared.v{n}.b{bits}",
                    f"ld.global.v{n}.b{bits}"]  # fmt: skip
    calls = _tile_calls(sch.mod)
    assert sorted(c.opcode for c in calls) == sorted(expected)
    for call in calls:
        assert call.scope == "thread" and len(call.operands) == 2
        assert all(tuple(int(s) for s in op.shape) == (n,) for op in call.operands)


def _lower(mod):
    from tvm_tirx.schedule.scheduled import lower_scheduled

    with tvm.target.Target({"kind": "cuda", "arch": "sm_90a"}):
        return lower_scheduled(mod)


def _access_pointers(call):
    """The ``tvm_access_ptr`` calls inside ``call``, in argument order."""
    found = []
    for arg in call.args:
        found += [c for c in _calls_in(arg) if str(c.op.name) == "tirx.tvm_access_ptr"]
    return found


def test_expansion_matches_the_hand_written_ptx():
    """Before/Expected: the tensorized load expands to one ``ld.global.v4.b32``
    of the thread's 4 registers at row ``blockIdx.x * 64 + threadIdx.x`` of A,
    its address an access pointer that reads (mask 1) 4-float rows of A."""
    from tvm_tirx.tile.rules.op import is_tile_call
    from tvm.script import tirx as T
    import tvm_ffi

    lowered = _lower(_vector_schedule("f32", 4).mod)["main"]
    calls = []
    tvm_ffi.structural_walk(lowered.body, (tvm.ir.Call, calls.append))
    ptx = [c for c in calls if str(c.op.name).startswith("tirx.ptx.")]
    assert not any(is_tile_call(c) for c in calls)
    assert len(ptx) == 2
    load = next(c for c in ptx if "ld" in str(c.op.name))
    dst = load.args[0].source
    (pointer,) = _access_pointers(load)
    assert dst.scope() == "local" and dst.shape[0] == 4
    expected = T.ptx["ld.global.v4.b32"](dst[0], dst[1], dst[2], dst[3], pointer)
    tvm.ir.assert_structural_equal(load, expected)
    assert "float32" in str(pointer.args[0])  # offsets in A's own elements
    assert int(pointer.args[3]) == 1 and int(pointer.args[4]) == 1
    threads = _thread_vars(lowered)
    ana = tvm.sym.Analyzer()
    assert ana.can_prove_equal(pointer.args[2], (threads["blockIdx.x"] * THREADS + threads["threadIdx.x"]) * 4)


@testing.requires_nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_scheduled_kernels_assemble(arch):
    import tvm_tirx

    for short, n in (("f32", 4), ("f16", 2), ("bf16", 4)):
        kernel = tvm_tirx.compile(_vector_schedule(short, n).mod, target="cuda", arch=arch)
        assert kernel.cuda_source.count("asm volatile") == 2
        assert testing.assemble(kernel)


def _thread_vars(func):
    """``{thread tag: loop var}`` of the thread-binding loops of ``func``."""
    import tvm_ffi

    found = {}

    def visit(loop):
        if loop.thread_binding is not None:
            found[str(loop.thread_binding.thread_tag)] = loop.loop_var

    tvm_ffi.structural_walk(func.body, (tvm.tirx.For, visit))
    return found


def test_cp_async_stage_is_one_16_byte_copy_per_thread():
    """A cooperative shared stage (one row per ``threadIdx.x``) tensorized with
    ``cp_async_cg_16B``: each thread issues one 16-byte ``cp.async.cg`` from row
    ``blockIdx.x * 64 + threadIdx.x`` of A to row ``threadIdx.x`` of the stage.
    No kernel is built: a schedule cannot add the ``commit_group`` / ``wait_group``
    and the barrier that would make the copy safe to read (the guide's "Not
    covered yet")."""
    import tvm_ffi
    from tvm_tirx.tile.rules.op import is_tile_call

    sch = tvm.s_tir.Schedule(_copy_func("float16", 8))
    block = sch.get_sblock("B")
    i, _ = sch.get_loops(block)
    bx, tx = sch.split(i, [None, THREADS])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    stage = sch.cache_read(block, 0, "shared")
    sch.compute_at(stage, bx)
    _, row, chunk = sch.get_loops(stage)
    sch.bind(row, "threadIdx.x")
    sch.tensorize(chunk, "tvm_tirx.cp_async_cg_16B_f16")
    assert [c.opcode for c in _tile_calls(sch.mod)] == ["cp.async.cg.shared.global"]

    lowered = _lower(sch.mod)["main"]
    calls = []
    tvm_ffi.structural_walk(lowered.body, (tvm.ir.Call, calls.append))
    assert not any(is_tile_call(c) for c in calls)
    copies = [c for c in calls if str(c.op.name).startswith("tirx.ptx.cp")]
    assert len(copies) == 1
    copy = copies[0]
    assert int(copy.args[2]) == 16 and [str(a.value) for a in copy.args[3:7]] == ["async", "cg", "shared", "global"]
    dst, src = _access_pointers(copy)
    assert [int(dst.args[4]), int(src.args[4])] == [2, 1]  # the stage is written, A read
    threads = _thread_vars(lowered)
    ana = tvm.sym.Analyzer()
    assert ana.can_prove_equal(dst.args[2], threads["threadIdx.x"] * 8)
    assert ana.can_prove_equal(src.args[2], (threads["blockIdx.x"] * THREADS + threads["threadIdx.x"]) * 8)


def test_cp_async_intrinsic_tensorizes_a_shared_cache():
    stages = [("shared", "tvm_tirx.cp_async_cg_16B_f16")]
    sch, _ = _schedule(_copy_func("float16", 8), stages)
    calls = _tile_calls(sch.mod)
    assert [c.opcode for c in calls] == ["cp.async.cg.shared.global"]


def test_tvm_compile_with_the_pipeline_lowers_tile_calls():
    from tvm_tirx.build.pipeline import register_pipeline

    sch = _vector_schedule("f32", 4)
    exe = tvm.compile(sch.mod, target=tvm.target.Target({"kind": "cuda", "arch": "sm_90a"}), tir_pipeline=register_pipeline())
    src = exe.mod.imports[0].inspect_source()
    assert "ld.global.v4.b32" in src and "st.global.v4.b32" in src


# -- rules, through tensorize ----------------------------------------------------


def test_misaligned_tile_names_the_block_and_the_intrinsic():
    import tvm_tirx

    # rows of 5 floats: the 4-float tile of an odd row is not 16-byte aligned
    sch, store = _schedule(_copy_func("float32", 4, rows_pad=1), [("local", "tvm_tirx.ld_global_v4_f32")])
    sch.tensorize(sch.get_loops(store)[-1], "tvm_tirx.st_global_v4_f32")
    with pytest.raises(TileError) as info:
        tvm_tirx.compile(sch.mod, target="cuda", arch="sm_90a")
    text = str(info.value)
    assert "block 'A_local_o'" in text and "tvm_tirx.ld_global_v4_f32" in text
    assert "ld.global.v4.b32" in text and "not provably aligned" in text and "multiple of 16" in text


def test_misaligned_tile_through_tvm_compile_is_the_same_error():
    from tvm_tirx.build.pipeline import register_pipeline

    sch, store = _schedule(_copy_func("float32", 4, rows_pad=1), [("local", "tvm_tirx.ld_global_v4_f32")])
    sch.tensorize(sch.get_loops(store)[-1], "tvm_tirx.st_global_v4_f32")
    with pytest.raises(TileError, match="tensor intrinsic tvm_tirx.ld_global_v4_f32.*not provably aligned"):
        tvm.compile(sch.mod, target=tvm.target.Target({"kind": "cuda", "arch": "sm_90a"}), tir_pipeline=register_pipeline())


def test_wrong_dtype_does_not_tensorize():
    """The intrinsic's description is dtype-exact: a float16 block does not match a float32 intrinsic."""
    sch = tvm.s_tir.Schedule(_copy_func("float16", 4))
    block = sch.get_sblock("B")
    stage = sch.cache_read(block, 0, "local")
    with pytest.raises(Exception, match="mismatch|match"):
        sch.tensorize(sch.get_loops(stage)[-1], "tvm_tirx.ld_global_v4_f32")


def test_wrong_vector_length_does_not_tensorize():
    sch = tvm.s_tir.Schedule(_copy_func("float32", 4))
    block = sch.get_sblock("B")
    i, j = sch.get_loops(block)
    stage = sch.cache_read(block, 0, "local")
    sch.compute_at(stage, i)
    with pytest.raises(Exception):
        sch.tensorize(sch.get_loops(stage)[-1], "tvm_tirx.ld_global_v2_f32")


# -- GPU ----------------------------------------------------------------------------


@testing.requires_cuda
@pytest.mark.parametrize("short", ["f32", "f16", "bf16"])
def test_scheduled_copy_through_shared_memory_on_gpu(short):
    import torch
    import tvm_tirx

    n = 4
    stages = [("local", f"tvm_tirx.ld_shared_v{n}_{short}"), ("shared", f"tvm_tirx.st_shared_v{n}_{short}"),
              ("local", f"tvm_tirx.ld_global_v{n}_{short}")]  # fmt: skip
    kernel = tvm_tirx.compile(_vector_schedule(short, n, stages=stages).mod, target="cuda")
    dtype = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[short]
    a = torch.randn(2 * THREADS, n, device="cuda").to(dtype)
    b = torch.zeros_like(a)
    kernel(a, b)
    torch.cuda.synchronize()
    assert torch.equal(a, b)


# -- warp-level fragment intrinsics ------------------------------------------------


def _apache_function(name):
    """Function ``name`` of apache-tvm's ``tvm/s_tir/tensor_intrin/cuda.py``, taken from its
    source: importing that module registers (parses) all of apache-tvm's intrinsics, minutes
    on a loaded machine, for one line of index arithmetic."""
    import ast
    import pathlib

    path = pathlib.Path(tvm.__file__).parent / "s_tir" / "tensor_intrin" / "cuda.py"
    tree = ast.parse(path.read_text())
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    namespace = {}
    exec(compile(ast.Module([node], []), str(path), "exec"), namespace)  # pylint: disable=exec-used
    return namespace[name]


def test_fragment_map_is_apache_tvms_for_16x16_tiles():
    """A schedule's transform_layout with apache-tvm's map matches our descs."""
    from tvm_tirx.schedule.tensor_intrin._fragments import fragment_index

    shared_16x16_to_ldmatrix_32x8_layout = _apache_function("shared_16x16_to_ldmatrix_32x8_layout")

    i, j = tvm.tirx.Var("i", "int32"), tvm.tirx.Var("j", "int32")
    tvm.ir.assert_structural_equal(
        list(fragment_index(16, 16)(i, j)), list(shared_16x16_to_ldmatrix_32x8_layout(i, j)), map_free_vars=True
    )
    for rows, cols in ((8, 8), (16, 8), (8, 16), (16, 16)):
        index = fragment_index(rows, cols)
        places = {index(a, b) for a in range(rows) for b in range(cols)}
        assert len(places) == rows * cols and all(0 <= lane < 32 for lane, _ in places)


def _gemm_schedule(names):
    import sys, os

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
    from bench.tir_gemm import matmul, schedule

    return schedule(matmul(256, 256, 256), names)


@pytest.mark.slow  # about 3.5 min on a 2-core machine
@testing.requires_nvcc
def test_scheduled_gemm_with_fragment_intrinsics_assembles():
    import tvm_tirx
    from bench.tir_gemm import OURS

    sch = _gemm_schedule(OURS)
    opcodes = sorted({c.opcode for c in _tile_calls(sch.mod)})
    assert opcodes == ["ldmatrix.sync.aligned.m8n8.x4.shared.b16", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
                       "mov.b32", "st.global.v2.f32"]  # fmt: skip
    kernel = tvm_tirx.compile(sch.mod, target="cuda", arch="sm_90a")
    src = kernel.cuda_source
    assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in src and "mma.sync.aligned.m16n8k16" in src
    assert "C_warp_regs" in src and testing.assemble(kernel)
    # the K loop stages A and B in shared memory that other warps read with
    # ldmatrix: a barrier after the stores (RAW) and one before the next
    # iteration's stores (WAR), as apache-tvm puts them for its own intrinsics
    loop = src[src.index("for (int k_0_0") :]
    first_ld = loop.index("ldmatrix")
    assert loop[:first_ld].count("__syncthreads()") == 2
    assert loop.index("__syncthreads()") < loop.index("A_shared_ptr") < loop.rindex("__syncthreads()", 0, first_ld)


def _gemm_variant(variant, size):
    """``(schedule, dtype)`` of a GEMM variant: ``"f16"``, ``"bf16"`` (m16n16k16
    blocks) or ``"f16-n8"`` (m16n8k16 blocks: ``ldmatrix.x2`` B fragments, 16 x 8
    accumulators)."""
    import sys, os

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
    from bench.tir_gemm import OURS_BY_DTYPE, OURS_N8, matmul, schedule

    if variant == "f16-n8":
        return schedule(matmul(size, size, size), OURS_N8, n=8, j_factors=(1, None, 4, 4, 1)), "float16"
    dtype = {"f16": "float16", "bf16": "bfloat16"}[variant]
    return schedule(matmul(size, size, size, dtype), OURS_BY_DTYPE[dtype]), dtype


@pytest.mark.slow  # about 1.5 min on a 2-core machine
@testing.requires_nvcc
def test_scheduled_gemm_with_m16n8k16_blocks_assembles():
    import tvm_tirx

    sch, _ = _gemm_variant("f16-n8", 256)
    opcodes = sorted({c.opcode for c in _tile_calls(sch.mod)})
    assert opcodes == ["ldmatrix.sync.aligned.m8n8.x2.shared.b16", "ldmatrix.sync.aligned.m8n8.x4.shared.b16",
                       "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "mov.b32", "st.global.v2.f32"]  # fmt: skip
    kernel = tvm_tirx.compile(sch.mod, target="cuda", arch="sm_90a")
    assert kernel.cuda_source.count("__syncthreads()") == 2 and testing.assemble(kernel)


@testing.requires_cuda
@pytest.mark.parametrize("variant", ["f16", "bf16", "f16-n8"])
def test_scheduled_gemm_matches_torch_on_gpu(variant):
    import torch
    import tvm_tirx

    sch, dtype = _gemm_variant(variant, 512)
    kernel = tvm_tirx.compile(sch.mod, target="cuda")
    for _ in range(2):  # fresh inputs each time
        a = torch.randn(512, 512, device="cuda").to(getattr(torch, dtype))
        b = torch.randn(512, 512, device="cuda").to(getattr(torch, dtype))
        c = torch.full((512, 512), float("nan"), device="cuda")
        kernel(a, b, c)
        torch.cuda.synchronize()
        ref = a.double() @ b.double().T
        assert (torch.linalg.norm(c.double() - ref) / torch.linalg.norm(ref)).item() < 1e-5


# -- ldmatrix / stmatrix round trips: every x1/x2/x4 [.trans] form -------------------

ROUND_TRIPS = [(count, trans, short) for count in (1, 2, 4) for trans in (False, True) for short in ("f16", "bf16")]


def _round_trip_kernel(count, trans, short, **kw):
    import tvm_tirx
    from fragment_kernels import round_trip

    return tvm_tirx.compile(round_trip(count, trans, short, **kw).mod, target="cuda", arch="sm_90a")


def _lowered_ptx(mod):
    import tvm_ffi

    calls = []
    tvm_ffi.structural_walk(_lower(mod)["main"].body, (tvm.ir.Call, calls.append))
    return [c for c in calls if str(c.op.name).startswith("tirx.ptx.")]


@pytest.mark.parametrize("count,trans,short", ROUND_TRIPS)
def test_round_trip_lowers_to_one_ldmatrix_and_one_stmatrix(count, trans, short):
    """Each fragment move is one warp instruction of exactly the intrinsic's
    form, whose shared address is an access pointer with the block's direction
    (ldmatrix reads, stmatrix writes: ``tvm_access_ptr`` mask 1 / 2)."""
    from fragment_kernels import round_trip

    suffix = f"m8n8.x{count}{'.trans' if trans else ''}.shared.b16"
    ptx = _lowered_ptx(round_trip(count, trans, short).mod)
    moves = [c for c in ptx if str(c.op.name) in ("tirx.ptx.ldmatrix", "tirx.ptx.stmatrix")]
    assert [str(c.op.name) for c in moves] == ["tirx.ptx.ldmatrix", "tirx.ptx.stmatrix"]
    for call, mask in zip(moves, (1, 2)):
        qualifiers = ".".join(str(a.value) for a in call.args if isinstance(a, tvm.ir.StringImm) and str(a.value))
        assert qualifiers.endswith(suffix)
        pointers = []
        import tvm_ffi

        tvm_ffi.structural_walk(call, (tvm.ir.Call, lambda c: pointers.append(c) if str(c.op.name) == "tirx.tvm_access_ptr" else None))
        assert len(pointers) == 1 and int(pointers[0].args[4]) == mask
        # one register per 8 x 8 matrix
        assert len([a for a in call.args if isinstance(a, tvm.ir.TensorLoad)]) == count


@testing.requires_nvcc
@pytest.mark.parametrize("count,trans,short", ROUND_TRIPS)
def test_round_trip_has_its_barriers_and_assembles(count, trans, short):
    """apache-tvm's ThreadSync sees the fragment moves' shared accesses: a CTA
    barrier separates the cooperative store into the stage from the ldmatrix
    that reads it, and the stmatrix from the copy that reads its result."""
    src = _round_trip_kernel(count, trans, short).cuda_source
    body = src[src.index("copy_kernel(") :]
    body = body[body.index("{") :]
    store, ld = body.index("*(uint4*)(A_shared_ptr") if "uint4" in body else body.index("A_shared_ptr +"), body.index("ldmatrix")
    st, out = body.index("stmatrix"), body.rindex("B_ptr")
    assert "__syncthreads()" in body[store:ld] and "__syncthreads()" in body[st:out]
    assert testing.assemble(_round_trip_kernel(count, trans, short))


def test_round_trip_on_a_partial_warp_is_refused():
    with pytest.raises(TileError, match=r"tvm_tirx.ldmatrix_x4_f16.*needs whole warps.*found 16 threads"):
        _round_trip_kernel(4, False, "f16", threads=16)


def test_misaligned_shared_fragment_rows_are_refused():
    """Rows padded to 20 halves (40 bytes): ldmatrix row addresses must be 16-byte aligned."""
    with pytest.raises(TileError, match=r"tvm_tirx.ldmatrix_x4_f16.*not provably aligned"):
        _round_trip_kernel(4, False, "f16", pad=4)


def test_padded_but_aligned_fragment_rows_are_accepted():
    """Rows padded to 24 halves (48 bytes) stay 16-byte aligned."""
    assert "ldmatrix" in _round_trip_kernel(4, False, "f16", pad=8).cuda_source


def _run_fragment_layout_schedule(layout, rows, folder):
    """Run the error guide's example (``docs/error_examples/schedules.py``): a ``rows x 16``
    f16 copy whose ``"warp"`` cache is laid out by ``layout``, tensorized and built."""
    import importlib.util
    import os
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "docs"))
    from error_examples import HEADER
    from error_examples.schedules import fragment_schedule

    path = folder / "example.py"
    path.write_text(HEADER + fragment_schedule(layout, rows))
    spec = importlib.util.spec_from_file_location("_fragment_layout_example", path)
    spec.loader.exec_module(importlib.util.module_from_spec(spec))


@pytest.mark.parametrize(
    "layout,rows,rule",
    [
        ("lane, slot = fragment(i % 16, j)\n            return i // 16 * 32 + lane, slot", 32,
         r"block 'A_shared_warp_o'.*must end in \(lanes, slots\).*found \(64, 8\)"),
        ("lane, slot = fragment(i % 16, j)\n            return lane, i // 16 * 8 + slot", 32,
         r"tvm_tirx.ldmatrix_x4_f16.*not one whole fragment"),
        ("return fragment(i, j)", 16, r"block 'B'.*'A_shared_warp' is read or written element by element"),
    ],
)  # fmt: skip
def test_fragment_buffer_rules_through_tensorize(layout, rows, rule, tmp_path):
    with pytest.raises(TileError, match=rule):
        _run_fragment_layout_schedule(layout, rows, tmp_path)


@testing.requires_cuda
@pytest.mark.parametrize("count,trans,short", ROUND_TRIPS)
def test_round_trip_on_gpu(count, trans, short):
    import torch
    import tvm_tirx
    from fragment_kernels import memory_shape, round_trip

    kernel = tvm_tirx.compile(round_trip(count, trans, short).mod, target="cuda")
    dtype = {"f16": torch.float16, "bf16": torch.bfloat16}[short]
    a = torch.randn(*memory_shape(count, trans), device="cuda").to(dtype)
    b = torch.full_like(a, float("nan"))
    kernel(a, b)
    torch.cuda.synchronize()
    assert torch.equal(a, b)


@pytest.mark.parametrize("count,trans", [(c, t) for c in (1, 2, 4) for t in (False, True)])
def test_ldmatrix_row_addresses_follow_the_padded_layout(count, trans):
    """Lane ``l`` gives the address of row ``l % 8`` of 8 x 8 matrix ``l / 8``
    (PTX ISA 9.7.14.5.15); with the stage's rows padded to 24 halves the
    address must step by 24 per row (apache-tvm's FlattenBuffer would step by
    the view's shape)."""
    import tvm_ffi
    from fragment_kernels import SHAPES, memory_shape, round_trip

    rows, cols = SHAPES[count]
    stride = memory_shape(count, trans)[-1] + 8
    from tvm_tirx.tile.analysis.prover import fold

    lowered = _lower(round_trip(count, trans, "f16", pad=8).mod)["main"]
    found = []
    tvm_ffi.structural_walk(lowered.body, (tvm.ir.Call, found.append))
    (ld,) = [c for c in found if str(c.op.name) == "tirx.ptx.ldmatrix"]
    (pointer,) = [c for c in found if str(c.op.name) == "tirx.tvm_access_ptr" and any(a.same_as(c) for a in _calls_in(ld))]
    threads = _thread_vars(lowered)
    ana = tvm.sym.Analyzer()
    for l in range(8 * count):
        block = l // 8  # fragment block, numbered column-major
        rb, cb = block % (rows // 8), block // (rows // 8)
        row, col = (cb * 8 + l % 8, rb * 8) if trans else (rb * 8 + l % 8, cb * 8)
        value = fold(ana, pointer.args[2], {threads["threadIdx.x"]: l, threads["blockIdx.x"]: 0})
        assert value == row * stride + col, (l, value)


def _calls_in(node):
    import tvm_ffi

    found = []
    tvm_ffi.structural_walk(node, (tvm.ir.Call, found.append))
    return found


@testing.requires_nvcc
@pytest.mark.parametrize("cols", [8, 16])
def test_accumulator_fill_and_shared_store(cols):
    """``mma_fill_16x<cols>`` is one ``mov.b32`` per accumulator register and
    ``mma_store_16x<cols>_f32_shared`` one ``st.shared.v2.f32`` per 2 x 8 block
    of a lane's rows; the copy out of the stage waits at a barrier."""
    import tvm_tirx
    from fragment_kernels import accumulator_fill

    assert sorted({str(c.op.name) for c in _lowered_ptx(accumulator_fill(cols).mod)}) == ["tirx.ptx.mov", "tirx.ptx.st_vec"]
    kernel = tvm_tirx.compile(accumulator_fill(cols).mod, target="cuda", arch="sm_90a")
    body = kernel.cuda_source[kernel.cuda_source.index("zeros_kernel(float* __restrict__ C_ptr) {") :]
    # unrolled: per thread, one move per register, one v2 store per register pair
    assert body.count("tvm_builtin_ptx_mov_b32") == 16 * cols // 32
    assert body.count("st_vec_shared_v2_f32(") == 16 * cols // 64
    assert body.index("st_vec_shared_v2_f32") < body.index("__syncthreads()") < body.index("C_ptr +")
    assert testing.assemble(kernel)


@testing.requires_cuda
@pytest.mark.parametrize("cols", [8, 16])
def test_accumulator_fill_on_gpu(cols):
    import torch
    import tvm_tirx
    from fragment_kernels import CTAS, accumulator_fill

    kernel = tvm_tirx.compile(accumulator_fill(cols).mod, target="cuda")
    c = torch.full((CTAS, 16, cols), float("nan"), device="cuda")
    kernel(c)
    torch.cuda.synchronize()
    assert torch.equal(c, torch.zeros_like(c))  # every element written (NaN before)
