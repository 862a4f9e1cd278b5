"""The ``fence`` family (``fence.proxy.async``, ``fence.mbarrier_init``): the proxy rule.

Each ``Case`` is a kernel file that breaks one rule: ``docs/gen_errors.py`` runs it
and puts the message it raises on the error page (see :mod:`error_examples`).
"""

from __future__ import annotations

from . import PROTOCOL, Case, example

_STORE = "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group"


def _store_after_writes(fence: str, barrier: str) -> str:
    return example(f'''
        @T.function
        def kernel(B: T.Tensor((8, 32), "float32", align=16)):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=256))
            tile = T.alloc_shared((8, 32), "float32", align=128)
            one = T.alloc_local((1,), "float32")
            tid = T.cuda.thread_idx("x")
            one[0] = T.float32(1)
            T.cuda.tile.apply(T.ptx["st.shared.f32"], tile.sub[tid // 32, tid % 32 : tid % 32 + 1], one)
            {fence}
            {barrier}
            if tid == 0:
                T.cuda.tile.apply(T.ptx["{_STORE}"], B, tile, coords=(0, 0))
                T.ptx["cp.async.bulk.commit_group"]()
                T.ptx["cp.async.bulk.wait_group"](0)
    ''')


CASES = [
    Case(
        PROTOCOL,
        r"generic-proxy write not fenced before an async-proxy read: .*no fence.proxy.async between them",
        "TMA store of a tile written by st.shared, without fence.proxy.async",
        _store_after_writes("T.cuda.cta_sync()", "pass"),
        "lower",
        "``st.shared`` writes through the generic proxy; the TMA store reads through the async "
        "proxy, which does not see those writes until the writing threads execute "
        "``fence.proxy.async`` (PTX ISA 8.6, 9.7.13.4): the store may write stale data to ``B``.",
        "Every writing thread fences, then a barrier: ``T.ptx[\"fence.proxy.async.shared::cta\"]()`` "
        "and ``T.cuda.cta_sync()`` before thread 0 issues the store.",
    ),
    Case(
        PROTOCOL,
        r"generic-proxy write not fenced before an async-proxy read: .*no barrier after it",
        "fence.proxy.async without a barrier after it",
        _store_after_writes('T.ptx["fence.proxy.async.shared::cta"]()', "pass"),
        "lower",
        "Each thread fenced its own write, but thread 0 issues the store without waiting for the "
        "others: their writes (and fences) may not have happened yet.",
        "A barrier after the fence: ``T.cuda.cta_sync()`` (or a named barrier over the writers).",
    ),
]
