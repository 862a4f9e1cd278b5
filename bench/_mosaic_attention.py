"""JAX's Mosaic GPU FlashAttention-3 (``jax.experimental.pallas.ops.gpu.attention_mgpu``) as
a peer of ``bench/attention.py``, when JAX with a GPU backend is importable.

It takes float16 only (the issue's table says so: its shared buffers are declared f16), so
it runs on float16 copies of the same inputs, converted through DLPack (Q scaled by
``1 / sqrt(head_dim)``: the kernel applies no softmax scale of its own); its output is
checked against the float32 reference of :func:`bench.attention._reference_error` before it
is timed.  JAX runs on its own stream, so the time is wall-clock over ``runs`` calls
dispatched back to back and finished by ``block_until_ready`` (after a warm-up), divided by
``runs``: the same quantity as a median of CUDA events for a kernel of a millisecond or
more, slightly more for shorter ones.
"""

from __future__ import annotations

import os
import time

#: Mosaic GPU's tile sizes per head_dim (block_q rows per consumer warpgroup, block_kv keys
#: per stage, stages), as JAX's own attention benchmark sets them.
CONFIGS = {64: (64, 128, 2), 128: (64, 128, 2), 256: (64, 64, 2)}


def _jax():
    """``(jax, attention_mgpu)`` or a reason string when they cannot run here."""
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # leave the GPU's memory to torch
    try:
        import jax  # pylint: disable=import-outside-toplevel
        from jax.experimental.pallas.ops.gpu import attention_mgpu  # pylint: disable=import-outside-toplevel
    except Exception as err:  # noqa: BLE001  (any import failure means: no peer)
        return f"not importable ({type(err).__name__}: {err})"
    if jax.default_backend() != "gpu":
        return f"JAX's backend is {jax.default_backend()}, not gpu"
    return jax, attention_mgpu


def mosaic_ms(torch, q, k, v, causal: bool, runs: int, error):
    """``(ms, O error)`` of Mosaic GPU's kernel on float16 copies of ``q, k, v``
    ((batch, seq, heads, head_dim)), or ``(None, reason)`` when it cannot run them.

    ``error(o)`` is the caller's max |O - float32 reference| of an output in the same
    layout; a result above 2e-2 is reported as a reason, not timed."""
    found = _jax()
    if isinstance(found, str):
        return None, found
    jax, mgpu = found
    block_q, block_kv, stages = CONFIGS.get(q.shape[-1], (64, 128, 2))
    try:
        config = mgpu.TuningConfig(block_q=block_q, block_kv=block_kv, max_concurrent_steps=stages, causal=causal)
        # the kernel applies no softmax scale: Q is scaled by 1 / sqrt(head_dim) first (untimed)
        scaled = (q.float() * q.shape[-1] ** -0.5).half()
        args = [jax.dlpack.from_dlpack(t.half().contiguous()) for t in (scaled, k, v)]
        fn = jax.jit(lambda a, b, c: mgpu.attention(a, b, c, config))
        out = fn(*args).block_until_ready()
    except Exception as err:  # noqa: BLE001  (a shape or config it refuses: no number for this row)
        return None, f"{type(err).__name__}: {str(err).splitlines()[0][:120]}"
    err_o = error(torch.from_dlpack(out))
    if err_o > 2e-2:
        return None, f"error O {err_o:.1e} against float32"
    start = time.perf_counter()
    for _ in range(runs):
        out = fn(*args)
    out.block_until_ready()
    return (time.perf_counter() - start) * 1e3 / runs, err_o
