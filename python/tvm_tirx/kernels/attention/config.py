"""The attention kernel's geometry, its options, and the checks on them.

:class:`AttentionConfig` holds one kernel's sizes and options, validated once, and what
follows from them (block sizes, the wgmma opcodes, shared-memory bytes); the other
modules of :mod:`tvm_tirx.kernels.attention` read it.  ``batch`` and ``seq_len`` are a
Python ``int`` or an int32 run-time extent (``T.dynamic("L")``).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import tvm
from tvm.script import tirx as T

from ...tile.fragments import accumulator_row
from ..parts.ring import Ring
from .staging import o_staging_error

__all__ = ["first_row", "check_heads", "check_numerics", "AttentionSizes", "BM", "WG_M", "CONSUMERS", "DTYPES",
           "HEAD_DIMS", "SMEM_LIMIT", "MAX_ELEMENTS", "MAX_BLOCK_N", "MAX_FRAGMENT_REGISTERS", "REGISTERS",
           "AttentionConfig"]

BM = 128  # query rows per CTA with the default two consumers: 64 per consumer warpgroup
WG_M = 64
CONSUMERS = 2  # consumer warpgroups unless ``consumers`` sets it (AttentionConfig.consumers)
#: consumer warpgroups -> (producer, consumer) registers per thread (setmaxnreg: multiples of
#: 8 in 24..256, PTX ISA 9.7.19.5): 128 threads per warpgroup, at most 64K registers per SM
#: (128 x (40 + 2 x 232) = 64512; 128 x (24 + 3 x 160) = 64512)
REGISTERS = {2: (40, 232), 3: (24, 160)}
CHUNK = 64  # head_dim columns per shared box: one 128-byte swizzle row of bf16/f16
#: tensor dtype -> the wgmma input type (PTX ISA 9.7.15.5, f32 accumulators)
DTYPES = {"bfloat16": "bf16", "float16": "f16"}
#: head_dim -> key/value rows per block (BN) unless ``block_n`` sets it: S (64 x BN) and O
#: (64 x head_dim) fp32 accumulators of a consumer thread take BN / 2 + head_dim / 2
#: registers.  256: 80, the most two stages of K and V leave room for next to Q (2 x 40 KB +
#: 64 KB); on an H100 (2026-12-06, ``bench/attention.py --block-n 80 48``, TFLOP/s, blocks of
#: 64 / 80) ping-pong 616 / 647 at 4 x 16 x 4096 (causal 545 / 570), with the TMA store 639 /
#: 666 (causal 568 / 598), serial 616 / 635; blocks of 48 were slower than both.
HEAD_DIMS = {64: 128, 128: 128, 256: 80}
#: the most keys per block (``block_n``): Q K^T's wgmma has N <= 256 (PTX ISA 9.7.15.5)
MAX_BLOCK_N = 256
#: the most O, S and P registers (``head_dim / 2 + 3 bn / 4``) a consumer thread may hold
#: of its 232 (setmaxnreg): the rest hold addresses, the softmax's state and the loop
#: (ptxas, sm_90a: head_dim 256 in blocks of 80, 188, and 64 in blocks of 192, 176, do not
#: spill; head_dim 128 in blocks of 176, 196, spilled 4 bytes causal)
MAX_FRAGMENT_REGISTERS = 192
SMEM_LIMIT = 227 * 1024  # dynamic shared memory one sm_90 CTA may take, bytes
LOG2E = math.log2(math.e)
FLOAT32_MAX = 3.4028234663852886e38
#: Elements Q, K, V or O may hold: offsets into them are int32 (run-time sizes: the
#: caller's rule; the torch operator and the Relax offload check it).
MAX_ELEMENTS = 2**31 - 1
#: CTAs a grid may have along z (batch entries) (CUDA's launch limit)
GRID_Z = 65535
#: SMs of the H100 / H200 SXM: the persistent grid's default size (one CTA per SM)
SMS = 132


def _is_extent(value, bm=BM) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return 1 <= value <= 2**31 - 1 - bm
    return isinstance(value, tvm.tirx.Var) and str(value.ty.dtype) == "int32"


def check_heads(heads, kv_heads) -> None:
    """Refuse head counts a kernel of this family cannot launch or group.

    Raises
    ------
    ValueError
        ``heads`` or ``kv_heads`` not an int in 1..65535 (a grid axis), or ``heads`` not a
        multiple of ``kv_heads``.
    """
    for name, value in (("heads", heads), ("kv_heads", kv_heads)):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
            raise ValueError(f"{name}: expected an int in 1..65535 (a grid axis), found {value!r}")
    if heads % kv_heads:
        raise ValueError(f"heads={heads}: expected a multiple of kv_heads={kv_heads} "
                         "(each key/value head serves heads // kv_heads query heads)")


def check_numerics(dtype, scale, stages) -> None:
    """Refuse a dtype, softmax scale or ring depth a kernel of this family does not take.

    Raises
    ------
    ValueError
        ``dtype`` not in :data:`DTYPES`; ``scale`` not None or a positive number whose
        product with log2(e) is a finite float32; ``stages`` not an int in 1..4.
    """
    if not isinstance(dtype, str) or dtype not in DTYPES:
        raise ValueError(f"dtype: expected one of {sorted(DTYPES)}, found {dtype!r}")
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, numbers.Real)
                              or not 0 < float(scale) * LOG2E < FLOAT32_MAX):
        raise ValueError(f"scale: expected a positive finite number (times log2(e) within float32) or None "
                         f"(1 / sqrt(head_dim)), found {scale!r}")
    if isinstance(stages, bool) or not isinstance(stages, int) or not 1 <= stages <= 4:
        raise ValueError(f"stages: expected an int in 1..4, found {stages!r}")


def first_row(qb, c, tid, bm=BM):
    """The first of the two query rows thread ``tid`` holds in consumer ``c`` of query
    block ``qb`` of ``bm`` rows (:attr:`AttentionConfig.bm`): ``bm qb + 64 c + 16 w + g``
    (warp ``w`` of the warpgroup, lane ``4 g + t``; the other row is 8 below it, PTX ISA
    9.7.15.5.1.1)."""
    return accumulator_row(qb * bm + c * WG_M, tid)


@dataclass(frozen=True)
class AttentionSizes:
    """The sizes and numerics every attention kernel of this family (forward and
    backward) is made with: ``batch`` and ``seq_len`` (ints or int32 run-time extents),
    ``heads``, ``kv_heads``, ``head_dim``, ``dtype``, ``causal``, the softmax ``scale``
    (None: ``1 / sqrt(head_dim)``) and the ring's ``stages``.  Each kernel's config checks
    them (:func:`check_heads`, :func:`check_numerics` and its own rules)."""

    batch: object
    seq_len: object
    heads: int
    kv_heads: int
    head_dim: int
    dtype: str = "bfloat16"
    causal: bool = False
    scale: float | None = None
    stages: int = 2


@dataclass(frozen=True)
class AttentionConfig(AttentionSizes):  # pylint: disable=too-many-instance-attributes
    """One attention kernel's sizes and options, checked when it is made; the fields are
    :func:`~tvm_tirx.kernels.attention.make_attention`'s parameters.

    Raises
    ------
    ValueError
        A head_dim other than the ints 64, 128 or 256; a dtype other than bfloat16 /
        float16; ``heads`` not a multiple of ``kv_heads``; a size that is not a positive
        int or an int32 run-time extent; more than 65535 batch entries in a grid of one
        CTA per tile; static sizes of more than :data:`MAX_ELEMENTS`
        elements in Q; ``stages`` outside 1..4, more shared memory than a CTA has, or 1
        with ``overlap``; a ``scale`` that is not a positive finite number; a flag that
        is not a bool; ``ctas`` not a positive int; ``persistent_rows`` neither None nor a
        non-negative int, or set without ``persistent``; ``varlen`` not a bool, or with
        ``persistent`` (the persistent walk over packed sequences is not written);
        ``tma_store`` not a bool, or with ``varlen``; ``block_n`` neither None nor a
        multiple of 16 in 16..256, or one whose O, S and P fragments would take more than
        :attr:`fragment_budget` registers per consumer thread; ``consumers`` not 2 or 3,
        or 3 with a head_dim other than 64, ``pingpong`` or ``varlen``; an ``o_staging``
        that :func:`~.staging.o_staging_error` refuses, ``"own"`` where the tile does not
        fit, ``"kv"`` where :meth:`kv_staging_refusal` names a reason; ``v_ring`` not a bool.
    """

    pingpong: bool = False
    overlap: bool = False
    persistent: bool = False
    ctas: int = SMS
    persistent_rows: int | None = None
    varlen: bool = False
    tma_store: bool = False
    block_n: int | None = None
    consumers: int = CONSUMERS
    o_staging: str | None = None
    v_ring: bool = False

    def __post_init__(self):
        self._check_consumers()
        self._check_sizes()
        self._check_options()
        self._check_block_n()
        self._check_o_staging()
        if self.smem_bytes > SMEM_LIMIT:
            raise ValueError(f"stages={self.stages}: the kernel needs {self.smem_bytes} bytes of shared memory, "
                             f"more than the {SMEM_LIMIT} a CTA may have; use fewer stages")

    def _check_options(self):
        for name in ("causal", "pingpong", "overlap", "persistent", "varlen", "tma_store", "v_ring"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name}: expected a bool, found {getattr(self, name)!r}")
        check_numerics(self.dtype, self.scale, self.stages)
        if isinstance(self.ctas, bool) or not isinstance(self.ctas, int) or not 1 <= self.ctas <= 2**31 - 1:
            raise ValueError(f"ctas: expected a positive int (the persistent grid), found {self.ctas!r}")
        rows = self.persistent_rows
        if rows is not None and (isinstance(rows, bool) or not isinstance(rows, int) or rows < 0):
            raise ValueError(f"persistent_rows: expected None or a non-negative int (keys per query), found {rows!r}")
        if rows is not None and not self.persistent:
            raise ValueError(f"persistent_rows={rows}: chooses between the persistent grid and one CTA per tile, "
                             "so it needs persistent=True")
        if self.varlen and self.persistent:
            raise ValueError("varlen=True: packed sequences run on one CTA per tile only; pass persistent=False "
                             "(the persistent walk over sequences of different lengths is not written)")
        if self.tma_store and self.varlen:
            raise ValueError("tma_store=True: O's TMA store is written for the batched layout only; pass "
                             "varlen=False (packed sequences store O per thread, under each row's guard)")
        if self.overlap and self.stages < 2:
            raise ValueError(f"stages={self.stages}: overlap=True needs at least 2 stages (a consumer waits for "
                             "block j before it releases block j - 1; with one stage the producer could never "
                             "load block j)")

    def _check_consumers(self):
        n = self.consumers
        if isinstance(n, bool) or not isinstance(n, int) or n not in REGISTERS:
            raise ValueError(f"consumers: expected 2 or 3 (consumer warpgroups of 64 query rows), found {n!r}")
        if n == CONSUMERS:
            return
        if self.head_dim != 64:
            raise ValueError(f"consumers={n}: {n} consumer warpgroups ({self.consumer_registers} registers each) are "
                             f"written for head_dim 64 only, found head_dim={self.head_dim!r}")
        for name, why in (("pingpong", "the turns of .turns are written for two consumers"),
                          ("varlen", "the packed-sequence grid counts query blocks of 128 rows")):
            if getattr(self, name) is True:
                raise ValueError(f"consumers={n}: {name}=True is not supported with {n} consumers ({why}); "
                                 f"pass {name}=False or consumers=2")

    def _check_sizes(self):
        for name in ("batch", "seq_len"):
            value = getattr(self, name)
            if not _is_extent(value, self.bm):
                kind = f" of dtype {value.ty.dtype}" if isinstance(value, tvm.tirx.Var) else ""
                raise ValueError(f"{name}: expected a positive int below 2**31 - {self.bm} or an int32 run-time extent "
                                 f"(T.dynamic), found {value!r}{kind}")
        check_heads(self.heads, self.kv_heads)
        if isinstance(self.batch, int) and self.batch > GRID_Z and not self.persistent:
            raise ValueError(f"batch: expected at most {GRID_Z} (the grid's z axis; persistent=True has no such "
                             f"limit), found {self.batch}")
        if isinstance(self.head_dim, bool) or not isinstance(self.head_dim, int) or self.head_dim not in HEAD_DIMS:
            raise ValueError(f"head_dim: expected one of {sorted(HEAD_DIMS)} (an int), found {self.head_dim!r}")
        entries, what = (1, "seq_len (total rows)") if self.varlen else (self.batch, "batch x seq_len")
        if isinstance(entries, int) and isinstance(self.seq_len, int):  # else checked on the host at each call
            elements = entries * self.seq_len * self.heads * self.head_dim
            if elements > MAX_ELEMENTS:
                raise ValueError(f"{what} x heads x head_dim = {elements} elements: the kernel indexes Q "
                                 f"and O with int32 offsets, so at most {MAX_ELEMENTS}")

    def _check_block_n(self):
        bn = self.block_n
        if bn is None:
            return
        if isinstance(bn, bool) or not isinstance(bn, int) or bn % 16 or not 16 <= bn <= MAX_BLOCK_N:
            raise ValueError(f"block_n: expected None or a multiple of 16 in 16..{MAX_BLOCK_N} (keys per block: "
                             f"P V takes them 16 at a time, Q K^T's wgmma has N <= 256), found {bn!r}")
        registers = self.head_dim // 2 + 3 * bn // 4  # O, S and P words per consumer thread
        if registers > self.fragment_budget:
            raise ValueError(f"block_n={bn}: a consumer thread would hold {registers} registers of O, S and P "
                             f"at head_dim {self.head_dim} (head_dim / 2 + 3 block_n / 4), more than the "
                             f"{self.fragment_budget} that leave room for the rest under setmaxnreg "
                             f"{self.consumer_registers}")

    @property
    def bm(self) -> int:
        """Query rows per CTA: 64 per consumer warpgroup (:data:`BM` with the default two)."""
        return WG_M * self.consumers

    @property
    def producer_registers(self) -> int:
        """Registers per producer thread after ``setmaxnreg.dec`` (:data:`REGISTERS`)."""
        return REGISTERS[self.consumers][0]

    @property
    def consumer_registers(self) -> int:
        """Registers per consumer thread after ``setmaxnreg.inc`` (:data:`REGISTERS`)."""
        return REGISTERS[self.consumers][1]

    @property
    def fragment_budget(self) -> int:
        """The most O, S and P registers a consumer thread may hold: :data:`MAX_FRAGMENT_REGISTERS`
        (of 232 registers) scaled to :attr:`consumer_registers` (rounded down)."""
        return MAX_FRAGMENT_REGISTERS * self.consumer_registers // REGISTERS[CONSUMERS][1]

    @property
    def ring(self) -> Ring:
        """The key/value ring (:class:`~tvm_tirx.kernels.parts.Ring`): ``stages`` buffers
        released by each consumer warpgroup."""
        return Ring(self.stages, self.consumers)

    @property
    def bn(self) -> int:
        """Key/value rows per block: ``block_n``, or :data:`HEAD_DIMS`'s for head_dim."""
        return HEAD_DIMS[self.head_dim] if self.block_n is None else self.block_n

    @property
    def chunks(self) -> int:
        """64-column boxes per row of Q, K, V and O."""
        return self.head_dim // CHUNK

    @property
    def scale_log2(self) -> float:
        """The softmax scale times log2(e): scores are exponentiated with ``ex2``."""
        scale = self.scale if self.scale is not None else 1.0 / math.sqrt(self.head_dim)
        return float(scale) * LOG2E

    @property
    def mma_qk(self) -> str:
        """``S (64, bn) = Q K^T``: A and B in shared memory."""
        t = DTYPES[self.dtype]
        return f"wgmma.mma_async.sync.aligned.m64n{self.bn}k16.f32.{t}.{t}"

    @property
    def mma_pv(self) -> str:
        """``O (64, head_dim) += P V`` in one instruction per k16 step: A (P) in registers,
        V in shared memory (its ``head_dim / 64`` column chunks read through one MN-major
        descriptor, PTX ISA 9.7.15.5.1.2; N = head_dim <= 256)."""
        t = DTYPES[self.dtype]
        return f"wgmma.mma_async.sync.aligned.m64n{self.head_dim}k16.f32.{t}.{t}"

    @property
    def q_bytes(self) -> int:
        """Bytes of Q's shared tile, ``bm x head_dim`` elements."""
        return self.bm * self.head_dim * 2

    @property
    def kv_bytes(self) -> int:
        """Bytes of one stage: a block of K and one of V."""
        return 2 * self.bn * self.head_dim * 2

    @property
    def rings(self) -> int:
        """Barrier pairs per stage: 2 with ``v_ring`` (K's and V's halves of a stage loaded and
        released on barriers ``s`` and ``stages + s`` of ``full`` and ``empty``, :mod:`.consumer`), else 1."""
        return 2 if self.v_ring else 1

    @property
    def o_tile(self) -> str | None:
        """Where ``tma_store`` stages O (:mod:`.o_store`): ``o_staging`` if given, else
        ``"own"``, a buffer of its own (``consumers x 64 x head_dim`` elements,
        :attr:`q_bytes` bytes) when it fits next to Q and the ring, else ``"q"``, each
        consumer's own 64 rows of Q's buffer (read by nothing but its own ``Q K^T``, all
        retired before the epilogue).  ``"kv"`` (asked for only: the planner's choice where it
        was measured faster, :mod:`.schedules`) is the K half of the ring stage of the tile's
        last key/value block (:meth:`kv_staging_refusal`): on the persistent grid Q's rows
        are then released after the last ``Q K^T``, so the next tile's Q loads under this
        tile's epilogue.  None without ``tma_store``."""
        if not self.tma_store:
            return None
        if self.o_staging is not None:
            return self.o_staging
        return "own" if self._own_tile_fits else "q"

    def kv_staging_refusal(self) -> str | None:
        """Why O cannot be staged in the last block's K stage (``o_staging="kv"``), or None:
        it needs the persistent kernel (one CTA per tile never reloads Q, so Q's rows cost
        nothing there), the ping-pong turns of two consumers (with two mbarriers per
        consumer, :func:`~.o_store.k_read_barrier`, they keep each hand-over to one
        completion per phase), and ``block_n`` a multiple of 64 of at least ``64 consumers`` (each
        consumer's 64 O rows are 64 key rows of the stage)."""
        if not self.persistent:
            return "persistent=False (one CTA per tile stages O in Q's rows, which it never reloads)"
        if not self.pingpong or self.consumers != CONSUMERS:
            return "the hand-over needs the ping-pong turns of two consumers (pingpong=True, consumers=2)"
        if self.bn < self.bm or self.bn % WG_M:
            return (f"block_n={self.bn}: K's stage must hold the {self.bm} rows of O in whole 64-row boxes "
                    f"(a multiple of {WG_M} of at least {self.bm})")
        return None

    def _check_o_staging(self):
        staging, error = self.o_staging, o_staging_error(self.o_staging, self.tma_store)
        if error is not None:
            raise ValueError(error)
        if staging == "kv" and self.kv_staging_refusal() is not None:
            raise ValueError(f"o_staging='kv': {self.kv_staging_refusal()}")
        if staging == "own" and not self._own_tile_fits:
            raise ValueError(f"o_staging='own': O's tile of {self.q_bytes} bytes does not fit next to Q and "
                             f"{self.stages} stages ({self._base_bytes} bytes; a CTA has {SMEM_LIMIT}); use "
                             "o_staging='q' or fewer stages")

    @property
    def _own_tile_fits(self) -> bool:
        """Whether O's staging tile of its own (:attr:`q_bytes`) fits next to Q and the ring."""
        return self._base_bytes + self.q_bytes <= SMEM_LIMIT

    @property
    def _base_bytes(self) -> int:
        return self.q_bytes + self.stages * self.kv_bytes + 8 * 2 * (self.consumers + self.rings * self.stages) + 1024

    @property
    def smem_bytes(self) -> int:
        """Q, the K/V ring, the mbarriers, 1 KiB for aligning the swizzled tiles and, with
        ``tma_store`` where it fits (:attr:`o_tile`), O's staging tile (as large as Q's), or
        with O staged in K's stage the two mbarriers per consumer of its hand-over."""
        extra = {"own": self.q_bytes, "kv": 8 * 2 * self.consumers}.get(self.o_tile, 0)
        return self._base_bytes + extra

    @property
    def q_blocks(self):
        """CTAs along the sequence: ``ceil(seq_len / bm)``."""
        return -(-self.seq_len // self.bm) if isinstance(self.seq_len, int) else T.ceildiv(self.seq_len, self.bm)

    @property
    def tiles(self):
        """Output tiles, one per (query block, head, batch entry)."""
        return self.q_blocks * self.heads * self.batch

    @property
    def group(self) -> int:
        """Query heads per key/value head."""
        return self.heads // self.kv_heads
