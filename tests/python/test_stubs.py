"""The type stub of ``from tvm_tirx.script import tirx as T`` (python/tvm_tirx/script/tirx.pyi).

mypy passes on the tutorials, reports misuse of the added names, and the stub
declares every name that ``tvm_tirx.script.install`` installs, with the
parameters the runtime functions take.
"""

import ast
import dataclasses
import inspect
import re
from pathlib import Path

import pytest

mypy_api = pytest.importorskip("mypy.api")

ROOT = Path(__file__).resolve().parents[2]
STUB = ROOT / "python" / "tvm_tirx" / "script" / "tirx.pyi"
STUBS = [STUB, STUB.with_name("__init__.pyi"), ROOT / "python" / "tvm_tirx" / "__init__.pyi"]
# Types that exist for type checkers only (no runtime object in T).
STUB_ONLY = {"TensorView", "PrimExpr", "PrimFunc", "PtxInstr", "TensorRegion", "Shape", "Index", "Scope", "Axis"}


@pytest.fixture(scope="module")
def mypy_run(request, tmp_path_factory):
    """Run mypy with the project's configuration (cache kept between test runs)."""
    try:
        cache = request.config.cache.mkdir("mypy")
    except AttributeError:  # -p no:cacheprovider
        cache = tmp_path_factory.mktemp("mypy_cache")

    def run(*paths):
        args = ["--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(cache)]
        stdout, stderr, status = mypy_api.run(args + [str(p) for p in paths])
        return stdout + stderr, status

    return run


@pytest.mark.slow
def test_mypy_passes_on_tutorials_and_stubs(mypy_run):
    out, status = mypy_run(ROOT / "tutorials", *STUBS)
    assert status == 0, out
    assert "Success" in out


def test_mypy_does_not_need_torch(mypy_run, tmp_path):
    # torch is optional: with the project's configuration, a module that uses it
    # type-checks where torch is not installed (site-packages hidden here)
    snippet = tmp_path / "uses_torch.py"
    snippet.write_text("import torch\n\nx = torch.zeros(3)\n")
    out, status = mypy_run("--no-site-packages", snippet)
    assert status == 0, out


MISUSE = """\
from tvm_tirx.script import tirx as T


@T.function
def kernel(A: T.Tensor((64, 4), "float32", align=16)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tid = T.cuda.thread_idx("x")
    r = T.alloc_local((4,), "float32", layout="default")
    s = T.alloc_shared((64, 4), "float32", align=16)
    T.cuda.tile.apply(T.ptx["ld.shared.v4.b32"], r, s.sub[tid, :].view(4), scope="thread")
    T.cuda.tile.ewise(lambda v: v * T.sigmoid(v), r, r)
    T.cuda.cta_sync()
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, blok=64))  # line 13
    T.cuda.thread_idx(3)  # line 14
    T.alloc_local((4,), "float32", algin=16)  # line 15
    T.cuda.tile.apply(T.ptx["mov.b32"], r, T.float32(0), scope="wrap")  # line 16
    T.cuda.tile.apply()  # line 17
    r.sub[0].veiw(1)  # line 18
    T.cuda.LaunchConfg(grid=1)  # line 19
    T.device_entry(lanch=None)  # line 20


import tvm_tirx  # noqa: E402

k = tvm_tirx.compile(kernel, "cuda", "sm_90a")  # line 25
k.cuda_sorce  # line 26
"""

EXPECTED = {
    13: 'Unexpected keyword argument "blok" for "LaunchConfig"',
    14: 'Argument 1 to "thread_idx"',
    15: 'Unexpected keyword argument "algin" for "alloc_local"',
    16: 'Argument "scope" to "apply"',
    17: 'Missing positional argument "instr" in call to "apply"',
    18: '"TensorView" has no attribute "veiw"',
    19: 'has no attribute "LaunchConfg"',
    20: 'Unexpected keyword argument "lanch" for "device_entry"',
    25: 'Too many positional arguments for "compile"',
    26: '"Kernel" has no attribute "cuda_sorce"',
}


def test_mypy_reports_misuse_of_added_names(mypy_run, tmp_path):
    snippet = tmp_path / "misuse.py"
    snippet.write_text(MISUSE)
    out, status = mypy_run(snippet)
    assert status == 1, out
    errors = {}
    for line in out.splitlines():
        match = re.match(r".*misuse\.py:(\d+): error: ", line)
        if match:
            errors.setdefault(int(match.group(1)), []).append(line)
    # The correct lines (1-12, 23) are clean; each misuse is reported where it is.
    assert sorted(errors) == sorted(EXPECTED), out
    for lineno, text in EXPECTED.items():
        assert any(text in e for e in errors[lineno]), (lineno, errors[lineno])


# ---------------------------------------------------------------------------
# The stub cannot drift from the runtime namespace
# ---------------------------------------------------------------------------


def _stub():
    return ast.parse(STUB.read_text())


def _members(body):
    """name -> node for the functions, classes and annotated names of a body."""
    out = {}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            out.setdefault(node.name, []).append(node)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out.setdefault(node.target.id, []).append(node)
    return out


def _class(body, name):
    (node,) = [n for n in body if isinstance(n, ast.ClassDef) and n.name == name]
    return node


def _params(fn):
    """[(name, kind, default)] of a stub function; default is ``inspect._empty`` or a literal."""
    a = fn.args
    P = inspect.Parameter
    positional = [(x, P.POSITIONAL_ONLY) for x in a.posonlyargs] + [
        (x, P.POSITIONAL_OR_KEYWORD) for x in a.args
    ]
    defaults = [P.empty] * (len(positional) - len(a.defaults)) + list(a.defaults)
    out = [(x.arg, kind, d) for (x, kind), d in zip(positional, defaults)]
    if a.vararg:
        out.append((a.vararg.arg, P.VAR_POSITIONAL, P.empty))
    out += [(x.arg, P.KEYWORD_ONLY, P.empty if d is None else d) for x, d in zip(a.kwonlyargs, a.kw_defaults)]
    if a.kwarg:
        out.append((a.kwarg.arg, P.VAR_KEYWORD, P.empty))
    return [(n, k, d if d is P.empty else ast.literal_eval(d)) for n, k, d in out]


def _check_signature(stub_fns, runtime, what):
    expected = [(p.name, p.kind, p.default) for p in inspect.signature(runtime).parameters.values()]
    for fn in stub_fns:
        got = _params(fn)
        assert [(n, k) for n, k, _ in got] == [(n, k) for n, k, _ in expected], what
        for (name, _, d_stub), (_, _, d_runtime) in zip(got, expected):
            if d_stub is not inspect.Parameter.empty:
                assert d_stub == d_runtime, (what, name)


def test_stub_declares_every_installed_name():
    from tvm_tirx.script import tirx as T  # noqa: N812

    stub = _stub()
    top = _members(stub.body)
    cuda = _members(_class(stub.body, "_CudaNamespace").body)
    tile = _members(_class(stub.body, "_TileNamespace").body)
    assert "__getattr__" in top  # a partial stub: other stock names are Any
    assert {"cuda", "ptx"} <= set(top)

    # Top level: every T name whose value tvm_tirx defines (what install.py
    # registers with register_script_namespace).
    ours = {
        name
        for name in dir(T)
        if (getattr(getattr(T, name), "__module__", None) or "").startswith("tvm_tirx")
    }
    assert {"function", "Tensor", "alloc_local", "alloc_shared", "device_entry"} <= ours
    assert ours <= set(top), sorted(ours - set(top))

    # T.cuda: every attribute, stock or ours (the stub has no __getattr__ there,
    # so a misspelt T.cuda name is an error); T.cuda.tile: exactly apply, ewise, reduce_lanes.
    runtime_cuda = {n for n in dir(T.cuda) if not n.startswith("_")}
    assert runtime_cuda == set(cuda), (sorted(runtime_cuda - set(cuda)), sorted(set(cuda) - runtime_cuda))
    assert set(vars(T.cuda.tile)) == set(tile)

    # Everything the stub declares exists at runtime (but the checker-only types).
    declared = {n for n in top if not n.startswith("_")} - STUB_ONLY
    assert not [n for n in declared if not hasattr(T, n)]

    # TensorView's members are those of a real buffer.
    from tvm.tirx import decl_buffer

    buf = decl_buffer((4, 2), "float32")
    view_members = set(_members(_class(stub.body, "TensorView").body)) - {"__getitem__", "__setitem__"}
    assert not [n for n in view_members if not hasattr(buf, n)]


def test_stub_signatures_match_runtime():
    from tvm_tirx.script import builders, launch_config
    from tvm_tirx.script import tirx as T  # noqa: N812

    stub = _stub()
    top = _members(stub.body)
    cuda_cls = _class(stub.body, "_CudaNamespace")
    cuda = _members(cuda_cls.body)
    tile = _members(_class(stub.body, "_TileNamespace").body)

    for name in ("function", "Tensor", "device_entry"):
        _check_signature(top[name], getattr(T, name), name)
    # The alloc wrappers pass *args/**kwargs on to apache-tvm's builders: the
    # stub declares the parameters those accept.
    for name in ("alloc_local", "alloc_shared"):
        _check_signature(top[name], builders._STOCK[name], name)  # pylint: disable=protected-access
        wrapper = inspect.signature(getattr(T, name)).parameters
        assert wrapper["dtype"].default == "float32" and wrapper["layout"].default == "default"
    for name in ("thread_idx", "block_idx", "block_dim", "grid_dim", "lane_id", "warp_id",
                 "cluster_ctaid", "cta_sync", "warp_sync", "cluster_sync"):
        _check_signature(cuda[name], getattr(T.cuda, name), f"cuda.{name}")
    for name in ("apply", "ewise", "reduce_lanes"):
        _check_signature(tile[name], getattr(T.cuda.tile, name), f"cuda.tile.{name}")

    # LaunchConfig: the stub's init fields are the dataclass's, same defaults.
    lc = _class(cuda_cls.body, "LaunchConfig")
    stub_fields = [
        (n.target.id, ast.literal_eval(n.value))
        for n in lc.body
        if isinstance(n, ast.AnnAssign) and not isinstance(n.value, ast.Call)
    ]
    runtime_fields = [(f.name, f.default) for f in dataclasses.fields(launch_config.LaunchConfig) if f.init]
    assert stub_fields == runtime_fields
    assert T.cuda.LaunchConfig is launch_config.LaunchConfig


def test_package_root_stub_matches_the_lazy_names():
    import tvm_tirx  # pylint: disable=import-outside-toplevel

    tree = ast.parse((ROOT / "python" / "tvm_tirx" / "__init__.pyi").read_text())
    declared = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            declared |= {a.asname or a.name for a in node.names}
    runtime = set(tvm_tirx._LAZY) | set(tvm_tirx._SUBMODULES)  # pylint: disable=protected-access
    assert runtime <= declared, runtime - declared
    for name in declared:
        assert getattr(tvm_tirx, name) is not None, name
