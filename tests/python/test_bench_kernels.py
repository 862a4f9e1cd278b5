"""The benchmark kernels (bench/copy.py, bench/transpose.py) at small sizes: IR, assembly, values."""

import os
import sys

import pytest

import tvm_tirx
from tvm_tirx import testing

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from bench.copy import VARIANTS, make_copy, make_copy_oneshot  # noqa: E402
from bench.transpose import make_transpose  # noqa: E402


def test_copy_has_unroll_loads_in_flight_per_iteration():
    func = make_copy(4 * 256 * 4 * 2 * 3, unroll=4, ctas=2, ld="ld.global.v4.b32", st="st.global.v4.b32")
    lowered = testing.lower(func)
    # 3 iterations of the serial loop, each 4 loads then 4 stores
    assert testing.count_ptx(lowered, "ld.*") == 12
    assert testing.count_ptx(lowered, "st.*") == 12


def test_oneshot_copy_is_one_vector_per_thread():
    func = make_copy_oneshot(4 * 256 * 6)
    assert testing.count_ptx(func, "ld.global.v4.b32") == 1
    assert testing.count_ptx(func, "st.global.v4.b32") == 1
    if testing.has_nvcc():
        kernel = tvm_tirx.compile(func, target="cuda", arch="sm_90a")
        assert len(testing.assemble(kernel)) > 0
    with pytest.raises(ValueError, match="not a multiple of 1024"):
        make_copy_oneshot(1000)


@pytest.mark.gpu
def test_oneshot_copy_on_gpu(torch_cuda):
    torch = torch_cuda
    n = 4 * 256 * 37
    kernel = tvm_tirx.compile(make_copy_oneshot(n), target="cuda")
    a = torch.randn(n, device="cuda")
    b = torch.zeros_like(a)
    kernel(a, b)
    torch.cuda.synchronize()
    assert torch.equal(a, b)


def test_copy_rejects_sizes_that_do_not_tile():
    with pytest.raises(ValueError, match="not a multiple"):
        make_copy(1000, unroll=4, ctas=2, ld="ld.global.v4.b32", st="st.global.v4.b32")


def test_transpose_counts_and_assembly():
    func = make_transpose(64)
    lowered = testing.lower(func)
    assert testing.count_ptx(lowered, "ld.*") == 8  # 4 global + 4 shared per thread
    assert testing.count_ptx(lowered, "st.*") == 8
    if testing.has_nvcc():
        kernel = tvm_tirx.compile(func, target="cuda", arch="sm_90a")
        assert len(testing.assemble(kernel)) > 0
        # the padded tile: shared row stride 33 floats
        assert "* 33)" in kernel.cuda_source


@pytest.mark.gpu
@pytest.mark.parametrize("name,ld,st", VARIANTS)
def test_copy_on_gpu(torch_cuda, name, ld, st):
    torch = torch_cuda
    n = 4 * 256 * 4 * 8 * 5
    kernel = tvm_tirx.compile(make_copy(n, unroll=4, ctas=8, ld=ld, st=st), target="cuda")
    a = torch.randn(n, device="cuda")
    b = torch.zeros_like(a)
    kernel(a, b)
    torch.cuda.synchronize()
    assert torch.equal(a, b)


@pytest.mark.gpu
def test_transpose_on_gpu(torch_cuda):
    torch = torch_cuda
    kernel = tvm_tirx.compile(make_transpose(256), target="cuda")
    a = torch.randn(256, 256, device="cuda")
    b = torch.zeros_like(a)
    kernel(a, b)
    torch.cuda.synchronize()
    assert torch.equal(b, a.t())


# -- TMA benchmarks (bench/tma_copy.py, bench/transpose.py's TMA variant) ---------------------------

from bench.tma_copy import COLS, make_tma_copy  # noqa: E402
from bench.transpose import make_tma_transpose  # noqa: E402


