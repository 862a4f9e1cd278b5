"""Attention in torch by blocks of query rows: the operator's fallback forward and its backward.

Both walk the query rows in blocks of :func:`query_block` rows, so the scores of one
block, ``(batch, heads, rows, keys)``, are the only tensors that grow with the keys: the
memory is ``O(seq_len)`` for a fixed :data:`SCORE_BYTES`, where the whole score matrix
(``batch x heads x seq_len**2`` elements) needed ``O(seq_len**2)`` -- about 17 GB for 8 x
32 heads at 4096 positions in float32.  A block holds complete rows, so the softmax of
each row is exact in that block (no running max): the backward recomputes ``P`` and uses
``D = rowsum(P * dP)`` (equal to FlashAttention's ``rowsum(dO * O)`` for the exact ``O``),
so the gradients are those of the computed function, also in float64 (``gradcheck``;
the LSE is then float64 too).

The query heads of one key/value head (GQA) are folded into the rows of one product
(``(batch, kv_heads, group x rows, head_dim)``), so K and V are never repeated per head.
Arithmetic is float32, float64 for float64 inputs.
"""

from __future__ import annotations

import torch

from .attention_checks import as_bshd

__all__ = ["SCORE_BYTES", "accumulator", "query_block", "forward", "backward"]

#: Bytes the score-sized tensors of one block may take (four are alive at once in the
#: backward: the scores or P, dP, dS and a product's temporary).
SCORE_BYTES = 1 << 28


