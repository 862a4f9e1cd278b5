"""One kernel issuing each of a family's forms once, for every registered family.

:func:`kernel_source` is the TVMScript of a kernel that calls
``T.cuda.tile.apply`` once per form (wgmma: twice, its ss and rs forms share
the opcode text), whatever the form's architecture: the arch-floor probe
(``tools/probe_arch_floors.py``) assembles it for each target, and
``test_arch_floors.py`` compiles it for a form's floor.  A builder fills each
operand from the form's contract (roles, atoms, dtypes, scopes, parameters);
the families whose operands need layouts of their own (collectives, TMA boxes,
wgmma tiles) have a builder each, and :func:`on_form_kernels` makes one of a
call writer of ``tvm_tirx.testing.form_kernels`` (the warp families, atomics).
The kernels are for ptxas only: they are never run.
"""

from __future__ import annotations

import dataclasses

from tvm_tirx import testing

import atomic_forms  # tests/python

#: A value for each keyword parameter or family option the families take.
PARAM_VALUES = {
    "count": "T.uint32(1)",
    "tx": "T.uint32(256)",
    "phase": "T.uint32(0)",
    "time_hint": "T.uint32(1000)",
    "cta_mask": "T.uint16(3)",
    "cache_policy": "T.uint64(0)",
    "remote_cta_id": "T.uint32(1)",
    "byte_mask": "T.uint16(65535)",
    "b": "T.uint32(1)",  # shfl.sync: the lane offset / mask / source lane
}

HEADER = ["from tvm_tirx.script import tirx as T", ""]


def _dtype_key(dtype: str) -> str:
    return dtype.replace(".", "_")