def test_tma_copy_issues_one_load_and_one_store_per_tile():
    # 10 tiles over 4 CTAs: 3 rounds, one TMA load (producer) and one store (consumer) each
    lowered = testing.lower(make_tma_copy(COLS * 32 * 10, box_rows=32, stages=3, ctas=4))
    assert testing.count_ptx(lowered, "cp.async.bulk.tensor.2d.shared::cluster.*") == 3
    assert testing.count_ptx(lowered, "cp.async.bulk.tensor.2d.global.*") == 3
    with pytest.raises(ValueError, match="not a multiple of"):
        make_tma_copy(COLS * 31)


@pytest.mark.gpu
def test_tma_copy_on_gpu(torch_cuda):
    torch = torch_cuda
    rows = 32 * 41  # 41 tiles over 4 CTAs: uneven rounds, every stage reused
    kernel = tvm_tirx.compile(make_tma_copy(rows * COLS, box_rows=32, stages=3, ctas=4), target="cuda")
    a = torch.randn(rows, COLS, device="cuda")
    b = torch.zeros_like(a)
    kernel(a, b)
    torch.cuda.synchronize()
    assert torch.equal(a, b)


@pytest.mark.gpu
def test_tma_transpose_on_gpu(torch_cuda):
    torch = torch_cuda
    kernel = tvm_tirx.compile(make_tma_transpose(96), target="cuda")
    a = torch.randn(96, 96, device="cuda")
    b = torch.zeros_like(a)
    kernel(a, b)
    torch.cuda.synchronize()
    assert torch.equal(b, a.t())


# -- the TMA benchmarks' variants (bench/tma_copy.py Config, bench/transpose.py TmaConfig) -------

from bench import tma_copy, transpose  # noqa: E402


def test_tma_copy_pairs_each_run_their_own_ring():
    # 10 tiles over 2 CTAs x 2 pairs: 3 rounds per pair; one ring of 3 buffers per pair
    func = make_tma_copy(COLS * 8 * 10, box_rows=8, stages=3, ctas=2, pairs=2, store_lag=2)
    lowered = testing.lower(func)
    assert testing.count_ptx(lowered, "cp.async.bulk.tensor.2d.shared::cluster.*") == 3
    assert testing.count_ptx(lowered, "cp.async.bulk.tensor.2d.global.*") == 3
    assert testing.count_ptx(lowered, "mbarrier.init.shared::cta.b64") == 2 * 2 * 3  # full + empty, per pair and stage
    assert testing.count_ptx(lowered, "mbarrier.arrive.shared::cta.b64") == 3
    assert testing.count_ptx(lowered, "cp.async.bulk.wait_group.read") == 3
    assert "cp.async.bulk.wait_group.read 2" in tvm_tirx.compile(func, target="cuda", arch="sm_90a").cuda_source
    assert testing.count_ptx(lowered, "createpolicy.*") == 0


