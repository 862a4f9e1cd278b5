"""The package's layout holds: layers without import cycles, and small modules.

Every import statement of ``python/tvm_tirx`` counts, those inside functions
too (a function-level import hides a cycle from Python's loader, not from the
design); only those under ``if TYPE_CHECKING:`` do not (they never run).  Importing ``a.b.c`` from outside ``a.b`` runs ``a/b/__init__.py``
first, so such an import also depends on the package ``a.b``.
"""

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "python" / "tvm_tirx"

#: The units of the package (subpackages and root modules), lowest layer first: a unit
#: imports only units of lower layers.  ``tvm_tirx`` is the root ``__init__.py``.
LAYERS = (
    ("_version", "excerpts"),  # base: no compiler, no other unit (excerpts: the standard library only)
    ("errors", "arch"),  # the error types (with their source excerpts), CUDA arch names
    ("tile",),  # the tile op, its contracts, checks and lowering
    ("script",),  # the TVMScript names (T) over the tile op
    ("schedule",),  # tile calls in TIR schedules (tensor intrinsics)
    ("build",),  # the compile path: pipeline, compile, Kernel
    ("kernels",),  # kernel generators written with tile operations (public API only)
    ("ops", "testing", "cli"),  # callers of the compile path
    ("_plugin",),  # the tvm.backends hook: installs script, build, ops
    ("tvm_tirx",),  # the root: lazy public names through the hook
    ("demo", "__main__"),  # programs
)

#: Most lines a module may have.
MAX_LINES = 400
#: Modules allowed over MAX_LINES for now.
LONG_MODULES: set = set()
#: Type stubs are exempt: ``script/tirx.pyi`` declares the whole ``T`` namespace in one file,
#: which is where mypy and the IDEs look for it.
EXEMPT_SUFFIXES = (".pyi",)


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _package_of(name: str) -> str:
    return name if MODULES[name].name == "__init__.py" else name.rpartition(".")[0]


