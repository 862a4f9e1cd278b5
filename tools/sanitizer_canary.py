"""Kernels with a deliberate bug each, so that tools/sanitize.sh can show the sanitizer sees bugs.

Both are legal tile code whose fault is the author's, which is exactly what the contract
cannot catch:

- ``memcheck``: a store whose row comes from memory, under ``pred=`` that is always true,
  writes one row past the end of the tensor;
- ``racecheck``: thread 0 stores to shared memory and every thread loads it back with no
  ``T.cuda.cta_sync()`` in between (the contract inserts no barrier).

``python tools/sanitizer_canary.py memcheck|racecheck`` runs one on the GPU; run bare it
completes normally, under compute-sanitizer the matching tool must report it.
"""

import sys

import torch

import tvm_tirx
from tvm_tirx.script import tirx as T


@T.function
def store_past_the_end(A: T.Tensor((64, 4), "float32", align=16), Row: T.Tensor((1,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
    r = T.alloc_local((4,), "float32")
    T.cuda.tile.apply(T.ptx["mov.b32"], r.view(4, 1), T.float32(1))
    T.cuda.tile.apply(T.ptx["st.global.v4.b32"], A.sub[Row[0], :], r, pred=Row[0] < 1000)


@T.function
def unsynchronised_shared(Out: T.Tensor((64, 4), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tid = T.cuda.thread_idx("x")
    smem = T.alloc_shared((4,), "float32", align=16)
    r = T.alloc_local((4,), "float32")
    T.cuda.tile.apply(T.ptx["mov.b32"], r.view(4, 1), T.float32(2))
    if tid == 0:
        T.cuda.tile.apply(T.ptx["st.shared.v4.b32"], smem, r)
    # missing: T.cuda.cta_sync()
    T.cuda.tile.apply(T.ptx["ld.shared.v4.b32"], r, smem)
    T.cuda.tile.apply(T.ptx["st.global.v4.b32"], Out.sub[tid, :], r)


def main(which: str) -> None:
    if which == "memcheck":
        kernel = tvm_tirx.compile(store_past_the_end)
        a = torch.zeros(64, 4, device="cuda")
        kernel(a, torch.tensor([64], dtype=torch.int32, device="cuda"))
    elif which == "racecheck":
        kernel = tvm_tirx.compile(unsynchronised_shared)
        kernel(torch.zeros(64, 4, device="cuda"))
    else:
        raise SystemExit("usage: sanitizer_canary.py memcheck|racecheck")
    torch.cuda.synchronize()
    print(f"canary {which}: ran")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "")
