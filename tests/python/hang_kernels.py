"""Kernels that hang on purpose, for the hang detector (``options={"detect_hangs": ...}``).

Their faults are run-time values, which the static protocol checks cannot see: a byte
count passed as a parameter, an init count passed as a parameter.
"""

from tvm_tirx.script import tirx as T

LOAD2D = "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"


@T.function
def tma_with_byte_count(A: T.Tensor((64, 64), "float32", align=16), B: T.Tensor((64, 64), "float32", align=16),
                        tx: T.uint32):
    # the box brings 16384 bytes; with tx = 4096 the barrier's phase never completes
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
    tile = T.alloc_shared((64, 64), "float32", align=128)
    bar = T.alloc_shared((1,), "uint64", align=8)
    tid = T.cuda.thread_idx("x")
    if tid == 0:
        T.cuda.tile.apply(T.ptx["mbarrier.init.shared::cta.b64"], bar, count=T.uint32(1))
        T.ptx["fence.mbarrier_init.release.cluster"]()
    T.cuda.cta_sync()
    if tid == 0:
        T.cuda.tile.apply(T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"], bar, tx=tx)
        T.cuda.tile.apply(T.ptx[LOAD2D], tile, A, mbar=bar, coords=(0, 0))
    T.cuda.mbarrier_wait_phase(bar, 0)
    for q in T.unroll(32):
        B[q * 2 + tid // 64, tid % 64] = tile[q * 2 + tid // 64, tid % 64]


@T.function
def arrivals(B: T.Tensor((128,), "float32"), count: T.uint32):
    # one thread arrives; with count = 2 the phase never completes (the kernel's own spin loop)
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
    bar = T.alloc_shared((1,), "uint64", align=8)
    tid = T.cuda.thread_idx("x")
    done = T.alloc_local((1,), "uint32")
    if tid == 0:
        T.cuda.tile.apply(T.ptx["mbarrier.init.shared::cta.b64"], bar, count=count)
    T.cuda.cta_sync()
    if tid == 0:
        T.cuda.tile.apply(T.ptx["mbarrier.arrive.shared::cta.b64"], bar)
    done[0] = T.uint32(0)
    while done[0] == T.uint32(0):
        T.cuda.tile.apply(T.ptx["mbarrier.try_wait.parity.shared::cta.b64"], done, bar, phase=T.uint32(0))
    B[tid] = T.float32(1)
