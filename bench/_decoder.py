"""A Llama-style decoder block, in torch and in Relax, for bench/model.py (issue 28).

RMSNorm, Q/K/V projections, rotary embedding, causal grouped-query attention, the
output projection and a residual add; RMSNorm, the SwiGLU MLP (``down(silu(gate(h)) *
up(h))``) and a residual add.  Weights are bf16, ``(out, in)`` as ``nn.Linear`` keeps them.
The torch block computes with torch (``impl="torch"``) or with this package's operators
(``impl="tvm_tirx"``: ``ops.linear`` with the residual adds fused into the output and down
projections, ``ops.attention``, and ``ops.glu_linear`` for the gate and up projections with
the SiLU and the product fused); the Relax block is the same
program written with Relax operators (``R.matmul``, ``R.nn.attention``, ``R.nn.rms_norm``)
with a symbolic batch and sequence, for apache-tvm's own lowering, its cuBLAS offload, or
ours (``partition_for_tvm_tirx``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import tvm
from tvm import relax, tirx

__all__ = ["BlockConfig", "LLAMA3_8B", "rope_tables", "make_weights", "DecoderBlock", "relax_block", "WEIGHTS"]

#: the weights in the order the Relax function takes them, after x, cos, sin
WEIGHTS = ("norm1", "wq", "wk", "wv", "wo", "norm2", "w_gate", "w_up", "w_down")


@dataclass(frozen=True)
class BlockConfig:
    """Sizes of one block (elements)."""

    hidden: int = 4096
    heads: int = 32
    kv_heads: int = 8
    head_dim: int = 128
    inter: int = 14336
    eps: float = 1e-5
    theta: float = 500000.0


LLAMA3_8B = BlockConfig()


def rope_tables(cfg: BlockConfig, seq: int, device="cpu", dtype=torch.bfloat16):
    """``(cos, sin)``, each ``(seq, head_dim)``: angle ``pos * theta**(-2 i / head_dim)``
    for ``i < head_dim / 2``, repeated over the two halves (the rotate-half convention)."""
    inv = cfg.theta ** (-torch.arange(0, cfg.head_dim, 2, dtype=torch.float64) / cfg.head_dim)
    angles = torch.arange(seq, dtype=torch.float64)[:, None] * inv[None, :]
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos().to(dtype).to(device), angles.sin().to(dtype).to(device)


def make_weights(cfg: BlockConfig, device="cpu", seed=0) -> dict:
    """Random bf16 weights scaled as an initialised model's (``1 / sqrt(in)``), norms 1."""
    g = torch.Generator().manual_seed(seed)
    d, hd = cfg.hidden, cfg.head_dim

    def lin(out, inp):
        return (torch.randn(out, inp, generator=g) / inp**0.5).to(torch.bfloat16).to(device)

    return {"norm1": torch.ones(d, dtype=torch.bfloat16, device=device), "wq": lin(cfg.heads * hd, d),
            "wk": lin(cfg.kv_heads * hd, d), "wv": lin(cfg.kv_heads * hd, d), "wo": lin(d, cfg.heads * hd),
            "norm2": torch.ones(d, dtype=torch.bfloat16, device=device), "w_gate": lin(cfg.inter, d),
            "w_up": lin(cfg.inter, d), "w_down": lin(d, cfg.inter)}


def _rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


class DecoderBlock(torch.nn.Module):
    """The block in torch; ``impl`` ``"torch"`` or ``"tvm_tirx"`` (this package's ops)."""

    def __init__(self, cfg: BlockConfig, weights: dict, impl: str = "torch"):
        super().__init__()
        self.cfg, self.impl = cfg, impl
        for name, w in weights.items():
            self.register_buffer(name, w)

    def _linear(self, x, w, residual=None):
        """``x @ w^T (+ residual)``: with ``impl="tvm_tirx"`` the residual is added by the GEMM."""
        if self.impl == "tvm_tirx":
            from tvm_tirx import ops  # pylint: disable=import-outside-toplevel

            return ops.linear(x, w, residual=residual)
        y = torch.nn.functional.linear(x, w)
        return y if residual is None else residual + y

    def _swiglu(self, h):
        """``silu(h @ w_gate^T) * (h @ w_up^T)``: with ``impl="tvm_tirx"`` one gated GEMM."""
        if self.impl == "tvm_tirx":
            from tvm_tirx import ops  # pylint: disable=import-outside-toplevel

            return ops.glu_linear(h, self.w_gate, self.w_up, "silu")
        return torch.nn.functional.silu(self._linear(h, self.w_gate)) * self._linear(h, self.w_up)

    def _attention(self, q, k, v):
        if self.impl == "tvm_tirx":
            from tvm_tirx import ops  # pylint: disable=import-outside-toplevel

            return ops.attention(q, k, v, causal=True)
        o = torch.nn.functional.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                             is_causal=True, enable_gqa=True)
        return o.transpose(1, 2)

    def forward(self, x, cos, sin):
        cfg = self.cfg
        b, s, _ = x.shape
        h = torch.nn.functional.rms_norm(x, (cfg.hidden,), self.norm1, cfg.eps)
        q = self._linear(h, self.wq).view(b, s, cfg.heads, cfg.head_dim)
        k = self._linear(h, self.wk).view(b, s, cfg.kv_heads, cfg.head_dim)
        v = self._linear(h, self.wv).view(b, s, cfg.kv_heads, cfg.head_dim)
        c, sn = cos[None, :, None, :], sin[None, :, None, :]
        q, k = q * c + _rotate_half(q) * sn, k * c + _rotate_half(k) * sn
        a = self._attention(q.contiguous(), k.contiguous(), v).reshape(b, s, cfg.heads * cfg.head_dim)
        x = self._linear(a, self.wo, residual=x)
        h = torch.nn.functional.rms_norm(x, (cfg.hidden,), self.norm2, cfg.eps)
        return self._linear(self._swiglu(h), self.w_down, residual=x)


