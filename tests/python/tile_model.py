"""A reference model of the tile contract, written from the contract (../SPEC section 3) alone.

Three parts, none of which uses tvm_tirx's own checking code:

- :class:`Call` describes one generated ``T.cuda.tile.apply`` call of the ld / st / mov
  families (opcode, scope, launch, the memory tensor and its view, the register tensor and
  its layout, pred, guard) and renders it as a TVMScript kernel (:meth:`Call.source`).
- :func:`model` says, from the contract, whether the call is legal and, if it is, the
  instruction sequence every thread issues: for each repeat coordinate in row-major order,
  one instruction whose operands are register slots (``("reg", name, slot)``), element
  addresses (``("mem", name, element)``) and immediate values (``("val", v)``).
- :func:`trace` runs the lowered kernel symbolically, thread by thread: apache-tvm
  flattens the lowered PrimFunc (``LowerTIRx``, ``FlattenBuffer``) and a small interpreter
  walks it, recording every ``T.ptx`` call with the same operand encoding.

A property test compares ``model`` against ``trace`` (legal calls) and checks that illegal
calls raise ``TileError``.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import operator

DTYPES = {16: ("float16", "uint16", "int16"), 32: ("float32", "uint32", "int32"), 64: ("float64", "uint64", "int64")}
#: One dtype of each width, for the memory tensor under a dtype view or an alias.
DTYPES_ANY = {8: "uint8", 16: "uint16", 32: "float32", 64: "uint64"}
#: (opcode without type, number of inputs) of the arithmetic forms generated; the type is .f32 / .f64
ARITH = (("add", 2), ("sub", 2), ("mul", 2), ("min", 2), ("max", 2), ("fma.rn", 3), ("neg", 1), ("abs", 1))
SCALAR = 3  # the immediate generated scalar inputs carry
ROW_EXPRS = ("tid", "tid + 1", "(tid + 1) % ROWS", "ROWS - 1 - tid", "tid // 2", "3")


@dataclasses.dataclass(frozen=True)
class Call:
    """One generated tile call; every field is a plain value so hypothesis can shrink it.

    family: "ld" | "st" | "mov".  scope: "thread" | "warp" | "cta".
    bits: the tensors' element width; opc_bits: the width the opcode names.
    vec: vector length (``.v2``/``.v4``; 1 for none).  repeat: the repeat shape.
    block: threads per CTA.  space: "global" | "shared" (ld/st).
    rows/pad/col: the memory tensor is (rows, prod(repeat)*vec + pad) and a thread-scope
    view starts at column ``col`` of row ``row_expr`` (group scopes view the whole tensor).
    align: the memory tensor's declared alignment in bytes.
    order/gap/overlap: register layout = strides dense in axis ``order`` (a permutation of
    the non-thread axes), times ``gap``; ``overlap`` gives the outermost repeat axis stride 0.
    lane_axes: group scopes put the layout's laneid/warpid axes first (False breaks ownership).
    reg_atom: the register tensor's last extent (vec unless testing the atom rule).
    pred: ``pred=`` the row is in range; guard: ``if tid < guard:`` around the call (or None).
    scalar_src: mov reads an immediate.
    arith_op / scalar_mask: the arithmetic form (index into ARITH) and which inputs are immediates.
    cache / chunk / dst_rows: cp.async's cache operator, copy size in bytes, and the shared
    destination's row count (0: as many as the global source).
    count / rows_kind / offset: ldmatrix .x{count}; its shared rows "plain" (count, 8, 4),
    "interleaved" (matrix m's row r at [r, m]) or "offset" (``offset`` words into a flat
    buffer); gap spaces the count registers; lane_axes=False swaps the lane strides.
    swizzle: ``(per_element, swizzle_len, atom_len)`` of a ``ComposeLayout`` on the shared
    tensor of ld/st (empty: none); element ``a`` of the row-major tile lives at
    ``swizzled(a)``.
    src_bits / shift (ld/st, thread scope): the memory tensor has elements of ``src_bits``
    (< bits) and the call views its row ``[col * ratio + shift, ...)`` with
    ``.view(dtype)``; ``shift`` narrow elements past a wide element (0: on one).
    alias_rows / root_bits (ld/st, thread scope, global): the kernel parameter is a flat
    ``root_bits`` tensor of ``alias_rows`` rows' bytes, and the call reads a
    ``T.decl_buffer((rows, cols), dtype, data=M.data)`` alias of it: bounds are the
    parameter's bytes, whatever ``rows`` says.
    lane_pred (ldmatrix): ``pred=`` as a Python expression of ``tid`` ("" for none).
    """

    def physical(self, a: int) -> int:
        """Storage element of row-major element ``a`` of the memory tensor."""
        return swizzled(a, *self.swizzle) if self.swizzle else a

    family: str
    scope: str
    bits: int
    opc_bits: int
    vec: int
    repeat: tuple
    block: int
    space: str = "global"
    rows: int = 64
    pad: int = 0
    col: int = 0
    row_expr: str = "tid"
    align: int = 16
    order: tuple = ()
    gap: int = 1
    overlap: bool = False
    lane_axes: bool = True
    reg_atom: int = 0
    pred: bool = False
    guard: int | None = None
    scalar_src: bool = False
    dtype_index: int = 0
    arith_op: int = 0
    scalar_mask: int = 0
    cache: str = "ca"
    chunk: int = 16
    dst_rows: int = 0
    count: int = 1
    rows_kind: str = "plain"
    offset: int = 0
    swizzle: tuple = ()
    src_bits: int = 0
    shift: int = 0
    alias_rows: int = 0
    root_bits: int = 0
    lane_pred: str = ""

    # ---- derived values -------------------------------------------------------------
    @property
    def dtype(self) -> str:
        return DTYPES[self.bits][self.dtype_index % 3]

    @property
    def atom(self) -> int:
        if self.family == "cp.async":
            return self.chunk * 8 // self.bits
        return 1 if self.family in ("mov", "arith") else self.vec

    @property
    def n_inputs(self) -> int:
        return ARITH[self.arith_op][1] if self.family == "arith" else 1

    def input_is_scalar(self, i: int) -> bool:
        if self.family == "mov":
            return self.scalar_src
        return bool(self.scalar_mask >> i & 1)

    @property
    def reg_last(self) -> int:
        return self.reg_atom or self.atom

    @property
    def group(self) -> tuple:
        return {"thread": (), "warp": (32,), "cta": (self.block // 32, 32)}[self.scope]

    @property
    def row_len(self) -> int:
        return math.prod(self.repeat) * self.atom

    @property
    def cols(self) -> int:
        return self.row_len + self.pad + self.col

    @property
    def opcode(self) -> str:
        if self.family == "mov":
            return f"mov.b{self.opc_bits}"
        if self.family == "arith":
            return f"{ARITH[self.arith_op][0]}.f{self.opc_bits}"
        if self.family == "cp.async":
            return f"cp.async.{self.cache}.shared.global"
        if self.family == "ldmatrix":
            return f"ldmatrix.sync.aligned.m8n8.x{self.count}.shared.b16"
        vec = f".v{self.vec}" if self.vec > 1 else ""
        return f"{self.family}.{self.space}{vec}.b{self.opc_bits}"

    @property
    def ratio(self) -> int:
        """Narrow elements per element of a dtype view (1 without one)."""
        return self.bits // self.src_bits if self.src_bits else 1

    @property
    def root_len(self) -> int:
        """Elements of the aliased parameter (``root_bits`` wide): ``alias_rows`` rows' bytes, rounded down."""
        return max(self.alias_rows * self.cols * self.bits // self.root_bits, 1)

    @property
    def root_bytes(self) -> int:
        """Bytes of the allocation the bounds rule counts (the parameter's, under an alias)."""
        if self.alias_rows:
            return self.root_len * self.root_bits // 8
        return self.rows * self.cols * self.bits // 8

    def lane_pred_of(self, tid: int) -> bool:
        return bool(eval(self.lane_pred, {}, {"tid": tid}))  # pylint: disable=eval-used

    def row_of(self, tid: int) -> int:
        return eval(self.row_expr.replace("ROWS", str(self.rows)), {}, {"tid": tid})  # pylint: disable=eval-used

    def reg_dims(self) -> tuple:
        """Shape of the register tensor without its group axes."""
        return (*self.repeat, self.reg_last)

    def strides(self) -> tuple:
        """The register layout's strides over :meth:`reg_dims` (register slots)."""
        dims = self.reg_dims()
        order = self.order if sorted(self.order) == list(range(len(dims))) else tuple(range(len(dims)))
        strides = [0] * len(dims)
        step = 1
        for axis in reversed(order):
            strides[axis] = step * self.gap
            step *= dims[axis]
        if self.overlap:
            for axis, n in enumerate(dims[:-1]):
                if n > 1:
                    strides[axis] = 0
                    break
        return tuple(strides)

    def slot(self, coord) -> int:
        return sum(c * s for c, s in zip(coord, self.strides()))

    # ---- TVMScript ------------------------------------------------------------------
    def layout_text(self) -> str | None:
        dims, strides = self.reg_dims(), self.strides()
        if self.group and self.lane_axes:
            thread = ["1 @ Axis.laneid"] if self.scope == "warp" else ["1 @ Axis.warpid", "1 @ Axis.laneid"]
            shape = (*self.group, *dims)
            return f"TileLayout(S[{shape} : ({', '.join([*thread, *map(str, strides)])},)])"
        if self.group:
            return None  # no thread axes: every thread would own the whole group's values
        shape = dims
        return f"TileLayout(S[{shape} : {tuple(strides) if len(strides) > 1 else f'({strides[0]},)'}])"

    def source(self, name: str) -> str:
        """A module defining kernel ``name``: ``from module import name`` parses it."""
        reg_shape = (*self.group, *self.reg_dims())
        layout = self.layout_text()
        layout_arg = f", layout={layout}" if layout else ""
        lines = [
            "from tvm.tirx.layout import Axis, ComposeLayout, S, TileLayout",
            "from tvm_tirx.script import tirx as T",
            "",
            "",
            "@T.function",
        ]
        if self.family in ("mov", "arith"):
            lines += [
                f"def {name}(Out: T.Tensor((1,), \"{self.dtype}\")):",
                f"    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block={self.block}))",
                "    tid = T.cuda.thread_idx(\"x\")",
                f"    d = T.alloc_local({reg_shape}, \"{self.dtype}\"{layout_arg})",
            ]
            inputs = []
            for i in range(self.n_inputs):
                if self.input_is_scalar(i):
                    inputs.append(f"T.{self.dtype}({SCALAR})")
                else:
                    lines.append(f"    s{i} = T.alloc_local({(*self.repeat, 1)}, \"{self.dtype}\")")
                    inputs.append(f"s{i}")
            call = f"T.cuda.tile.apply(T.ptx[\"{self.opcode}\"], d, {', '.join(inputs)})"
        elif self.family == "ldmatrix":
            lanes = "4 @ Axis.laneid, 1 @ Axis.laneid" if self.lane_axes else "1 @ Axis.laneid, 8 @ Axis.laneid"
            shape, view = {
                "plain": ((self.count, 8, 4), "Sm"),
                "interleaved": ((8, self.count, 4), "Sm.permute(1, 0, 2)"),
                "offset": (
                    (self.count * 32 + self.offset,),
                    f"Sm.sub[{self.offset} : {self.offset + self.count * 32}].view({self.count}, 8, 4)",
                ),
            }[self.rows_kind]
            lines += [
                f"def {name}():",
                f"    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block={self.block}))",
                "    tid = T.cuda.thread_idx(\"x\")",
                f"    Sm = T.alloc_shared({shape}, \"uint32\", align=16)",
                f"    r = T.alloc_local(({self.count}, 8, 4), \"uint32\", "
                f"layout=TileLayout(S[({self.count}, 8, 4) : ({self.gap}, {lanes})]))",
            ]
            pred = f", pred={self.lane_pred}" if self.lane_pred else ""
            call = f"T.cuda.tile.apply(T.ptx[\"{self.opcode}\"], r, {view}, scope=\"warp\"{pred})"
        elif self.family == "cp.async":
            shape = (self.rows, self.cols)
            row = self.row_expr.replace("ROWS", str(self.rows))
            view_shape = (*self.repeat, self.atom)
            cols = f"{self.col} : {self.col + self.row_len}"
            lines += [
                f"def {name}(M: T.Tensor({shape}, \"{self.dtype}\", align={self.align})):",
                f"    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block={self.block}))",
                "    tid = T.cuda.thread_idx(\"x\")",
                f"    S = T.alloc_shared({(self.dst_rows or self.rows, self.cols)}, \"{self.dtype}\", align={self.align})",
            ]
            pred = f", pred=({row}) < {self.rows}" if self.pred else ""
            call = (
                f"T.cuda.tile.apply(T.ptx[\"{self.opcode}\"], S.sub[{row}, {cols}].view{view_shape}, "
                f"M.sub[{row}, {cols}].view{view_shape}{pred})"
            )
        else:
            shape = (self.rows, self.cols)
            mem_dtype = DTYPES_ANY[self.src_bits] if self.src_bits else self.dtype
            mem_shape = (self.rows, self.cols * self.ratio)
            if self.alias_rows:
                lines.append(f"def {name}(M: T.Tensor(({self.root_len},), \"{DTYPES_ANY[self.root_bits]}\", align={self.align})):")
            elif self.space == "global":
                lines.append(f"def {name}(M: T.Tensor({mem_shape}, \"{mem_dtype}\", align={self.align})):")
            else:
                lines.append(f"def {name}():")
            lines += [
                f"    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block={self.block}))",
                "    tid = T.cuda.thread_idx(\"x\")",
            ]
            if self.space == "shared":
                layout = ""
                if self.swizzle:
                    layout = f", layout=ComposeLayout({', '.join(map(str, self.swizzle))}, TileLayout(S[{shape}]))"
                lines.append(f"    M = T.alloc_shared({mem_shape}, \"{mem_dtype}\", align={self.align}{layout})")
            if self.alias_rows:
                lines.append(f"    W = T.decl_buffer({shape}, \"{self.dtype}\", data=M.data)")
            lines.append(f"    r = T.alloc_local({reg_shape}, \"{self.dtype}\"{layout_arg})")
            view_shape = (*self.group, *self.repeat, self.atom)
            if self.scope == "thread":
                row = self.row_expr.replace("ROWS", str(self.rows))
                if self.src_bits:
                    start = self.col * self.ratio + self.shift
                    cols = f"{start} : {start + self.row_len * self.ratio}"
                    view = f"M.sub[{row}, {cols}].view(\"{self.dtype}\").view{view_shape}"
                else:
                    tensor = "W" if self.alias_rows else "M"
                    view = f"{tensor}.sub[{row}, {self.col} : {self.col + self.row_len}].view{view_shape}"
            else:
                view = f"M.view{view_shape}"
            operands = f"r, {view}" if self.family == "ld" else f"{view}, r"
            pred = ""
            if self.pred:
                row = self.row_expr.replace("ROWS", str(self.rows))
                pred = f", pred=({row}) < {self.rows}"
            scope = f", scope=\"{self.scope}\"" if self.scope != "thread" else ""
            call = f"T.cuda.tile.apply(T.ptx[\"{self.opcode}\"], {operands}{pred}{scope})"
        if self.guard is not None:
            lines += [f"    if tid < {self.guard}:", f"        {call}"]
        else:
            lines.append(f"    {call}")
        return "\n".join(lines) + "\n"


def swizzled(a: int, per_element: int, swizzle_len: int, atom_len: int) -> int:
    """XOR swizzle of element offset ``a``: bits [per_element, per_element + swizzle_len)
    are XORed with the bits ``atom_len`` above them (apache-tvm's ``ComposeLayout``)."""
    mask = (1 << swizzle_len) - 1
    return a ^ (((a >> (per_element + atom_len)) & mask) << per_element)


# ---- the model -----------------------------------------------------------------------
def _active(call: Call) -> list:
    return [t for t in range(call.block) if call.guard is None or t < call.guard]


def illegal_reasons(call: Call) -> list:
    """Every contract rule the call breaks (empty: legal), each as a short phrase."""
    reasons = []
    if call.family == "cp.async":
        return _cp_async_reasons(call)
    if call.family == "ldmatrix":
        # rows 16-byte aligned (PTX ISA 9.7.14.5.15); word (m, r, w) owned by lane 4r + w
        if call.rows_kind == "offset" and call.offset * 4 % 16:
            reasons.append("row alignment")
        if not call.lane_axes:
            reasons.append("ownership")
        # a .aligned instruction is executed by the whole warp: pred has one value per warp
        if call.lane_pred and any(
            len({call.lane_pred_of(t) for t in range(w, w + 32)}) > 1 for w in range(0, call.block, 32)
        ):
            reasons.append("collective pred")
        return reasons
    if call.opc_bits != call.bits:
        reasons.append("type width")
    if call.family == "arith" and not call.dtype.startswith("float"):
        reasons.append("type kind")  # .f32/.f64 take floating-point registers only
    if call.reg_last != call.atom:
        reasons.append("register atom")
    if call.family in ("mov", "arith"):
        pass
    else:
        elem = call.bits // 8
        need = call.vec * call.opc_bits // 8
        if call.vec * call.opc_bits > 128:
            reasons.append("no such vector")
        if call.align % need:
            reasons.append("tensor alignment")
        if call.src_bits and call.shift % call.ratio:
            # .view(dtype) to a wider dtype between two wide elements: never rounded
            reasons.append("dtype view start")
        if call.swizzle and call.scope == "thread":
            # a sub-view of a swizzled tensor must start on a whole swizzle period when
            # its start varies with the thread id (a translation by a period
            # commutes with the swizzle; anything else leaves offsets that depend on
            # the thread).  The rule is checked while parsing, before the launch is
            # known, so it holds even for a one-thread launch.
            period = 1 << sum(call.swizzle)
            starts = {call.row_of(t) * call.cols + call.col for t in range(1024)}  # any tid
            if len(starts) > 1 and any(s_ % period for s_ in starts):
                reasons.append("swizzled view start")
        if any(
            addr != list(range(addr[0], addr[0] + len(addr)))
            for t in _active(call)
            for addr in _addresses(call, t).values()
        ):
            reasons.append("atom not contiguous")
        for t in _active(call):
            for start in _atom_starts(call, t):
                if (start * elem) % need:
                    reasons.append("atom alignment")
                    break
            else:
                continue
            break
        if call.scope == "thread" and any(_reads_out_of_bounds(call, t) for t in _active(call)):
            reasons.append("bounds")
    if call.group and not call.lane_axes:
        reasons.append("ownership")
    writes_registers = call.family in ("ld", "mov", "arith")
    if writes_registers and call.reg_last == call.atom:
        slots = [call.slot(c) for c in itertools.product(*(range(n) for n in call.reg_dims()))]
        if len(set(slots)) != len(slots):
            reasons.append("destination overlap")
    return reasons


def _cp_async_reasons(call: Call) -> list:
    """cp.async: chunk of 4/8/16 bytes (16 only for .cg), both chunks aligned to their
    size, the shared destination always in bounds (a false pred still zero-fills it),
    the global source in bounds unless pred."""
    reasons = []
    elem = call.bits // 8
    if call.chunk not in ((16,) if call.cache == "cg" else (4, 8, 16)):
        reasons.append("chunk size")
    if call.align % call.chunk:
        reasons.append("tensor alignment")
    elif any((start * elem) % call.chunk for t in _active(call) for start in _atom_starts(call, t)):
        reasons.append("atom alignment")
    rows = [call.row_of(t) for t in _active(call)]
    if any(not 0 <= r < (call.dst_rows or call.rows) for r in rows):
        reasons.append("destination bounds")
    if any(_reads_out_of_bounds(call, t) for t in _active(call)):
        reasons.append("bounds")
    return reasons


def _reads_out_of_bounds(call: Call, t: int) -> bool:
    """Thread ``t`` accesses a row outside the global tensor: its row is out of range
    and, for a predicated call, its predicate (``row < rows``) still holds."""
    row = call.row_of(t)
    predicate_holds = row < call.rows if call.pred else True
    # the storage elements the row's elements live at: a swizzle over a tile whose size is
    # not a whole number of swizzle periods maps some of them past the allocation
    stored = [call.physical(row * call.cols + call.col + i) for i in range(call.row_len)]
    # in bytes of the allocation: an alias reads the parameter's bytes, whatever its own shape
    end = (max(stored) + 1) * call.bits // 8
    return predicate_holds and not (0 <= row and min(stored) >= 0 and end <= call.root_bytes)


def _atom_starts(call: Call, t: int) -> list:
    return [addr[0] for addr in _addresses(call, t).values()]


def _group_coord(call: Call, t: int) -> tuple:
    return {"thread": (), "warp": (t % 32,), "cta": (t // 32, t % 32)}[call.scope]


def _addresses(call: Call, t: int) -> dict:
    """repeat coordinate -> the atom's element addresses in M, for thread ``t``."""
    out = {}
    for rep in itertools.product(*(range(n) for n in call.repeat)):
        flat = 0
        for c, n in zip(rep, call.repeat):
            flat = flat * n + c
        if call.scope == "thread":
            base = call.row_of(t) * call.cols + call.col
        else:
            g = 0
            for c, n in zip(_group_coord(call, t), call.group):
                g = g * n + c
            base = g * call.row_len
        out[rep] = [call.physical(base + flat * call.atom + i) for i in range(call.atom)]
    return out


def model(call: Call) -> dict:
    """thread -> the instructions it issues (legal calls only)."""
    out = {}
    for t in _active(call):
        seq = []
        if call.family in ("mov", "arith"):
            for rep in itertools.product(*(range(n) for n in call.repeat)):
                flat = 0
                for c, n in zip(rep, call.repeat):
                    flat = flat * n + c
                ops = [("reg", "d", call.slot((*rep, 0)))]
                for i in range(call.n_inputs):
                    ops.append(("val", SCALAR) if call.input_is_scalar(i) else ("reg", f"s{i}", flat))
                seq.append((call.opcode, tuple(ops)))
        elif call.family == "ldmatrix":
            lane = t % 32
            regs = tuple(("reg", "r", m * call.gap) for m in range(call.count))
            # lane 8m + r supplies row r of matrix m; lanes past 8 * count supply rows too
            # (ignored by the hardware): those of matrix (lane // 8) % count
            m, r = (lane // 8) % call.count, lane % 8
            elem = {
                "plain": m * 32 + r * 4,
                "interleaved": r * call.count * 4 + m * 4,
                "offset": call.offset + m * 32 + r * 4,
            }[call.rows_kind]
            ops = (*regs, ("mem", "Sm", elem))
            if call.lane_pred:
                ops = (*ops, ("val", int(call.lane_pred_of(t))))
            seq.append((call.opcode, ops))
        elif call.family == "cp.async":
            for rep, elems in _addresses(call, t).items():
                ops = (("mem", "S", elems[0]), ("mem", "M", elems[0]), ("val", call.chunk))
                if call.pred:
                    ops = (*ops, ("val", call.chunk if call.row_of(t) < call.rows else 0))
                seq.append((call.opcode, ops))
        else:
            for rep, elems in _addresses(call, t).items():
                regs = tuple(("reg", "r", call.slot((*rep, i))) for i in range(call.atom))
                mem = ("mem", "M", elems[0])
                ops = (*regs, mem) if call.family == "ld" else (mem, *regs)
                if call.pred:
                    ops = (*ops, ("val", int(call.row_of(t) < call.rows)))
                seq.append((call.opcode, ops))
        out[t] = seq
    return out


# ---- the interpreter -----------------------------------------------------------------
_BIN = {
    "Add": operator.add,
    "Sub": operator.sub,
    "Mul": operator.mul,
    "FloorDiv": operator.floordiv,
    "FloorMod": operator.mod,
    "Min": min,
    "Max": max,
    "LT": operator.lt,
    "LE": operator.le,
    "GT": operator.gt,
    "GE": operator.ge,
    "EQ": operator.eq,
    "NE": operator.ne,
    "BitwiseXor": operator.xor,
    "BitwiseAnd": operator.and_,
    "BitwiseOr": operator.or_,
    "LShift": operator.lshift,
    "RShift": operator.rshift,
}


class _Machine:
    """Runs a flattened TIRx PrimFunc for one thread, recording its T.ptx calls."""

    def __init__(self, tid: int):
        self.tid = tid
        self.env = {}  # var -> int
        self.parent = {}  # buffer var -> the buffer var it views
        self.scalars = {}  # (root name, index) -> value
        self.calls = []

    def root(self, buf):
        seen = 0
        while buf in self.parent and seen < 64:
            buf, seen = self.parent[buf], seen + 1
        return buf

    def eval(self, e):  # pylint: disable=too-many-return-statements
        name = type(e).__name__
        if name in ("IntImm", "FloatImm"):
            return e.value
        if name in _BIN:
            return _BIN[name](self.eval(e.a), self.eval(e.b))
        if name == "And":
            return self.eval(e.a) and self.eval(e.b)
        if name == "Or":
            return self.eval(e.a) or self.eval(e.b)
        if name == "Not":
            return not self.eval(e.a)
        if name == "Cast":
            return self.eval(e.value)
        if name == "Let":
            self.env[e.var] = self.eval(e.value)
            return self.eval(e.body)
        if name == "Select":
            return self.eval(e.true_value) if self.eval(e.condition) else self.eval(e.false_value)
        if name == "TensorLoad":
            return self.scalars[(self.root(e.source).name, self.eval(e.indices[0]))]
        if name == "Call" and e.op.name == "tirx.tvm_warp_shuffle":
            return self.eval(e.args[1])  # uniform across the warp in these kernels
        if e in self.env:
            return self.env[e]
        raise NotImplementedError(f"cannot evaluate {name}: {e}")

    def operand(self, e):
        name = type(e).__name__
        if name == "TensorLoad":
            return ("reg", self.root(e.source).name, self.eval(e.indices[0]))
        if name == "Call" and e.op.name == "tirx.cuda.cvta_generic_to_shared":
            return self.operand(e.args[0])  # a shared-window address of the same element
        if name == "Call" and e.op.name == "tirx.address_of":
            load = e.args[0]
            return ("mem", self.root(load.source).name, self.eval(load.indices[0]))
        value = self.eval(e)
        return ("val", int(value) if isinstance(value, bool) or float(value).is_integer() else value)

    def run(self, stmt):  # pylint: disable=too-many-branches
        from tvm import tirx  # pylint: disable=import-outside-toplevel

        name = type(stmt).__name__
        if name == "SeqStmt":
            for s in stmt.seq:
                self.run(s)
            return
        if name == "AttrStmt" and stmt.attr_key == "thread_extent":
            iv = stmt.node
            tag = iv.thread_tag
            self.env[iv.var] = self.tid if tag == "threadIdx.x" else 0
        elif name == "Bind":
            self.env[stmt.var] = self.eval(stmt.value)
        elif name == "For":
            lo = self.eval(stmt.min)
            for i in range(lo, lo + self.eval(stmt.extent)):
                self.env[stmt.loop_var] = i
                self.run(stmt.body)
            return
        elif name == "IfThenElse":
            if self.eval(stmt.condition):
                self.run(stmt.then_case)
            elif stmt.else_case is not None:
                self.run(stmt.else_case)
            return
        elif name == "DeclBuffer":
            args = getattr(stmt.data, "args", None)
            if args and tirx.is_buffer_var(args[0]):
                self.parent[stmt.buffer] = args[0]
        elif name == "BufferStore":
            self.scalars[(self.root(stmt.buffer).name, self.eval(stmt.indices[0]))] = self.eval(stmt.value)
        elif name == "Evaluate":
            call = stmt.value
            if type(call).__name__ == "Call" and call.op.name.startswith("tirx.ptx"):
                from tvm_tirx.testing import ptx_opcode_of  # pylint: disable=import-outside-toplevel

                ops = tuple(self.operand(a) for a in call.args if type(a).__name__ != "StringImm")
                self.calls.append((ptx_opcode_of(call), ops))
        body = getattr(stmt, "body", None)
        if body is not None and name != "For":
            self.run(body)


def flatten(lowered_func):
    """apache-tvm's own LowerTIRx + FlattenBuffer on a LowerTileApply result."""
    import tvm  # pylint: disable=import-outside-toplevel

    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90a"})
    mod = tvm.IRModule({"main": lowered_func})
    with target:
        mod = tvm.tirx.transform.BindTarget(target.with_host("llvm"))(mod)
        mod = tvm.ir.transform.Sequential(
            [tvm.tirx.transform.LowerTIRx(), tvm.tirx.transform.LowerTIRxOpaque(), tvm.tirx.transform.FlattenBuffer()]
        )(mod)
    return mod["main"]


def trace(lowered_func, threads) -> dict:
    """thread -> the ``(opcode, operands)`` the lowered kernel issues on that thread."""
    flat = flatten(lowered_func)
    out = {}
    for t in threads:
        machine = _Machine(t)
        machine.run(flat.body)
        out[t] = machine.calls
    return out
