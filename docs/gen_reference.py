"""Generate the instruction reference from tvm_tirx's own instruction data.

Run by ``conf.py`` at build time (or by hand: ``python docs/gen_reference.py OUTDIR``).
It writes one page per family module (``OUTDIR/family_<module>.rst``) from

* ``tvm_tirx.tile.ir.registry.families()`` -- the registered families, the PTX
  table entries (and so the mnemonics) each claims, and their PTX ISA sections;
* ``tvm_tirx.tile.ir.forms.forms_of(family)`` -- every supported instruction form
  (apache-tvm's PTX table filtered by the family's contract);
* each form's ``contract`` -- operand roles (name, register/memory, atom,
  dtypes), family parameters, ``min_arch`` and ``archs`` (the measured
  floors of ``tvm_tirx/tile/families/arch_floors.json``: the section
  "Architecture floors" of every page).

Enumerating every ``ld``/``st`` form takes a while (tens of thousands of
qualifier combinations), so the pages are cached: they are rewritten only
when this script, the package's ``tile/`` sources or apache-tvm's version change.
"""

from __future__ import annotations

import collections
import hashlib
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
PACKAGE = HERE.parent / "python" / "tvm_tirx"

MEMORY_SLOTS_SHOWN_ELSEWHERE = ("space", "vec", "type")