def test_tma_copy_hints_and_bulk_engine_choose_their_forms():
    hinted = testing.lower(make_tma_copy(COLS * 8 * 4, box_rows=8, stages=2, ctas=1, l2_hint="both"))
    assert testing.count_ptx(hinted, "createpolicy.fractional.L2::evict_first.b64") == 2  # producer and consumer
    assert testing.count_ptx(hinted, "cp.async.bulk.tensor.2d.shared::cluster.global.*L2::cache_hint") == 4
    assert testing.count_ptx(hinted, "cp.async.bulk.tensor.2d.global.*L2::cache_hint") == 4
    load_only = testing.lower(make_tma_copy(COLS * 8 * 4, box_rows=8, stages=2, ctas=1, l2_hint="load"))
    assert testing.count_ptx(load_only, "cp.async.bulk.tensor.2d.global.*L2::cache_hint") == 0
    bulk = testing.lower(make_tma_copy(COLS * 8 * 4, box_rows=8, stages=2, ctas=1, engine="bulk"))
    assert testing.count_ptx(bulk, "cp.async.bulk.shared::cluster.global.*") == 4
    assert testing.count_ptx(bulk, "cp.async.bulk.global.shared::cta.bulk_group") == 4
    assert testing.count_ptx(bulk, "cp.async.bulk.tensor.*") == 0


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"stages": 3, "store_lag": 3}, "store_lag=3 must be in 0..2"),
        ({"box_rows": 64, "stages": 4}, "bytes of shared memory per CTA; at most 232448"),
        ({"engine": "ld"}, "engine='ld'"),
        ({"l2_hint": "last"}, "l2_hint='last'"),
    ],
)
def test_tma_copy_rejects_configurations_that_cannot_run(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_tma_copy(COLS * 64 * 4, **kwargs)


def test_tma_bench_configurations_fit_an_sm():
    for config in {*tma_copy.GRID, *tma_copy.DEFAULTS, *tma_copy.cpu_variants()}:
        assert 0 <= config.store_lag < config.stages and config.resident(), config.name()
        assert config.smem() <= tma_copy.MAX_CTA_SMEM, config.name()
    for config in {*transpose.GRID, *transpose.DEFAULTS}:
        if isinstance(config, transpose.TmaConfig):
            assert config.resident(), config.name()
            assert transpose.N % (32 * config.sub * config.group) == 0, config.name()


def test_tma_transpose_pipeline_counts():
    # 192 x 192 in blocks of 2 tiles: 3 x 6 = 18 blocks over 4 CTAs, 5 rounds
    func = make_tma_transpose(192, sub=2, stages=3, ctas=4, group=3)
    lowered = testing.lower(func)
    assert testing.count_ptx(lowered, "cp.async.bulk.tensor.2d.shared::cluster.*") == 3 + 5  # ring fill + refills
    assert testing.count_ptx(lowered, "cp.async.bulk.tensor.2d.global.*") == 5 * 2  # one store per tile
    assert testing.count_ptx(lowered, "fence.proxy.async.shared::cta") == 5
    with pytest.raises(ValueError, match="group=2 does not divide the 3 block rows"):
        make_tma_transpose(192, sub=2, stages=3, ctas=4, group=2)
    with pytest.raises(ValueError, match="bytes of shared memory per CTA"):
        make_tma_transpose(256, sub=8, stages=6, ctas=1)
    if testing.has_nvcc():
        kernel = tvm_tirx.compile(func, target="cuda", arch="sm_90a")
        assert len(testing.assemble(kernel)) > 0


@pytest.mark.gpu
@pytest.mark.parametrize(
    "kwargs",
    [
        {"box_rows": 8, "stages": 3, "store_lag": 2, "pairs": 2, "ctas": 3, "l2_hint": "both"},
        {"box_rows": 8, "stages": 2, "store_lag": 0, "ctas": 2, "engine": "bulk", "l2_hint": "load"},
        {"box_rows": 16, "stages": 4, "store_lag": 1, "ctas": 5, "l2_promotion": 0},
    ],
)
def test_tma_copy_variants_on_gpu(torch_cuda, kwargs):
    torch = torch_cuda
    rows = kwargs["box_rows"] * 41  # 41 tiles: uneven rounds, every buffer reused
    kernel = tvm_tirx.compile(make_tma_copy(rows * COLS, **kwargs), target="cuda")
    a = torch.randn(rows, COLS, device="cuda")
    b = torch.zeros_like(a)
    kernel(a, b)
    torch.cuda.synchronize()
    assert torch.equal(a, b)


@pytest.mark.gpu
@pytest.mark.parametrize(
    "n, kwargs",
    [
        (192, {"sub": 2, "stages": 3, "ctas": 4, "group": 3}),
        (256, {"sub": 1, "stages": 4, "ctas": 5, "group": 8}),
        (256, {"sub": 8, "stages": 2, "ctas": 3, "group": 1}),
    ],
)
def test_persistent_tma_transpose_on_gpu(torch_cuda, n, kwargs):
    torch = torch_cuda
    kernel = tvm_tirx.compile(make_tma_transpose(n, **kwargs), target="cuda")
    a = torch.randn(n, n, device="cuda")
    b = torch.zeros_like(a)
    kernel(a, b)
    torch.cuda.synchronize()
    assert torch.equal(b, a.t())


@pytest.mark.gpu
def test_padded_64_tile_transpose_on_gpu(torch_cuda):
    torch = torch_cuda
    kernel = tvm_tirx.compile(make_transpose(256, 1, 64, 16), target="cuda")
    a = torch.randn(256, 256, device="cuda")
    b = torch.zeros_like(a)
    kernel(a, b)
    torch.cuda.synchronize()
    assert torch.equal(b, a.t())