def _linear_r(bb, x, w):
    return bb.emit(relax.op.matmul(x, relax.op.permute_dims(w)))


def _rope_r(bb, x, cos, sin, half: int):
    parts = bb.emit(relax.op.split(x, [half], axis=3))
    lo, hi = relax.TupleGetItem(parts, 0), relax.TupleGetItem(parts, 1)
    rotated = bb.emit(relax.op.concat([relax.op.negative(hi), lo], axis=3))
    return bb.emit(relax.op.add(relax.op.multiply(x, cos), relax.op.multiply(rotated, sin)))


def relax_block(cfg: BlockConfig, dtype: str = "bfloat16") -> tvm.IRModule:
    """The block as a Relax function ``main(x (b, s, hidden), cos (s, head_dim), sin, *WEIGHTS)``
    with symbolic ``b`` and ``s``.  K and V heads are repeated to the query heads before
    ``R.nn.attention``: apache-tvm 0.27's own lowering of ``R.nn.attention`` with fewer K/V
    heads than query heads computes wrong values (99.9% of the block's outputs off, on
    llvm), so every route gets the repeated form (our offload reads K and V before the repeats:
    grouped-query attention).  ``dtype`` of every tensor (float32 checks the program's semantics)."""
    b, s = tirx.Var("b", "int64"), tirx.Var("s", "int64")
    bf16 = dtype
    hd, d = cfg.head_dim, cfg.hidden
    shapes = {"norm1": [d], "wq": [cfg.heads * hd, d], "wk": [cfg.kv_heads * hd, d], "wv": [cfg.kv_heads * hd, d],
              "wo": [d, cfg.heads * hd], "norm2": [d], "w_gate": [cfg.inter, d], "w_up": [cfg.inter, d],
              "w_down": [d, cfg.inter]}
    x = relax.Var("x", relax.TensorType([b, s, d], bf16))
    cos, sin = (relax.Var(n, relax.TensorType([s, hd], bf16)) for n in ("cos", "sin"))
    w = {n: relax.Var(n, relax.TensorType(shapes[n], bf16)) for n in WEIGHTS}
    bb = relax.BlockBuilder()
    with bb.function("main", [x, cos, sin, *(w[n] for n in WEIGHTS)]):
        with bb.dataflow():
            h = bb.emit(relax.op.nn.rms_norm(x, w["norm1"], axes=[-1], epsilon=cfg.eps))
            q = bb.emit(relax.op.reshape(_linear_r(bb, h, w["wq"]), [b, s, cfg.heads, hd]))
            k = bb.emit(relax.op.reshape(_linear_r(bb, h, w["wk"]), [b, s, cfg.kv_heads, hd]))
            v = bb.emit(relax.op.reshape(_linear_r(bb, h, w["wv"]), [b, s, cfg.kv_heads, hd]))
            c4, s4 = (bb.emit(relax.op.reshape(t, [1, s, 1, hd])) for t in (cos, sin))
            q, k = _rope_r(bb, q, c4, s4, hd // 2), _rope_r(bb, k, c4, s4, hd // 2)
            group = cfg.heads // cfg.kv_heads
            k, v = (bb.emit(relax.op.repeat(t, group, axis=2)) for t in (k, v))
            a = bb.emit(relax.op.nn.attention(q, k, v, causal_mask="TopLeft"))
            a = bb.emit(relax.op.reshape(a, [b, s, cfg.heads * hd]))
            x1 = bb.emit(relax.op.add(x, _linear_r(bb, a, w["wo"])))
            h2 = bb.emit(relax.op.nn.rms_norm(x1, w["norm2"], axes=[-1], epsilon=cfg.eps))
            gate = bb.emit(relax.op.nn.silu(_linear_r(bb, h2, w["w_gate"])))
            mlp = bb.emit(relax.op.multiply(gate, _linear_r(bb, h2, w["w_up"])))
            out = bb.emit_output(relax.op.add(x1, _linear_r(bb, mlp, w["w_down"])))
        bb.emit_func_output(out)
    return bb.get()