def _cache_key() -> str:
    import tvm  # pylint: disable=import-outside-toplevel

    digest = hashlib.sha256()
    digest.update(pathlib.Path(__file__).read_bytes())
    digest.update(str(getattr(tvm, "__version__", "")).encode())
    for path in sorted((PACKAGE / "tile").rglob("*")):
        if path.suffix in (".py", ".json") and path.is_file():
            digest.update(str(path.relative_to(PACKAGE)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _heading(text: str, char: str, over: bool = False) -> list:
    line = char * len(text)
    return ([line] if over else []) + [text, line, ""]


def _code(text: str) -> str:
    return f"``{text}``"


def _arch(value) -> str:
    return value if value else "—"


def _arch_order(text: str):
    """Sort key of an arch cell: oldest first (a list of only targets, ``"sm_100f /
    sm_100a only"``, by its first), "—" (no floor) before all."""
    from tvm_tirx.tile.ir.arch_floors import arch_key  # pylint: disable=import-outside-toplevel

    return arch_key(text.split()[0]) if text.startswith("sm_") else (0, 0)


def _contract_arch(contract) -> str:
    """The arch column of a form: its only targets (arch-specific), else its floor."""
    if contract.archs:
        return " / ".join(contract.archs) + " only"
    return _arch(contract.min_arch)


def _only_text(forms) -> str:
    """A sentence for forms that exist only on some targets (arch-specific)."""
    only = sorted({a for f in forms for a in f.contract.archs})
    return f" Arch-specific: only for {' / '.join(only)}." if only else ""


def _orders(orders) -> str:
    """Operand orders for the text; a form without tensor operands reads "none"."""
    return "; ".join(_code(o) if o else "none (parameters only)" for o in orders)


def _atom(atom) -> str:
    """``(4,)``; an extent the family leaves free (``None``) reads ``n``."""
    return "(" + ", ".join("n" if a is None else str(a) for a in atom) + ("," if len(atom) == 1 else "") + ")"


def _dtypes(dtypes) -> str:
    return " / ".join(dtypes)


def _list_table(header, rows, widths=None) -> list:
    out = [".. list-table::", "   :header-rows: 1"]
    if widths:
        out.append("   :widths: " + " ".join(str(w) for w in widths))
    out.append("")
    for row in [header, *rows]:
        for i, cell in enumerate(row):
            cell_lines = str(cell).split("\n") if str(cell) else [""]
            prefix = "   * - " if i == 0 else "     - "
            out.append(prefix + cell_lines[0])
            out += ["       " + line for line in cell_lines[1:]]
    out.append("")
    return out


def _roles_signature(contract) -> str:
    return ", ".join(f"{r.role}" for r in contract.roles)


# --------------------------------------------------------------------------
# memory families (operands include a memory role)
# --------------------------------------------------------------------------


def memory_section(mnemonic: str, forms, isa: str) -> list:
    out = _heading(mnemonic, "-")
    first = forms[0].contract
    roles = first.roles
    call = ", ".join(r.role for r in roles)
    params = sorted({name for f in forms for name in f.contract.params})
    param_text = "".join(f", {p}=..." for p in params)
    out += [
        f"PTX ISA {isa}. {len(forms)} forms.",
        "",
        ".. code-block:: python",
        "",
        f'   T.cuda.tile.apply(T.ptx["{mnemonic}.<qualifiers>"], {call}'
        f'{param_text}, scope="thread", pred=None, preserve_dst=False)',
        "",
    ]
    atoms = [sorted({f.contract.roles[i].atom for f in forms}) for i in range(len(roles))]
    out += _list_table(
        ("Operand", "Kind", "Atoms (one per vector length)", "Written"),
        [
            (
                f"{_code(r.role)} (operand {i + 1})",
                r.kind,
                ", ".join(_code(_atom(a)) for a in atoms[i]),
                "yes" if r.writes else "no",
            )
            for i, r in enumerate(roles)
        ],
    )

    # widths and types
    rows = collections.OrderedDict()
    for form in forms:
        c = form.contract
        reg = next(r for r in c.roles if r.kind == "register")
        mem = next(r for r in c.roles if r.kind == "memory")
        key = (reg.lanes, reg.ptx.ptx_type)
        row = rows.setdefault(
            key,
            {"reg": reg, "mem": mem, "spaces": [], "arch": set(), "count": 0},
        )
        if mem.ptx.space not in row["spaces"]:
            row["spaces"].append(mem.ptx.space)
        row["arch"].add(c.min_arch)
        row["count"] += 1
    out += [f"**Vector lengths and types** of ``{mnemonic}``:", ""]
    table = []
    for (lanes, ptx_type), row in sorted(
        rows.items(), key=lambda kv: (kv[0][0], _bits(kv[1]["reg"].dtypes[0]), kv[0][1])
    ):
        reg, mem = row["reg"], row["mem"]
        bits = _bits(reg.dtypes[0])
        vec = "—" if lanes == 1 else f".v{lanes}"
        dtypes = _dtypes(reg.dtypes)
        if tuple(mem.dtypes) != tuple(reg.dtypes):
            dtypes += f" (memory: {_dtypes(mem.dtypes)})"
        table.append(
            (
                vec,
                f".{ptx_type}",
                _code(_atom(reg.atom)),
                dtypes,
                str(lanes * bits // 8),
                ", ".join("." + s for s in row["spaces"]),
                ", ".join(sorted((_arch(a) for a in row["arch"]), key=_arch_order)),
                str(row["count"]),
            )
        )
    out += _list_table(
        ("Vector", "Type", "Atom", "Dtypes", "Bytes (= alignment)", "State spaces", "Min arch", "Forms"),
        table,
        widths=(8, 8, 8, 30, 10, 20, 8, 8),
    )

    # qualifiers, one row per slot and set of state spaces
    order, tokens = [], collections.OrderedDict()
    for form in forms:
        c = form.contract
        mem = next(r for r in c.roles if r.kind == "memory")
        prev = -1
        for slot, token in c.instruction.modifiers.items():
            if slot in MEMORY_SLOTS_SHOWN_ELSEWHERE:
                continue
            if slot not in order:
                order.insert(prev + 1, slot)
            prev = order.index(slot)
            if token:
                spaces = tokens.setdefault((slot, token), [])
                if mem.ptx.space not in spaces:
                    spaces.append(mem.ptx.space)
    if tokens:
        out += [
            f"**Qualifiers** that appear in supported ``{mnemonic}`` forms, and the state "
            "spaces they appear with. apache-tvm's table (which follows the PTX ISA) "
            "decides which combinations are legal.",
            "",
        ]
        qrows = collections.OrderedDict()
        for slot in order:
            for (s_, token), spaces in tokens.items():
                if s_ == slot:
                    qrows.setdefault((slot, tuple(spaces)), []).append(token)
        out += _list_table(
            ("Slot", "Qualifiers", "State spaces"),
            [
                (slot, " ".join(_code("." + t) for t in toks), ", ".join("." + s for s in spaces))
                for (slot, spaces), toks in qrows.items()
            ],
            widths=(12, 48, 40),
        )

    # parameters
    if params:
        out += [f"**Parameters** of ``{mnemonic}`` (keyword arguments of the call):", ""]
        prow = []
        for name in params:
            with_param = [f for f in forms if name in f.contract.params]
            ptx_types = sorted({f.contract.params[name].ptx_type for f in with_param})
            # the qualifiers every form with the parameter has (minus the spaces)
            common = None
            for f in with_param:
                toks = {t for s, t in f.contract.instruction.modifiers.items() if t and s not in ("space", "vec", "type")}
                common = toks if common is None else common & toks
            required = ", ".join(_code("." + t) for t in sorted(common or ())) or "—"
            prow.append((_code(name), ", ".join("." + t for t in ptx_types), required, str(len(with_param))))
        out += _list_table(("Parameter", "PTX type", "Required by", "Forms"), prow)
    return out


def _bits(dtype: str) -> int:
    from tvm.runtime import DataType  # pylint: disable=import-outside-toplevel

    return DataType(dtype).bits


# --------------------------------------------------------------------------
# register families
# --------------------------------------------------------------------------


def _is_load_store(forms) -> bool:
    """Forms shaped like ld/st: one register and one memory operand, 1-D integer atoms."""
    for form in forms:
        kinds = sorted(r.kind for r in form.contract.roles)
        if kinds != ["memory", "register"]:
            return False
        if any(len(r.atom) != 1 or r.atom[0] is None for r in form.contract.roles):
            return False
    return True


#: A row lists its opcodes one by one up to this many; beyond, it gives their pattern.
OPCODES_LISTED = 24


def _opcode_pattern(instructions) -> tuple:
    """``(pattern, combinations)``: the opcodes of ``instructions`` (one entry's forms)
    as one text, each modifier slot in the ISA's order written as its token, as
    ``(.a|.b)`` when it takes several, inside ``[...]`` when it may be omitted;
    ``combinations`` is how many opcodes the pattern spells."""
    slots = collections.OrderedDict()
    for instr in instructions:
        for slot, token in instr.modifiers.items():
            tokens = slots.setdefault(slot, [])
            if token not in tokens:
                tokens.append(token)
    text, combinations = instructions[0].mnemonic, 1
    for tokens in slots.values():
        present = ["." + t for t in tokens if t]
        combinations *= len(tokens)
        if not present:
            continue
        if "" in tokens:
            text += "[" + "|".join(present) + "]"
        else:
            text += present[0] if len(present) == 1 else "(" + "|".join(present) + ")"
    return text, combinations


def _opcode_list(instructions) -> str:
    """The opcodes of one table row: listed, or for many of them their pattern and count."""
    opcodes = list(dict.fromkeys(i.opcode for i in instructions))
    if len(opcodes) <= OPCODES_LISTED:
        return ", ".join(_code(o) for o in opcodes)
    pattern, combinations = _opcode_pattern(instructions)
    if combinations == len(opcodes):
        return f"{_code(pattern)} ({len(opcodes)} opcodes: every combination)"
    return (
        f"{_code(pattern)} ({len(opcodes)} of its {combinations} combinations: those "
        "apache-tvm's table, following the PTX ISA, allows)"
    )


def generic_section(mnemonic: str, forms, isa: str) -> list:
    """One table row per group of forms with the same operands, parameters and arch."""
    out = _heading(mnemonic, "-")
    orders = list(dict.fromkeys(_roles_signature(f.contract) for f in forms))
    # a form whose only targets exclude sm_90a (redux.sync's .f32) needs those targets
    arches = collections.Counter(
        _contract_arch(f.contract) if f.contract.archs and "sm_90a" not in f.contract.archs else _arch(f.contract.min_arch)
        for f in forms
    )
    arch_text = ", ".join(f"{n} need {a}" for a, n in sorted(arches.items(), key=lambda kv: _arch_order(kv[0])) if a != "—")
    head = f"PTX ISA {isa}. " if isa else ""
    out += [
        head
        + f"{len(forms)} forms"
        + (f" ({arch_text})." if arch_text else "; all assemble for sm_90a.")
        + _only_text(forms),
        "",
        "Operand orders: " + _orders(orders) + ".",
        "",
    ]
    collective = forms[0].contract.collective
    if collective.width > 1:
        out += [
            f"{collective.name.capitalize()}-collective: the {collective.width} {collective.member}s "
            f"of a {collective.name} issue each instruction together, so they are inside the atom "
            f"(no group axes at ``scope=\"{collective.name}\"``; the {collective.name}s are the "
            "group at wider scopes).",
            "",
        ]
    groups = collections.OrderedDict()
    for form in forms:
        c = form.contract
        entry = form.key.split(":", 1)[0]
        roles = tuple(
            (r.role, r.kind, r.atom, r.dtypes, r.ptx.space if r.kind == "memory" else "") for r in c.roles
        )
        params = tuple(sorted(c.params)) + tuple(sorted(c.options))
        sig = (entry, roles, params, _contract_arch(c))
        groups.setdefault(sig, []).append(c.instruction)
    with_params = any(sig[2] for sig in groups)
    rows = []
    for (entry, roles, params, min_arch), instructions in groups.items():
        operands = []
        for role, kind, atom, dtypes, space in roles:
            where = (f" (.{space} memory)" if space else " (generic address)") if kind == "memory" else ""
            operands.append(f"* {_code(role)} {_code(_atom(atom))}{where}: {_dtypes(dtypes)}")
        row = [_opcode_list(instructions), "\n".join(operands)]
        if with_params:
            row.append(", ".join(_code(p) for p in params) or "—")
        row.append(min_arch)
        rows.append(tuple(row))
    header = ["Opcodes", "Operands: atom, dtypes"] + (["Parameters"] if with_params else []) + ["Min arch"]
    widths = (46, 36, 8, 10) if with_params else (50, 38, 12)
    out += _list_table(tuple(header), rows, widths=widths)
    return out


# --------------------------------------------------------------------------
# architecture floors
# --------------------------------------------------------------------------


def _tokens(opcode: str) -> set:
    """The mnemonic and the ``.``-qualifiers of ``opcode``, as the table shows them."""
    head, *rest = opcode.split(".")
    return {head, *("." + t for t in rest)}


def floor_rows(forms) -> list:
    """``[(arch text, count, qualifiers first seen there, example opcode)]`` of
    ``forms``, oldest floor first: the forms grouped by the targets they need
    (each contract's ``min_arch`` / ``archs``, from ``arch_floors.json``)."""
    from tvm_tirx.tile.ir.arch_floors import arch_key, floor_of  # pylint: disable=import-outside-toplevel

    def refused(form):
        record = floor_of(*form.key.split(":", 1))
        return record is not None and bool(record.refused)

    groups = collections.OrderedDict()
    order = sorted(forms, key=lambda f: (refused(f), arch_key(f.contract.min_arch or "sm_75"), bool(f.contract.archs)))
    for form in order:
        text = _contract_arch(form.contract)
        if refused(form):
            text += " (the table's certification: ptxas assembles it for no target)"
        groups.setdefault(text, []).append(form)
    rows, seen = [], set()
    for text, group in groups.items():
        tokens = set().union(*(_tokens(f.opcode) for f in group))
        new = sorted(tokens - seen)
        seen |= tokens
        first = " ".join(_code(t) for t in new) if rows else "—"
        rows.append((text, len(group), first or "—", _code(group[0].opcode)))
    return rows


def floors_section(family, forms) -> list:
    """The family's "Architecture floors" section: its forms grouped by the oldest
    target ptxas accepts them for (the data the compile-time arch rule reads)."""
    from tvm_tirx.tile.ir.arch_floors import measured_with  # pylint: disable=import-outside-toplevel

    rows = floor_rows(forms)
    summary = rows[0][0] + "".join(f" ({r[2]}: {r[0]})" for r in rows[1:] if r[2] != "—")
    out = _heading("Architecture floors", "-")
    out += [
        f"Summary: {summary}." if len(summary) < 400 else f"Oldest target: {rows[0][0]}; see the table.",
        "",
        f"Measured with ptxas {measured_with().get('ptxas', '')} by ``tools/probe_arch_floors.py``: "
        "every form of the family assembled for each target, its floor the oldest target that "
        "accepts it (sm_75 is the oldest this ptxas knows).  A kernel compiled for an older "
        "target is refused when it is lowered, before nvcc runs, with a ``TileError`` naming the "
        "opcode, the floor and the target.  A floor with the ``a``/``f`` suffix needs a target "
        "with one; \"only\" lists every target that accepts the form.  The qualifiers column "
        "names the opcode tokens that first appear at that floor.  Forms that ptxas assembles "
        "for no target keep the architecture apache-tvm's table certifies them at (they are "
        "refused below it, and by ptxas above); those the table certifies nowhere are no tile "
        "forms.",
        "",
    ]
    out += _list_table(
        ("Oldest target", "Forms", "Qualifiers first seen", "Example"),
        [(a, str(n), q, e) for a, n, q, e in rows],
        widths=(22, 8, 40, 30),
    )
    return out


# --------------------------------------------------------------------------
# pages
# --------------------------------------------------------------------------


def family_page(family, forms_by_mnemonic) -> str:
    """The reference page of ``family`` (a registered :class:`Family`)."""
    mnemonics = list(forms_by_mnemonic)
    total = sum(len(f) for f in forms_by_mnemonic.values())
    title = f"{family.name} family: " + ", ".join(mnemonics)
    lines = [
        ".. This page is generated by docs/gen_reference.py at build time; do not edit.",
        "",
        f".. _family-{family.name}:",
        "",
        *_heading(title, "="),
        f"Module :mod:`{family.module}`; {total} supported forms. The module's own "
        "description of the contract follows; the tables after it are computed from "
        "the forms themselves.",
        "",
        f".. automodule:: {family.module}",
        "   :no-members:",
        "",
        ".. contents:: On this page",
        "   :local:",
        "   :depth: 1",
        "",
    ]
    every = [f for forms in forms_by_mnemonic.values() for f in forms]
    if every:
        lines += floors_section(family, every)
    for m, forms in forms_by_mnemonic.items():
        if not forms:
            lines += _heading(m, "-") + ["No supported form.", ""]
        elif _is_load_store(forms):
            lines += memory_section(m, forms, family.isa_section(m))
        else:
            lines += generic_section(m, forms, family.isa_section(m))
    return "\n".join(lines) + "\n"


def _summary_rows(family, by_mnemonic) -> list:
    from tvm_tirx.tile.rules.static_rules import rule_arch  # pylint: disable=import-outside-toplevel

    rows = []
    for m, fm in by_mnemonic.items():
        orders = list(dict.fromkeys(_roles_signature(f.contract) for f in fm))
        newer = sum(1 for f in fm if rule_arch(f.contract, "sm_90a") is not None)
        rows.append(
            (
                _code(m),
                f":ref:`{family.name} <family-{family.name}>`",
                _orders(orders),
                str(len(fm)),
                str(newer),
            )
        )
    return rows


def _write(path: pathlib.Path, text: str) -> None:
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def generate(outdir: pathlib.Path) -> list:
    """Write ``family_<name>.rst`` per registered family and ``summary.inc`` into
    ``outdir`` (unless cached); return the paths."""
    import tvm_tirx  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
    from tvm_tirx.tile.ir.forms import forms_of  # pylint: disable=import-outside-toplevel
    from tvm_tirx.tile.ir.registry import families  # pylint: disable=import-outside-toplevel

    outdir.mkdir(parents=True, exist_ok=True)
    key = _cache_key()
    stamp = outdir / ".family_pages"
    if stamp.exists():
        saved = stamp.read_text().split()
        if saved and saved[0] == key and all((outdir / name).exists() for name in saved[1:]):
            return [outdir / name for name in saved[1:]]
    written, summary = [], []
    for family in families():
        by_mnemonic = {m: [] for m in family.mnemonics()}
        for form in forms_of(family):
            by_mnemonic[form.contract.instruction.mnemonic].append(form)
        summary += _summary_rows(family, by_mnemonic)
        path = outdir / f"family_{family.name}.rst"
        _write(path, family_page(family, by_mnemonic))
        written.append(path)
    header = ("Mnemonic", "Family", "Operand order(s)", "Forms", "Forms not on sm_90a")
    path = outdir / "summary.inc"
    _write(path, "\n".join(_list_table(header, summary, widths=(12, 14, 44, 12, 18))))
    written.append(path)
    for old in outdir.glob("family_*.rst"):
        if old not in written:
            old.unlink()
    stamp.write_text(" ".join([key, *[p.name for p in written]]) + "\n")
    return written


if __name__ == "__main__":
    target = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else HERE / "reference")
    for p in generate(target):
        print(f"wrote {p}")
