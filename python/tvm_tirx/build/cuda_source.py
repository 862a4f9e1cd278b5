"""Device-function passes that make apache-tvm's CUDA codegen print source nvcc accepts.

apache-tvm 0.27's C codegen (``CodeGenC``) names each TIR variable after its
``name_hint``, made unique within the function, and reserves only 27 C keywords
(``int``, ``float``, ``if``, ...).  Any other name the TVMScript parser accepts
reaches the CUDA source as it is: a kernel variable called ``half``, ``uint``
(a macro of the codegen's preamble), ``threadIdx``, ``bool`` or ``expf`` is
declared as ``int half = ...;`` and every later use of the type, macro,
built-in or function of that name fails to compile.  :func:`RenameReservedNames`
renames such variables.

The codegen prints ``T.reinterpret(dtype, x)`` as ``*(dtype *)(&(x))``, which
needs an lvalue; it binds most operands to a local first, but prints a plain
literal inline (``*(uint *)(&(0x1p+0f))``, rejected by nvcc).
:func:`BindReinterpretedLiterals` binds such literals to a ``Let`` variable.

Both run on the device module after apache-tvm's own device finalization (see
:mod:`tvm_tirx.build.pipeline`): no later pass can bring a clash or a literal operand
back, and the errors and argument checks of earlier passes keep the user's names.
"""

from __future__ import annotations

import itertools

import tvm
import tvm_ffi
from tvm import tirx
from tvm.ir import Call, StringImm, Var
from tvm.tirx.transform import prim_func_pass

__all__ = [
    "CUDA_RESERVED",
    "RESERVED_PREFIXES",
    "legal_name",
    "RenameReservedNames",
    "BindReinterpretedLiterals",
    "legalize_device_source",
]

_CXX_KEYWORDS = """
alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t
char32_t class compl concept const consteval constexpr constinit const_cast continue co_await
co_return co_yield decltype default delete do double dynamic_cast else enum explicit export
extern false float for friend goto if inline int long mutable namespace new noexcept not not_eq
nullptr operator or or_eq private protected public register reinterpret_cast requires return
short signed sizeof static static_assert static_cast struct switch template this thread_local
throw true try typedef typeid typename union unsigned using virtual void volatile wchar_t while
xor xor_eq
""".split()

# CUDA built-in variables (CUDA C++ Programming Guide, "Built-in Variables").
_CUDA_BUILTINS = ["threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize"]

# Type names: CUDA's vector types (Programming Guide, "Built-in Vector Types"), the
# fp16/bf16 types of cuda_fp16.h / cuda_bf16.h and the ones apache-tvm's preamble
# defines, the fixed-width integers the preamble imports, and namespaces it uses.
_CUDA_TYPES = [
    base + str(n)
    for base in (
        "char", "uchar", "short", "ushort", "int", "uint", "long", "ulong",
        "longlong", "ulonglong", "float", "double",
    )
    for n in (1, 2, 3, 4)
] + """
dim3 half half1 half2 half4 nv_bfloat16 nv_bfloat162 nv_bfloat164 CUtensorMap
int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t size_t ptrdiff_t intptr_t
uintptr_t std cuda
""".split()

# Macros and functions apache-tvm's CUDA preamble defines or its codegen prints by
# name (seen in generated sources; calls lowered to call_extern are found per function).
_CODEGEN_NAMES = """
uint uchar ushort NULL INFINITY NAN CUDART_INF CUDART_INF_F CUDART_NAN CUDART_NAN_F
max min hpow htanh htan hatan herf hexp
""".split()

#: Identifiers the generated CUDA may refer to that apache-tvm's codegen does not reserve.
CUDA_RESERVED = frozenset(_CXX_KEYWORDS + _CUDA_BUILTINS + _CUDA_TYPES + _CODEGEN_NAMES)

