"""The seed kernel, from source to result: ``python -m tvm_tirx.demo``.

Compiles ``read_next_row`` (64 threads each load a 4-float row with
``ld.global.v4.b32``, exchange rows through shared memory, and store the next
thread's row).  With a CUDA GPU it runs the kernel on torch tensors and checks
``B == roll(A, -1, 0)``; without one it prints the PTX and assembles it for
``sm_90a`` with ``ptxas`` (through ``nvcc``).
"""

from __future__ import annotations

import sys

from tvm_tirx.script import tirx as T

import tvm_tirx
from tvm_tirx import testing


@T.function
def read_next_row(
    A: T.Tensor((64, 4), "float32", align=16),
    B: T.Tensor((64, 4), "float32", align=16),
):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tid = T.cuda.thread_idx("x")
    registers = T.alloc_local((4,), "float32", layout="default")
    shared = T.alloc_shared((64, 4), "float32", align=16)
    T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], registers, A.sub[tid, :])
    T.cuda.tile.apply(T.ptx["st.shared.v4.b32"], shared.sub[tid, :], registers)
    T.cuda.cta_sync()
    T.cuda.tile.apply(T.ptx["ld.shared.v4.b32"], registers, shared.sub[(tid + 1) % 64, :])
    T.cuda.tile.apply(T.ptx["st.global.v4.b32"], B.sub[tid, :], registers)


def main() -> int:
    """Run the demo; return the process exit status (0 = the documented result)."""
    if testing.has_cuda():
        import torch  # pylint: disable=import-outside-toplevel  # optional

        kernel = tvm_tirx.compile(read_next_row, target="cuda")
        print(f"compiled {kernel}")
        a = torch.randn(64, 4, dtype=torch.float32, device="cuda")
        b = torch.empty_like(a)
        kernel(a, b)
        torch.cuda.synchronize()
        torch.testing.assert_close(b, torch.roll(a, shifts=-1, dims=0), rtol=0, atol=0)
        print("GPU run: B == roll(A, -1, 0) on random input -- OK")
        return 0
    kernel = tvm_tirx.compile(read_next_row, target="cuda", arch="sm_90a")
    print(f"compiled {kernel} (no GPU here: printing PTX and assembling it)")
    print(kernel.ptx)
    if not testing.has_nvcc():
        print("nvcc is not on the PATH: cannot assemble", file=sys.stderr)
        return 1
    cubin = testing.assemble(kernel, "cubin")
    print(f"ptxas accepted the kernel for sm_90a: {len(cubin)}-byte cubin")
    return 0


if __name__ == "__main__":
    sys.exit(main())
