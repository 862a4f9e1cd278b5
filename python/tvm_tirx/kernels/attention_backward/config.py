"""The attention backward kernel's geometry, its options and the checks on them.

:class:`BackwardConfig` holds one kernel's sizes and options, validated once, and what
follows from them (the walk over query blocks, the wgmma opcodes, shared-memory bytes);
the other modules of :mod:`tvm_tirx.kernels.attention_backward` read it.  ``batch`` and
``seq_len`` are a Python ``int`` or an int32 run-time extent (``T.dynamic("L")``).

Budgets (bf16 and f16 alike; a consumer warpgroup owns ``WG_K = 64`` keys, a query block
has ``BQ = 64`` rows -- 128 with ``dq_split="rows"``, its own item below --, ``D`` =
head_dim):

* registers of a consumer thread (fp32 accumulators of a warpgroup's 128 threads, PTX ISA 9.7.15.5.1.1):
  ``S^T`` and ``dP^T`` (64 x BQ) 32 each, ``dV`` and ``dK`` (64 x D) ``D / 2`` each, ``dQ`` (BQ x D)
  ``D / 2``, the packed ``P^T`` and ``dS^T`` A fragments 16 each.  Not all are live at once: the schedule
  (:mod:`.consumer`) waits for ``dV`` and ``dK`` before it issues ``dQ``, so at D 128 the peak is
  ``S + dP + dV + dK`` = 32 + 32 + 64 + 64 = 192 (while ``P`` and ``dS`` are computed; their LSE and Dsum
  values are read from shared memory as they are used) or ``dV + dK + dQ`` = 192 (while ``dQ`` runs), plus
  addresses and descriptors; at D 64 128 and 96.  The consumers take :data:`CONSUMER_REGISTERS` = 232 per
  thread by ``setmaxnreg``, the producer keeps :data:`PRODUCER_REGISTERS` = 40 (128 x (40 + 2 x 232) = 64512
  <= 65536, PTX ISA 9.7.19.5; with 24 the producer's loops spilled); ptxas 13.0 spills in no configuration the
  tests build.  On the way there (D 128, 240 registers) ``dQ`` issued with ``dV`` and ``dK`` and the block's
  32 LSE / Dsum values read from global memory into registers spilled 136 bytes and serialised the wgmmas
  (C7512); ``dQ`` issued after the other two retire, and the values read from shared memory, ended both.
  head_dim 256 is refused: ``dV`` and ``dK`` of 64 keys alone would take 256 registers per thread, over the
  255 a thread may have (FlashAttention-3 blocks otherwise there). With ``dq_split="columns"`` a consumer's
  ``dQ`` is ``BQ x D/2``: ``D / 4`` registers (32 at D 128), so the ``dQ`` phase peaks at ``dV + dK + dQ`` =
  160 at D 128 (80 at D 64) and the peak is the score phase's 192 (128).
* shared memory (bytes; 128-byte swizzled tiles, 1024-byte aligned): K and V of the CTA's 128 keys
  ``2 x 128 x D x 2``; per ring stage a Q and a dO block ``2 x 64 x D x 2`` and the 64 LSE and 64 Dsum values
  (512); ``dS^T`` of each consumer ``2 x 64 x 64 x 2`` = 16 KiB (the A operand of ``dQ = dS K``); the fp32
  ``dQ`` block of each consumer ``2 x 64 x D x 4`` (the source of the TMA reduce-add); the mbarriers
  ``8 x (1 + 2 stages)``; 1 KiB to align the tiles (:attr:`BackwardConfig.smem_bytes`).  D 128: 181,784 (1
  stage), 215,080 (2, the default); 3 stages would need 248,376, over the 232,448 a CTA may have. D 64: 99,864
  (1) to 150,600 (4 stages).  With ``dq_split="columns"`` the ``dQ`` tiles halve (``2 x 64 x D/2 x 4``;
  ``sds`` stays one tile per consumer, :mod:`.exchange`): D 128: 149,016 (1), 182,312 (2), 215,608 (3; 4 would
  need 248,904); D 64: 83,480 (1) to 134,216 (4).  FlashAttention-3 blocks 64 (causal) or 80 queries x 128
  keys at D 128 and 128 x 128 at D 64; this kernel 64 x 128 at both, or 128 x 128 with ``"rows"``.
* ``dq_split="rows"``: query blocks of :data:`BQ_ROWS` = 128, so ``S^T`` and ``dP^T`` (64
  x 128) take 64 registers each and the peak is ``S + dP + dV + dK`` = 64 + 64 + 32 + 32
  = 192 at D 64; each consumer's ``dQ`` is one 64-row half of the block (64 x D over all
  128 keys, 32 registers).  Shared memory: a stage holds 128 Q and dO rows, ``sds`` 2 x 64
  x 128 x 2: 133,144 (1 stage) to 200,760 (3); 4 would need 234,568.  No spills: the mask
  keeps no per-register index live (:mod:`.gradients`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import tvm
from tvm.script import tirx as T

from ..attention.config import CHUNK, DTYPES, GRID_Z, LOG2E, SMEM_LIMIT, AttentionSizes, check_heads, check_numerics
from ..extents import MAX_ELEMENTS, is_int
from ..gemm.operands import Operand
from ..parts.ring import Ring

__all__ = ["BQ", "BQ_ROWS", "DQ_ROWS", "BK", "WG_K", "CONSUMERS", "FILLS", "HEAD_DIMS", "DQ_SPLITS",
           "PRODUCER_REGISTERS", "CONSUMER_REGISTERS", "BackwardConfig", "takes_scores_ahead"]

BQ = 64  # query rows per block with dq_split "keys" / "columns" (the N of S^T and dP^T, the M of dQ)
#: query rows per block with ``dq_split="rows"`` (head_dim 64): the N of ``S^T`` and ``dP^T``
BQ_ROWS = 128
#: query rows of a consumer's ``dQ`` block (the M of one wgmma), whatever the split
DQ_ROWS = 64
WG_K = 64  # keys per consumer warpgroup (the M of S^T, dP^T, dV, dK)
CONSUMERS = 2
BK = WG_K * CONSUMERS  # keys per CTA
HEAD_DIMS = (64, 128)
#: how the two consumers share ``dQ`` (:mod:`.exchange`): by their 64 keys, by head_dim columns, or
#: (query blocks of :data:`BQ_ROWS`) by the block's two 64-row halves
DQ_SPLITS = ("keys", "columns", "rows")
PRODUCER_REGISTERS = 40
CONSUMER_REGISTERS = 232
#: with ``overlap``, the most registers of a consumer thread that ``dV``, ``dK``, ``dQ`` and the
#: packed ``P^T`` / ``dS^T`` may take for ``dV`` to stay in flight while ``dQ`` and ``dK`` are
#: issued: ptxas 13.0 serialised the wgmmas (C7512) with the 192 of head_dim 128 (so there ``dV``
#: is waited for first), not with the 112 of head_dim 64
IN_FLIGHT_REGISTERS = 112
DQ_BOX = 32  # float32 columns per TMA reduce box: one 128-byte swizzle row
#: arrivals that fill a ring stage: the TMA thread's ``arrive.expect_tx`` and the 32 lanes
#: that copy the LSE and Dsum values (:func:`.producer.make_row_copier`)
FILLS = 1 + 32


def takes_scores_ahead(overlap: bool, deterministic: bool, head_dim: int) -> bool:
    """Whether the kernel is built with ``scores_ahead=True`` and these options: it needs
    ``overlap``, and the deterministic kernel at head_dim 128 spilled 8 bytes with it (ptxas 13.0)."""
    return overlap and not (deterministic and head_dim == 128)


def _check_extent(name: str, value):
    if is_int(value) and 1 <= value <= 2**31 - 1 - BK:
        return
    if isinstance(value, tvm.tirx.Var) and str(value.ty.dtype) == "int32":
        return
    kind = f" of dtype {value.ty.dtype}" if isinstance(value, tvm.tirx.Var) else ""
    raise ValueError(f"{name}: expected a positive int below 2**31 - {BK} or an int32 run-time extent (T.dynamic), "
                     f"found {value!r}{kind}")


@dataclass(frozen=True)
class BackwardConfig(AttentionSizes):  # pylint: disable=too-many-instance-attributes
    """One attention backward kernel's sizes and options, checked when it is made; the
    fields are :func:`~tvm_tirx.kernels.attention_backward.make_attention_backward`'s
    parameters.

    Raises
    ------
    ValueError
        A head_dim other than the ints 64 and 128 (256 does not fit the registers: see the
        module docstring); a dtype other than bfloat16 / float16; ``heads`` not a multiple
        of ``kv_heads``; a size that is not a positive int or an int32 run-time extent;
        more than 65535 batch entries (the grid's z axis; with ``longest_first``, batch x
        ``kv_heads / section``);
        static sizes of more than :data:`~tvm_tirx.kernels.extents.MAX_ELEMENTS` elements
        in Q; ``stages`` outside 1..4 or more shared memory than a CTA has; a ``scale``
        that is not a positive finite number; ``causal`` or ``deterministic`` not a bool;
        ``dq_split`` not one of :data:`DQ_SPLITS`; ``overlap`` not a bool, or True with
        ``dq_split="keys"``; ``dq_split="rows"`` at a head_dim other than 64 or with
        ``deterministic``; ``longest_first`` not a bool, or True with more than 65535
        key blocks; ``section`` set without ``longest_first``, or not an int dividing
        ``kv_heads``; ``scores_ahead`` not a bool, or True without ``overlap`` or with
        ``deterministic`` at head_dim 128.
    """

    dq_split: str = "keys"
    deterministic: bool = False
    overlap: bool = False
    longest_first: bool = False
    section: int | None = None
    scores_ahead: bool = False

    def __post_init__(self):
        self._check_sizes()
        self._check_options()
        if self.smem_bytes > SMEM_LIMIT:
            raise ValueError(f"stages={self.stages}: the kernel needs {self.smem_bytes} bytes of shared memory at "
                             f"head_dim {self.head_dim}, more than the {SMEM_LIMIT} a CTA may have; use fewer stages")

    def _check_sizes(self):
        _check_extent("batch", self.batch)
        _check_extent("seq_len", self.seq_len)
        check_heads(self.heads, self.kv_heads)
        self._check_section()
        if is_int(self.batch) and self.batch * self.sections > GRID_Z:
            per = f": batch x {self.sections} sections" if self.sections > 1 else ""
            raise ValueError(f"batch: expected at most {GRID_Z // self.sections} (the grid's z axis{per}), "
                             f"found {self.batch}")
        if type(self.head_dim) is not int or self.head_dim not in HEAD_DIMS:  # noqa: E721  (not bool, not float)
            why = (" (256: the fp32 dK and dV accumulators of 64 keys would take 256 registers per thread)"
                   if self.head_dim == 256 else "")
            raise ValueError(f"head_dim: expected one of {list(HEAD_DIMS)} (an int), found {self.head_dim!r}{why}")
        if is_int(self.batch) and is_int(self.seq_len):
            elements = self.batch * self.seq_len * self.heads * self.head_dim
            if elements > MAX_ELEMENTS:
                raise ValueError(f"batch x seq_len x heads x head_dim = {elements} elements: the kernel indexes Q, "
                                 f"dO and dQacc with int32 offsets, so at most {MAX_ELEMENTS}")

    def _check_options(self):
        if not isinstance(self.causal, bool):
            raise ValueError(f"causal: expected a bool, found {self.causal!r}")
        check_numerics(self.dtype, self.scale, self.stages)
        if not isinstance(self.dq_split, str) or self.dq_split not in DQ_SPLITS:
            raise ValueError(f"dq_split: expected one of {list(DQ_SPLITS)}, found {self.dq_split!r}")
        for name in ("deterministic", "overlap", "longest_first", "scores_ahead"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name}: expected a bool, found {getattr(self, name)!r}")
        if self.longest_first and is_int(self.seq_len) and self.key_blocks > GRID_Z:
            raise ValueError(f"longest_first=True: seq_len must be at most {GRID_Z * BK} keys ({GRID_Z} key blocks "
                             f"of {BK} on the grid's y axis), found {self.seq_len}")
        if self.overlap and not self.shares_ds:
            raise ValueError(f"overlap=True needs dq_split='columns' or 'rows', found {self.dq_split!r}: with 'keys' "
                             f"a consumer's dQ (64 x head_dim float32) in flight next to dV and dK takes more "
                             f"registers than a thread has")
        if self.scores_ahead and not takes_scores_ahead(self.overlap, self.deterministic, self.head_dim):
            raise ValueError(f"scores_ahead=True needs overlap=True, and not deterministic at head_dim 128 (ptxas "
                             f"spilled 8 bytes), found overlap={self.overlap}, deterministic={self.deterministic}")
        if self.split_rows and self.deterministic:
            raise ValueError("deterministic=True with dq_split='rows' is not built: the second 64-row half of a "
                             "query block past seq_len would count into an Order block the tensor does not have "
                             "(ceil(seq_len / 64) blocks)")
        if self.split_rows and self.head_dim != 64:
            raise ValueError(f"dq_split='rows' needs head_dim 64, found {self.head_dim}: its S^T and dP^T of "
                             f"{BQ_ROWS} queries take 128 registers per thread, and dV and dK of head_dim 128 "
                             f"another 128")

    def _check_section(self):
        if self.section is None:
            return
        if not self.longest_first:
            raise ValueError(f"section={self.section!r} needs longest_first=True (it sizes that order's sections)")
        if type(self.section) is not int or self.section < 1 or self.kv_heads % self.section:  # noqa: E721
            raise ValueError(f"section: expected an int dividing kv_heads={self.kv_heads} (key/value heads per "
                             f"section), found {self.section!r}")

    # -- what follows from the sizes ---------------------------------------------------------

    @property
    def softmax_scale(self) -> float:
        """The scale of ``q.k`` (default ``1 / sqrt(head_dim)``)."""
        return float(self.scale) if self.scale is not None else 1.0 / math.sqrt(self.head_dim)

    @property
    def scale_log2(self) -> float:
        """The scale times log2(e): probabilities are recomputed with ``ex2``."""
        return self.softmax_scale * LOG2E

    @property
    def group(self) -> int:
        """Query heads per key/value head."""
        return self.heads // self.kv_heads

    @property
    def chunks(self) -> int:
        """64-column boxes per row of Q, K, V and dO."""
        return self.head_dim // CHUNK

    @property
    def ring(self) -> Ring:
        """The Q / dO ring: ``stages`` buffers released by each consumer warpgroup."""
        return Ring(self.stages, CONSUMERS)

    @property
    def block_q(self) -> int:
        """Query rows per block: :data:`BQ_ROWS` (128) with ``dq_split="rows"``, else
        :data:`BQ` (64)."""
        return BQ_ROWS if self.split_rows else BQ

    @property
    def mma_scores(self) -> str:
        """``S^T`` and ``dP^T`` (64 keys x :attr:`block_q` queries): A (K or V) and B (Q or
        dO) K-major in shared memory."""
        t = DTYPES[self.dtype]
        return f"wgmma.mma_async.sync.aligned.m64n{self.block_q}k16.f32.{t}.{t}"

    @property
    def mma_grads(self) -> str:
        """``dV``, ``dK`` (64 keys x D; A in registers) and ``dQ`` (64 queries x D; A in
        shared memory, MN-major): N = head_dim, B MN-major."""
        t = DTYPES[self.dtype]
        return f"wgmma.mma_async.sync.aligned.m64n{self.head_dim}k16.f32.{t}.{t}"

    @property
    def split_columns(self) -> bool:
        """Whether each consumer computes half of ``dQ``'s columns over all 128 keys
        (``dq_split="columns"``) rather than all of them over its 64 keys."""
        return self.dq_split == "columns"

    @property
    def split_rows(self) -> bool:
        """Whether each consumer computes ``dQ`` of one 64-row half of a :data:`BQ_ROWS`-row
        query block over all 128 keys (``dq_split="rows"``)."""
        return self.dq_split == "rows"

    @property
    def shares_ds(self) -> bool:
        """Whether each consumer's ``dQ`` product reads both consumers' ``dS^T`` tiles
        (``"columns"``, ``"rows"``): the exchange then joins both warpgroups (:mod:`.exchange`)."""
        return self.dq_split != "keys"

    @property
    def dq_columns(self) -> int:
        """Columns of the ``dQ`` block one consumer computes and reduces: head_dim, or
        head_dim / 2 (``"columns"``)."""
        return self.head_dim // 2 if self.split_columns else self.head_dim

    @property
    def dv_in_flight(self) -> bool:
        """With ``overlap``: whether ``dV`` may still run while ``dQ`` and ``dK`` are issued
        (their registers, ``dV + dK + dQ`` accumulators and the packed ``P^T`` and ``dS^T``,
        at most :data:`IN_FLIGHT_REGISTERS`: head_dim 64); else the schedule waits for
        ``dV`` first."""
        registers = (2 * WG_K * self.head_dim + DQ_ROWS * self.dq_columns) // 128 + 2 * self.block_q * WG_K // 256
        return registers <= IN_FLIGHT_REGISTERS

    @property
    def mma_dq(self) -> str:
        """``dQ`` (:data:`DQ_ROWS` queries x :attr:`dq_columns`; A ``dS^T`` M-major, B K
        N-major)."""
        t = DTYPES[self.dtype]
        return f"wgmma.mma_async.sync.aligned.m64n{self.dq_columns}k16.f32.{t}.{t}"

    @property
    def operands(self) -> dict:
        """The shared operands (:class:`~tvm_tirx.kernels.gemm.operands.Operand`) by name:
        ``kv`` (K or V as the K-major A, one 64-column chunk), ``qdo`` (Q or dO as the
        K-major B, one chunk), ``qdo_n`` (Q or dO as the N-major B of ``dK`` / ``dV``),
        ``ds`` (``dS^T`` as the M-major A of ``dQ``: a consumer's tile, :attr:`block_q`
        queries by its 64 keys), ``k_n`` (K as the N-major B of ``dQ``)."""
        d, t, bq = self.head_dim, self.dtype, self.block_q
        return {"kv": Operand("A", "k", WG_K, CHUNK, t), "qdo": Operand("B", "k", bq, CHUNK, t),
                "qdo_n": Operand("B", "n", d, bq, t), "ds": Operand("A", "m", bq, WG_K, t),
                "k_n": Operand("B", "n", d, WG_K, t)}

    @property
    def kv_bytes(self) -> int:
        """K and V of the CTA's keys."""
        return 2 * BK * self.head_dim * 2

    @property
    def stage_bytes(self) -> int:
        """The bytes the TMA brings into one ring stage: a Q and a dO block."""
        return 2 * self.block_q * self.head_dim * 2

    @property
    def smem_bytes(self) -> int:
        """K, V, the ring (with each stage's :attr:`block_q` LSE and Dsum values), ``dS^T`` and
        the fp32 ``dQ`` tiles, the mbarriers, 1 KiB of alignment."""
        ds, dq = CONSUMERS * WG_K * self.block_q * 2, CONSUMERS * DQ_ROWS * self.dq_columns * 4
        stage = self.stage_bytes + 2 * self.block_q * 4
        return self.kv_bytes + self.stages * stage + ds + dq + 8 * (1 + 2 * self.stages) + 1024

    # -- the walk ----------------------------------------------------------------------------

    def extent(self, n, block: int):
        """``ceil(n / block)`` (an int for a static ``n``)."""
        return -(-n // block) if isinstance(n, int) else T.ceildiv(n, block)

    @property
    def key_blocks(self):
        """CTAs along the sequence: ``ceil(seq_len / 128)``."""
        return self.extent(self.seq_len, BK)

    @property
    def heads_per_section(self) -> int:
        """With :attr:`longest_first`, the key/value heads of one section: :attr:`section`,
        or every key/value head (a section per batch entry)."""
        return self.kv_heads if self.section is None else self.section

    @property
    def sections(self) -> int:
        """Sections per batch entry: ``kv_heads / heads_per_section`` (1 without
        :attr:`longest_first`)."""
        return self.kv_heads // self.heads_per_section if self.longest_first else 1

    @property
    def grid(self) -> tuple:
        """The launch grid: ``(key_blocks, kv_heads, batch)``, or with :attr:`longest_first`
        ``(heads_per_section, key_blocks, batch * sections)`` (:meth:`block`)."""
        if self.longest_first:
            return (self.heads_per_section, self.key_blocks, self.batch * self.sections)
        return (self.key_blocks, self.kv_heads, self.batch)

    def block(self, x, y, z) -> tuple:
        """``(b, hk, kb)`` of the CTA at ``blockIdx`` ``(x, y, z)`` of :attr:`grid`.  CTAs
        are launched in the order of their linear index (``x`` fastest).  With
        :attr:`longest_first` the (batch entry, key/value head) pairs are cut into sections
        of :attr:`heads_per_section` heads of one batch entry, launched one section after
        another; within a section, every pair's key block 0 first, then every key block 1,
        and so on.  Causal walks shorten with the key block, so the longest start first and
        the short ones fill the SMs at the end (the order of FlashAttention-3's "LPT"
        scheduler), while the CTAs running together stay within a few sections, whose Q
        and dO blocks they share in L2.  Otherwise a (batch entry, key/value head)'s key
        blocks are launched together, one pair after another."""
        if not self.longest_first:
            return (z, y, x)
        if self.sections == 1:
            return (z, x, y)
        return (z // self.sections, z % self.sections * self.heads_per_section + x, y)

    def first_query_block(self, kb):
        """The first query block key block ``kb`` meets: 0, or (causal) ``kb * 128 /
        block_q`` (``2 kb``, or ``kb`` with ``"rows"``) -- the earlier blocks' queries all
        precede the block's first key."""
        return kb * (BK // self.block_q) if self.causal else 0

    def query_blocks(self, kb, seq_len):
        """Query blocks of one head key block ``kb`` walks: ``ceil(seq_len / block_q) -
        first_query_block(kb)`` (at least 1: ``ceil(L / 64) >= 2 ceil(L / 128) - 1``, and
        ``kb < ceil(L / 128)``)."""
        return T.ceildiv(seq_len, self.block_q) - self.first_query_block(kb)

    def turn(self, kb, c):
        """With :attr:`deterministic`, the ``dQ`` reduces into consumer ``c``'s 64-row block
        (:meth:`order_block`) that precede its reduce of key block ``kb``: ``2 kb + c``.
        Every key block from 0 up to the last one that meets a query block reduces into it
        (causal: ``kb <= qb / 2``, consecutive from 0), each consumer once, so the turns of
        a block are 0, 1, 2, ... in key order.  (``"rows"``, not built deterministic: ``kb``.)"""
        return kb if self.split_rows else kb * CONSUMERS + c

    def order_block(self, qb, c):
        """The 64-row block of ``Order`` whose count consumer ``c`` of query block ``qb``
        awaits: ``qb``, or with ``"rows"`` (blocks of 128 rows, one half per consumer)
        ``2 qb + c``."""
        return qb * (self.block_q // DQ_ROWS) + c if self.split_rows else qb

    @property
    def query_blocks_total(self):
        """64-row query blocks of one head: ``ceil(seq_len / 64)`` (the ``Order`` tensor's
        last axis)."""
        return self.extent(self.seq_len, DQ_ROWS)

    def step(self, g, kb, hk, seq_len):
        """``(h, qb)`` of the CTA's iteration ``g``: query head ``hk * group + g // n`` and
        query block ``first + g % n`` (``n`` from :meth:`query_blocks`): each head's query
        blocks in turn, the group's heads one after another."""
        n = self.query_blocks(kb, seq_len)  # positive, g >= 0: truncated division is floor division
        return hk * self.group + T.truncdiv(g, n), self.first_query_block(kb) + T.truncmod(g, n)