def _run_extent(role, dtype: str) -> int:
    """Elements of a free (``None``) last atom axis: a 16-byte run (cp.async chunk, bulk run)."""
    from tvm.runtime import DataType  # pylint: disable=import-outside-toplevel

    return max(1, 16 * 8 // DataType(dtype).bits)


def thread_source(forms, name: str = "forms_kernel") -> str:
    """A kernel of one thread (per CTA of a 2-CTA cluster when a form needs
    one) issuing each thread-scope form once.

    Register roles get a register tensor of their atom and dtype (one per
    atom and dtype, shared by the forms: a kernel of thousands of calls would
    otherwise nest thousands of allocations); memory roles a view
    ``M.sub[0, 0:n]`` of a buffer per (scope, dtype) (a kernel tensor for
    ``global``, ``alloc_shared`` / ``alloc_local`` otherwise), 32-byte aligned;
    a free atom extent is a 16-byte run; parameters take :data:`PARAM_VALUES`.
    """
    memories = {}  # (scope, dtype) -> buffer name
    registers = {}  # (atom, dtype) -> register tensor name
    body = []
    for i, form in enumerate(forms):
        c = form.contract
        args, kwargs = [], []
        for j, role in enumerate(c.roles):
            dtype = role.dtypes[0]
            if role.kind == "register":
                value = registers.setdefault((tuple(role.atom), dtype), f"R{len(registers)}")
            else:
                scope = role.scopes[0]
                buf = memories.setdefault((scope, dtype), f"{scope[0].upper()}_{_dtype_key(dtype)}")
                n = role.atom[-1] if role.atom[-1] is not None else _run_extent(role, dtype)
                value = f"{buf}.sub[0, 0:{n}]"
            (kwargs.append(f"{role.keyword}={value}") if role.keyword else args.append(value))
        kwargs += [f"{k}={PARAM_VALUES[k]}" for k in (*c.params, *c.options)]
        body.append(f'    T.cuda.tile.apply(T.ptx["{form.opcode}"], {", ".join(args + kwargs)})')
    params = [f'{b}: T.Tensor((1, 64), "{d}", align=32)' for (s, d), b in memories.items() if s == "global"]
    lines = HEADER + [
        "@T.function",
        f"def {name}({', '.join(params)}):",
        f"    T.device_entry(launch={_launch(forms, 1)})",
    ]
    for (atom, dtype), reg in registers.items():
        lines.append(f'    {reg} = T.alloc_local({atom}, "{dtype}")')
    for (scope, dtype), buf in memories.items():
        if scope == "local":
            lines.append(f'    {buf} = T.alloc_local((1, 64), "{dtype}", align=32)')
        elif scope != "global":
            lines.append(f'    {buf} = T.alloc_shared((1, 64), "{dtype}", align=32)')
    return "\n".join(lines + body) + "\n"


def _launch(forms, block: int, extra: str = "") -> str:
    """The launch of a kernel of ``forms``: a 2-CTA cluster only when a form takes
    a CTA of the cluster (``cta_mask`` or ``remote_cta_id``), since a cluster
    launch alone needs sm_90 (``%cluster_ctarank``)."""
    cluster = any(k in ("cta_mask", "remote_cta_id") for f in forms for k in (*f.contract.params, *f.contract.options))
    grid = "grid=2, cluster=2" if cluster else "grid=1"
    return f"T.cuda.LaunchConfig({grid}, block={block}{extra})"


def register_source(forms, name: str = "forms_kernel") -> str:
    """:func:`tvm_tirx.testing.forms_kernel_source`: one register tensor per operand."""
    return testing.forms_kernel_source(forms, name=name)


def warp_matrix_source(forms, name: str = "forms_kernel") -> str:
    """One warp issuing each ``ldmatrix`` / ``stmatrix`` / ``mma.sync`` form once.

    Fragments use the lane maps of PTX ISA 9.7.14.5.15 (ldmatrix: word
    ``(m, r, w)`` in lane ``4 r + w``) and 9.7.14.5.8 (mma m16n8k8/k16).
    """
    lines = HEADER + [
        "from tvm.tirx.layout import Axis, S, TileLayout",
        "",
        "L = Axis.laneid",
        "@T.function",
        f"def {name}():",
        "    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))",
        '    rows = T.alloc_shared((4, 8, 4), "uint32", align=16)',
    ]
    frag = {
        (16, 4): "S[(2, 8, 4) : (1, 4 @ L, 1 @ L)]",  # A of k8
        (16, 8): "S[(2, 8, 2, 4) : (1, 4 @ L, 2, 1 @ L)]",  # A of k16
        (8, 4): "S[(8, 4) : (4 @ L, 1 @ L)]",  # B of k8
        (8, 8): "S[(8, 2, 4) : (4 @ L, 1, 1 @ L)]",  # B of k16
    }
    c_frag = "S[(2, 8, 4, 2) : (2, 4 @ L, 1 @ L, 1)]"
    for i, form in enumerate(forms):
        c = form.contract
        args = []
        for j, role in enumerate(c.roles):
            atom = tuple(role.atom)
            if role.kind == "memory":
                args.append(f"rows.sub[0:{atom[0]}, :, :]")
                continue
            if len(atom) == 3:  # ldmatrix fragment (count, 8, 4)
                layout = f"S[{atom} : (1, 4 @ L, 1 @ L)]"
            elif role.dtypes[0] == "float32":
                layout = c_frag
            else:
                layout = frag[atom]
            lines.append(f'    f{i}_{j} = T.alloc_local({atom}, "{role.dtypes[0]}", layout=TileLayout({layout}))')
            args.append(f"f{i}_{j}")
        lines.append(f'    T.cuda.tile.apply(T.ptx["{form.opcode}"], {", ".join(args)}, scope="warp")')
    return "\n".join(lines) + "\n"


def warpgroup_source(forms, name: str = "forms_kernel") -> str:
    """One warpgroup with a register cap issuing each operand-less warpgroup form
    (``setmaxnreg``: ``nreg=232`` to increase, 40 to decrease)."""
    lines = HEADER + [
        "@T.function",
        f"def {name}():",
        "    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128, min_blocks_per_sm=1))",
    ]
    for form in forms:
        nreg = 40 if ".dec." in form.opcode else 232
        lines.append(f'    T.cuda.tile.apply(T.ptx["{form.opcode}"], scope="warpgroup", nreg={nreg})')
    return "\n".join(lines) + "\n"


def tma_source(forms, name: str = "forms_kernel") -> str:
    """Thread 0 (of each CTA of a 2-CTA cluster when a form multicasts) issuing each TMA form once: uint32 tensors
    ``(4, ..., 4, 8)`` of rank 1..5 and boxes ``(2, ..., 2, 4)`` (16-byte rows)."""
    params = ", ".join(f'G{n}: T.Tensor({(4,) * (n - 1) + (8,)}, "uint32", align=16)' for n in range(1, 6))
    lines = HEADER + [
        "@T.function",
        f"def {name}({params}, policy: T.uint64):",
        f"    T.device_entry(launch={_launch(forms, 32, ', dynamic_smem_bytes=4096')})",
        '    bar = T.alloc_shared((1,), "uint64", scope="shared.dyn", align=8)',
    ]
    for n in range(1, 6):
        lines.append(f'    s{n} = T.alloc_shared({(2,) * (n - 1) + (4,)}, "uint32", scope="shared.dyn", align=128)')
    lines.append('    if T.cuda.thread_idx("x") == 0:')
    for form in forms:
        c = form.contract
        rank = len(next(r for r in c.roles if r.kind == "tensor_map").atom)
        extra = ", cta_mask=T.uint16(3)" if "cta_mask" in c.params else ""
        extra += ", cache_policy=policy" if "cache_policy" in c.params else ""
        coords = "(" + ", ".join(["0"] * rank) + ",)"
        if c.roles[0].kind == "memory":  # a load: shared image first, the barrier by keyword
            call = f"s{rank}, G{rank}, mbar=bar"
        else:
            call = f"G{rank}, s{rank}"
        lines.append(f'        T.cuda.tile.apply(T.ptx["{form.opcode}"], {call}, coords={coords}{extra})')
    return "\n".join(lines) + "\n"


def barrier_source(forms, name: str = "forms_kernel") -> str:
    """The 128 threads of a CTA issuing each named-barrier form once, all on
    barrier 1 with ``count=128`` (the CTA); a 2-CTA cluster only for the
    ``barrier.cluster`` forms, which need one."""
    cluster = any("cluster" in f.contract.instruction.entry_name for f in forms)
    grid = "grid=2, cluster=2" if cluster else "grid=1"
    lines = HEADER + ["@T.function", f"def {name}():", f"    T.device_entry(launch=T.cuda.LaunchConfig({grid}, block=128))"]
    values = {"id": 1, "count": 128}
    for form in forms:
        params = "".join(f", {k}=T.uint32({values[k]})" for k in form.contract.params)
        lines.append(f'    T.cuda.tile.apply(T.ptx["{form.opcode}"]{params})')
    return "\n".join(lines) + "\n"


#: wgmma input PTX type -> (tensor dtype, ComposeLayout per_element for 16-byte chunks)
WGMMA_INPUTS = {
    "f16": ("float16", 3),
    "bf16": ("bfloat16", 3),
    "tf32": ("float32", 2),
    "e4m3": ("float8_e4m3fn", 4),
    "e5m2": ("float8_e5m2", 4),
    "s8": ("int8", 4),
    "u8": ("uint8", 4),
}


def wgmma_source(forms, name: str = "forms_kernel") -> str:
    """One warpgroup issuing each wgmma form once: ss forms read both tiles
    through descriptors of 32-byte-swizzled shared tiles, rs forms take A from
    registers (:func:`~tvm_tirx.tile.families.wgmma.a_fragment_layout`)."""
    lines = HEADER + [
        "from tvm.tirx.layout import ComposeLayout, S, TileLayout",
        "from tvm_tirx.tile.families.wgmma import a_fragment_layout, accumulator_layout",
        "",
        "@T.function",
        f"def {name}():",
        "    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))",
        "    T.ptx['wgmma.fence.sync.aligned']()",
    ]
    tiles = set()
    for i, form in enumerate(forms):
        c = form.contract
        mods = form.opcode.split(".")
        dtype_d, atype, btype = mods[-3], mods[-2], mods[-1]
        n = int(form.opcode.split(".m64n")[1].split("k")[0])
        for t in (atype, btype):
            if t not in tiles:
                dtype, pe = WGMMA_INPUTS[t]
                k = 32 // (1 << (4 - pe))  # elements in 32 bytes
                lines.append(
                    f"    s_{t} = T.alloc_shared((320, {k}), '{dtype}', align=256, "
                    f"layout=ComposeLayout({pe}, 1, 3, TileLayout(S[(320, {k})])))"
                )
                tiles.add(t)
        packed = dtype_d == "f16"
        d_shape, d_dtype = ((64, n // 2), "uint32") if packed else ((64, n), "float32" if dtype_d == "f32" else "uint32")
        scale = "" if atype in ("s8", "u8") else ", scale_a=-1, scale_b=1"
        lines.append(f"    d{i} = T.alloc_local({d_shape}, '{d_dtype}', layout=accumulator_layout({n}, packed={packed}))")
        if c.roles[1].kind == "register":
            lines.append(f"    a{i} = T.alloc_local((64, 8), 'uint32', layout=a_fragment_layout())")
            a = f"a{i}"
        else:
            a = f"s_{atype}.sub[0:64, :]"
        lines.append(
            f"    T.cuda.tile.apply(T.ptx['{form.opcode}'], d{i}, {a}, s_{btype}.sub[64:{64 + n}, :],"
            f" scope='warpgroup', scale_d=True{scale})"
        )
    lines += ["    T.ptx['wgmma.commit_group.sync.aligned']()", "    T.ptx['wgmma.wait_group.sync.aligned'](0)"]
    return "\n".join(lines) + "\n"


def on_form_kernels(call, head):
    """A builder on :func:`tvm_tirx.testing.form_kernels`: one kernel of all the
    forms, ``call(form, i)`` writing the lines of each (a family test's call
    writer) and ``head(forms)`` the kernel's :class:`~tvm_tirx.testing.KernelHead`."""

    def build(forms, name: str = "forms_kernel") -> str:
        forms = tuple(forms)
        return testing.form_kernels(forms, call, head(forms), name=name, max_calls=max(len(forms), 1))[0].source

    return build


#: One full warp: the member mask of a warp-synchronous form is the lanes that reach it.
WARP_HEAD = testing.KernelHead(launch="T.cuda.LaunchConfig(grid=1, block=32)")


def warp_call(form, i):
    """The lines issuing a warp-synchronous register form (``shfl.sync``,
    ``vote.sync``, ``match.sync``, ``activemask``, ``redux.sync``,
    ``elect.sync``): each operand its own ``(lanes,)`` register of the role's
    first dtype, the required parameters from :data:`PARAM_VALUES` (``b=1``),
    the default member mask (every lane of :data:`WARP_HEAD`).  The opcode is
    the PTX text as a string: ``T.ptx`` spells these ``shfl_sync.bfly.b32``."""
    lines, names = [], []
    for j, role in enumerate(form.contract.roles):
        lines.append(f'r{i}_{j} = T.alloc_local(({role.atom[0]},), "{role.dtypes[0]}")')
        names.append(f"r{i}_{j}")
    c = form.contract
    params = [f"{k}={PARAM_VALUES[k]}" for k in c.params]
    params += [f"{k}={PARAM_VALUES[k]}" for k, p in c.options.items() if p.required]
    lines.append(f'T.cuda.tile.apply("{form.opcode}", {", ".join(names + params)})')
    return lines


#: The warp families' kernels: :func:`warp_call` in one warp.
warp_source = on_form_kernels(warp_call, lambda forms: WARP_HEAD)

#: The atomics family's kernels: its assembly test's calls and head
#: (``atomic_forms``), a 2-CTA cluster only for the ``.shared::cluster`` forms
#: (:func:`_launch`: a cluster launch alone needs sm_90).
atomics_source = on_form_kernels(
    atomic_forms.call, lambda forms: dataclasses.replace(atomic_forms.HEAD, launch=_launch(forms, 1))
)


#: family name -> builder(forms, name) -> TVMScript source
BUILDERS = {
    "register_ops": register_source,
    "ld_st": thread_source,
    "cp_async": thread_source,
    "cp_async_bulk": thread_source,
    "mbarrier": thread_source,
    "ldmatrix": warp_matrix_source,
    "mma_sync": warp_matrix_source,
    "setmaxnreg": warpgroup_source,
    "tma": tma_source,
    "wgmma": wgmma_source,
    "named_barrier": barrier_source,
    "shuffle": warp_source,
    "elect": warp_source,
    "warp_vote": warp_source,
    "redux": warp_source,
    "atomics": atomics_source,
    "fence": thread_source,
}


def kernel_source(family: str, forms, name: str = "forms_kernel") -> str:
    """TVMScript source of a kernel ``name`` issuing each of ``forms`` (all of ``family``) once.

    Raises
    ------
    KeyError
        No builder knows ``family`` (a new family: add one to :data:`BUILDERS`).
    """
    return BUILDERS[family](forms, name)