def _import_nodes(tree):
    """Every import statement of ``tree``, those in functions too; not those under
    ``if TYPE_CHECKING:`` (annotations only: they never run)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def _imported(name: str) -> set:
    """The package's modules that module ``name`` imports, anywhere in its code."""
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    here = _package_of(name)
    found = set()
    for node in _import_nodes(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = here.split(".")[: len(here.split(".")) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            for alias in node.names:
                sub = f"{module}.{alias.name}"
                found.add(sub if sub in MODULES else module)
    out = set()
    for target in found:
        if target not in MODULES or target == name:
            continue
        out.add(target)
        # importing a.b.c from outside a.b runs a/b/__init__.py first
        parts = target.split(".")
        for i in range(2, len(parts)):
            parent = ".".join(parts[:i])
            if parent != name and not name.startswith(parent + "."):
                out.add(parent)
    return out


GRAPH = {name: _imported(name) for name in MODULES}


def _cycle(graph: dict):
    """One cycle of ``graph`` (a list of nodes, first repeated last), or None."""
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def _unit(name: str) -> str:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _unit_graph() -> dict:
    units = {}
    for name, targets in GRAPH.items():
        units.setdefault(_unit(name), set()).update(_unit(t) for t in targets if _unit(t) != _unit(name))
    return units


def test_the_graph_sees_function_level_imports():
    # the hook imports what it installs inside a function; the graph must see it
    assert "tvm_tirx.script.install" in GRAPH["tvm_tirx._plugin"]
    assert "tvm_tirx.build.pipeline" in GRAPH["tvm_tirx._plugin"]


def test_no_import_cycle_between_modules():
    cycle = _cycle(GRAPH)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_no_import_cycle_between_subpackages():
    cycle = _cycle(_unit_graph())
    assert cycle is None, "import cycle between units: " + " -> ".join(cycle)


def test_a_unit_imports_only_lower_layers():
    layer = {unit: i for i, units in enumerate(LAYERS) for unit in units}
    units = _unit_graph()
    assert set(units) <= set(layer), f"units without a layer in LAYERS: {sorted(set(units) - set(layer))}"
    upward = [(a, b) for a, targets in units.items() for b in targets if layer[b] >= layer[a]]
    assert not upward, f"imports of a unit in the same or a higher layer: {sorted(upward)}"


def test_the_modules_loaded_at_import_tvm_import_no_compiler_at_load():
    # apache-tvm imports these while `import tvm` runs, in runtime-only mode too
    for name in ("tvm_tirx", "tvm_tirx._plugin"):
        tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
        top = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
        names = {alias.name for n in top for alias in n.names}
        assert names <= {"importlib", "_plugin"}, (name, names)


@pytest.mark.parametrize("package", sorted(n for n, p in MODULES.items() if p.name == "__init__.py" and n.count(".") == 1))
def test_subpackages_import_tvm_before_their_modules(package):
    # importing tvm runs the tvm.backends hook, which imports tvm_tirx's script, tile and
    # build modules: a subpackage that imported one of its own modules first would be
    # half-imported when the hook imports it again
    tree = ast.parse(MODULES[package].read_text(encoding="utf-8"))
    imports = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
    assert imports, package
    first = imports[0]
    assert isinstance(first, ast.Import) and [a.name for a in first.names] == ["tvm"], package


def test_no_module_over_the_line_limit():
    long = {}
    for path in sorted(PACKAGE.rglob("*")):
        if path.suffix not in (".py", ".pyi") or path.suffix in EXEMPT_SUFFIXES:
            continue
        rel = str(path.relative_to(PACKAGE))
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_LINES and rel not in LONG_MODULES:
            long[rel] = lines
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_the_allow_list_names_only_long_modules():
    for rel in LONG_MODULES:
        path = PACKAGE / rel
        assert path.exists() and len(path.read_text(encoding="utf-8").splitlines()) > MAX_LINES, rel


#: The stages of ``tvm_tirx.tile``, lowest first: a stage imports only lower stages.
#: ``tile`` is the package's facade (its ``__init__``, the names a family imports);
#: the families sit on it, and the fragment maps (which re-export the wgmma family's
#: row and column maps) on them.  ``registry.families()`` loads the family modules by
#: name, as a plugin registry does, so no stage imports them.
TILE_STAGES = (
    ("ir",),  # what a call is: the PTX table, contracts, the family registry, views, operands
    ("analysis",),  # facts about values: the prover, machine integers, bounds, uniformity, threads
    ("rules",),  # one call: parse-time rules, operand rules, the tile op, raw calls, emission
    ("kernel",),  # a whole kernel: sites, decoded calls, facts, order, protocol, kernel rules
    ("lower",),  # the pass that expands tile calls
    ("tile",),  # the facade
    ("families",),  # the instruction families
    ("fragments",),  # the accumulator fragment maps
)


def _stage(name: str) -> str | None:
    """The stage of module ``name`` of ``tvm_tirx.tile`` (None outside it)."""
    parts = name.split(".")
    if parts[:2] != ["tvm_tirx", "tile"]:
        return None
    return parts[2] if len(parts) > 2 else "tile"


def test_the_tile_stages_import_only_lower_stages():
    layer = {stage: i for i, stages in enumerate(TILE_STAGES) for stage in stages}
    stages = {}
    for name, targets in GRAPH.items():
        here = _stage(name)
        if here is None:
            continue
        assert here in layer, f"{name}: tile/{here} is in no stage of TILE_STAGES"
        stages.setdefault(here, set()).update(s for s in map(_stage, targets) if s is not None and s != here)
    upward = sorted((a, b) for a, targets in stages.items() for b in targets if layer[b] > layer[a])
    assert not upward, f"tile stages importing a higher stage: {upward}"


def test_the_tile_package_is_split_by_stage():
    """Every module of ``tvm_tirx.tile`` but the facade and the fragment maps lives in a stage."""
    loose = sorted(p.name for p in (PACKAGE / "tile").glob("*.py") if p.name not in ("__init__.py", "fragments.py"))
    assert not loose, f"modules outside the stages: {loose}"