#: Prefixes of names apache-tvm generates at file scope (``tvm_builtin_ptx_*`` helpers,
#: ``make_half4``, ``TVM_ENABLE_L2_PREFETCH``, ``CUDA_UNSUPPORTED_HALF_MATH_*``).
#: A leading underscore is reserved too: C++ gives ``__x`` and ``_X`` to the
#: implementation (``__half``, ``__shfl_sync``, ``__nv_fp8_e4m3``).
RESERVED_PREFIXES = ("_", "tvm_", "TVM_", "make_", "CUDA")

_EXTERN_CALLS = ("tirx.call_extern", "tirx.call_pure_extern", "tirx.cuda.func_call")


def legal_name(name: str, reserved=CUDA_RESERVED) -> str:
    """A C++ name for a kernel variable called ``name`` that clashes with nothing in ``reserved``.

    ``name`` itself when it is neither in ``reserved`` nor starts with one of
    :data:`RESERVED_PREFIXES`; otherwise ``name`` without leading underscores
    and prefixed ``v_`` (``half`` -> ``v_half``, ``__half`` -> ``v_half``).
    apache-tvm's codegen then makes the result unique within the function.
    """
    if name not in reserved and not name.startswith(RESERVED_PREFIXES):
        return name
    return "v_" + name.lstrip("_")


def _called_names(func) -> set:
    """Names of the functions ``func`` calls through call_extern / cuda.func_call."""
    names = set()

    def visit(call):
        if call.op.name in _EXTERN_CALLS and call.args and isinstance(call.args[0], StringImm):
            names.add(call.args[0].value)

    tvm_ffi.structural_walk(func, (Call, visit))
    return names


def rename_reserved_names(func):
    """``func`` (a device PrimFunc) with each scalar variable whose name would clash renamed.

    Buffer variables are left as they are: the codegen names their storage
    ``<name>_ptr``, which clashes with nothing.
    """
    reserved = CUDA_RESERVED | _called_names(func)
    renamed: list = []  # (old, new) pairs; Vars compare by identity, not ==

    def rename(var):
        if tirx.is_buffer_var(var) or legal_name(var.name, reserved) == var.name:
            return var
        for old, new in renamed:
            if old.same_as(var):
                return new
        new = Var(legal_name(var.name, reserved), var.ty, var.span)
        renamed.append((var, new))
        return new

    return tvm_ffi.structural_map(func, (Var, rename))


def bind_reinterpreted_literals(func):
    """``func`` with each ``reinterpret(<literal>)`` rewritten as
    ``let v = <literal> in reinterpret(v)``, which the codegen prints as a local."""
    reinterpret = tvm.ir.Op.get("tirx.reinterpret")
    counter = itertools.count()

    def bind(call):
        if not call.op.same_as(reinterpret) or not isinstance(call.args[0], (tirx.IntImm, tirx.FloatImm)):
            return call
        value = call.args[0]
        var = tirx.Var(f"reinterpret_src{next(counter)}", value.ty)
        return tirx.Let(var, value, tirx.reinterpret(call.ty, var, call.span), call.span)

    return tvm_ffi.structural_map(func, (Call, bind))


def _func_pass(transform, name):
    return prim_func_pass(lambda func, _mod, _ctx: transform(func), opt_level=0, name=name)


def RenameReservedNames():  # pylint: disable=invalid-name
    """The PrimFunc pass of :func:`rename_reserved_names`."""
    return _func_pass(rename_reserved_names, "tvm_tirx.RenameReservedNames")


def BindReinterpretedLiterals():  # pylint: disable=invalid-name
    """The PrimFunc pass of :func:`bind_reinterpreted_literals`."""
    return _func_pass(bind_reinterpreted_literals, "tvm_tirx.BindReinterpretedLiterals")


def legalize_device_source(finalize_device):
    """Wrap a pipeline's ``finalize_device`` factory: its passes, then the two of this module."""
    def factory():
        return tvm.ir.transform.Sequential([finalize_device(), BindReinterpretedLiterals(), RenameReservedNames()])

    return factory