def accumulator(dtype):
    """The dtype the blocks compute in, and the LSE's: float64 for float64 inputs, else
    float32."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def query_block(batch: int, heads: int, q_len: int, k_len: int, itemsize: int) -> int:
    """Query rows per block: the most whose four score-sized tensors, ``batch x heads x
    rows x k_len`` elements of ``itemsize`` bytes each, fit :data:`SCORE_BYTES`; at least
    1, at most ``q_len`` (at least 1 for an empty sequence, batch or head count)."""
    per_row = 4 * max(batch * heads, 1) * max(k_len, 1) * itemsize
    return max(1, min(max(q_len, 1), SCORE_BYTES // per_row))


def _grouped(t, kv_heads: int, layout: str, acc):
    """``t`` (q, O or dO in ``layout``) as ``(batch, kv_heads, group, seq, head_dim)`` in
    ``acc``: query head ``h`` is group member ``h % group`` of key/value head ``h // group``
    (the order of ``repeat_interleave``, as SDPA's GQA reads it)."""
    t = as_bshd(t, layout).to(acc)
    return t.unflatten(2, (kv_heads, t.shape[2] // kv_heads)).permute(0, 2, 3, 1, 4)


def _keys(t, layout: str, acc):
    """``t`` (k or v) as ``(batch, kv_heads, seq, head_dim)`` in ``acc``."""
    return as_bshd(t, layout).to(acc).transpose(1, 2)


def _rows(t, i0: int, i1: int):
    """Rows ``i0:i1`` of a grouped ``(b, kv, g, seq, ...)`` tensor as ``(b, kv, g * rows, ...)``."""
    return t[:, :, :, i0:i1].flatten(2, 3)


def _unrows(t, group: int, rows: int):
    """The inverse of :func:`_rows` on a block: ``(b, kv, g * rows, ...)`` as ``(b, kv, g, rows, ...)``."""
    return t.unflatten(2, (group, rows))


def _scores(qb, k, i0: int, i1: int, causal: bool, scale: float):
    """Scaled scores of query rows ``i0:i1`` (grouped: ``qb`` is ``(b, kv, g * rows, d)``)
    against the keys they may see (``:i1`` when causal): ``(b, kv, g * rows, keys)``,
    ``-inf`` above the diagonal."""
    keys = k[:, :, :i1] if causal else k
    s = (qb @ keys.transpose(-1, -2)) * scale
    if causal:
        rows = torch.arange(i0, i1, device=s.device)
        above = torch.arange(keys.shape[2], device=s.device)[None, :] > rows[:, None]  # (rows, keys)
        s = _unrows(s, qb.shape[2] // (i1 - i0), i1 - i0).masked_fill_(above, float("-inf")).flatten(2, 3)
    return s


def _blocks(q, k, layout: str):
    """``(kv_heads, group, [(i0, i1), ...])``: the query blocks of :func:`query_block` rows."""
    b, n, h, _ = as_bshd(q, layout).shape
    _, k_len, kv_heads, _ = as_bshd(k, layout).shape
    rows = query_block(b, h, n, k_len, accumulator(q.dtype).itemsize)
    return kv_heads, h // kv_heads, [(i, min(i + rows, n)) for i in range(0, n, rows)]


def forward(q, k, v, out, causal: bool, scale: float, layout: str):
    """Write ``softmax(scale * q k^T) v`` into ``out`` and return the LSE.

    Parameters
    ----------
    q, k, v : torch.Tensor
        In ``layout`` (``"bshd"``: ``(batch, seq, heads, head_dim)``; ``"bhsd"``: its
        transpose), k and v with ``kv_heads`` heads dividing ``heads``; any float dtype.
    out : torch.Tensor
        Like ``q`` (any strides): receives O in its own dtype.
    causal : bool
        Query ``i`` sees keys ``<= i``.
    scale : float
        The softmax scale.
    layout : str
        ``"bshd"`` or ``"bhsd"``.

    Returns
    -------
    torch.Tensor
        LSE ``(batch, heads, seq)`` in :func:`accumulator`'s dtype (float32, float64 for
        float64 inputs): the natural log of each row's sum of ``exp(scale * q.k)``.
    """
    acc = accumulator(q.dtype)
    kv_heads, group, blocks = _blocks(q, k, layout)
    qg, kk, vv = _grouped(q, kv_heads, layout, acc), _keys(k, layout, acc), _keys(v, layout, acc)
    og = as_bshd(out, layout).unflatten(2, (kv_heads, group)).permute(0, 2, 3, 1, 4)  # a view of out
    lse = torch.empty(qg.shape[:4], dtype=acc, device=q.device)
    for i0, i1 in blocks:
        s = _scores(_rows(qg, i0, i1), kk, i0, i1, causal, scale)
        row_lse = torch.logsumexp(s, dim=-1, keepdim=True)
        o = torch.exp_(s.sub_(row_lse)) @ (vv[:, :, :i1] if causal else vv)
        og[:, :, :, i0:i1] = _unrows(o, group, i1 - i0)
        lse[:, :, :, i0:i1] = _unrows(row_lse.squeeze(-1), group, i1 - i0)
    return lse.flatten(1, 2)


def backward(q, k, v, grad_o, grad_lse, causal: bool, scale: float, layout: str):
    """The gradients ``(dq, dk, dv)`` of :func:`forward`'s ``(O, LSE)``, by query blocks.

    Parameters
    ----------
    q, k, v, causal, scale, layout
        As :func:`forward`.
    grad_o : torch.Tensor or None
        The gradient of O (like ``q``), or None where O was not used.
    grad_lse : torch.Tensor or None
        The gradient of the LSE ``(batch, heads, seq)``, or None.

    Returns
    -------
    tuple[torch.Tensor, torch.Tensor, torch.Tensor]
        ``dq``, ``dk``, ``dv`` of the shapes (in ``layout``) and dtypes of q, k, v.

    Notes
    -----
    Per block of rows: ``P = exp(S - rowlse(S))``, ``dP = dO V^T``, ``dS = P * (dP -
    rowsum(P * dP) + dLSE)`` (the softmax's and the log-sum-exp's derivatives), then
    ``dQ = scale dS K``, ``dK += scale dS^T Q``, ``dV += P^T dO``.
    """
    acc = accumulator(q.dtype)
    kv_heads, group, blocks = _blocks(q, k, layout)
    qg, kk, vv = _grouped(q, kv_heads, layout, acc), _keys(k, layout, acc), _keys(v, layout, acc)
    dog = None if grad_o is None else _grouped(grad_o, kv_heads, layout, acc)
    dlse = None if grad_lse is None else grad_lse.to(acc).unflatten(1, (kv_heads, group))
    dq, dk, dv = torch.zeros_like(qg), torch.zeros_like(kk), torch.zeros_like(vv)
    for i0, i1 in blocks:
        keys = i1 if causal else kk.shape[2]
        qb = _rows(qg, i0, i1)
        s = _scores(qb, kk, i0, i1, causal, scale)
        p = torch.exp_(s.sub_(torch.logsumexp(s, dim=-1, keepdim=True)))  # s's storage
        ds = torch.zeros_like(p)
        if dog is not None:
            dob = _rows(dog, i0, i1)
            dv[:, :, :keys] += p.transpose(-1, -2) @ dob
            dp = dob @ vv[:, :, :keys].transpose(-1, -2)
            ds = dp.sub_((p * dp).sum(-1, keepdim=True))
        if dlse is not None:
            ds.add_(_rows(dlse.unsqueeze(-1), i0, i1))
        ds.mul_(p)
        dq[:, :, :, i0:i1] = _unrows((ds @ kk[:, :, :keys]).mul_(scale), group, i1 - i0)
        dk[:, :, :keys] += (ds.transpose(-1, -2) @ qb).mul_(scale)
    return _out_grads(q, k, v, (dq, dk, dv), layout)


def _out_grads(q, k, v, grads, layout: str):
    """The grouped float gradients in the layouts and dtypes of q, k, v."""
    dq, dk, dv = grads
    dq = as_bshd(dq.permute(0, 3, 1, 2, 4).flatten(2, 3).to(q.dtype), layout)
    return dq, as_bshd(dk.transpose(1, 2).to(k.dtype), layout), as_bshd(dv.transpose(1, 2).to(v.dtype), layout)
