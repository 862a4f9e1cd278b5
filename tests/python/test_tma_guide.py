"""docs/guides/tma.rst: its example kernels compile and assemble, and do what the page says."""

import pathlib
import re
import textwrap

import pytest

import tvm_tirx
from tvm_tirx import testing

PAGE = pathlib.Path(__file__).resolve().parents[2] / "docs" / "guides" / "tma.rst"


def _guide_source() -> str:
    """The page's ``tma_guide.py``: its code blocks named so, in order."""
    blocks = re.findall(r"\.\. code-block:: python\n\n((?:   .*\n|\n)+)", PAGE.read_text())
    parts = [textwrap.dedent(b) for b in blocks if textwrap.dedent(b).startswith("# tma_guide.py")]
    assert len(parts) == 2
    return "\n\n".join(parts)


@pytest.fixture(scope="module")
def guide(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tma_guide")
    source = _guide_source()
    return {name: testing.load_kernel(source, folder, name=name) for name in ("add_one", "add_one_any_shape")}


def test_the_page_is_in_the_index_and_linked_from_the_guides():
    docs = PAGE.parents[1]
    assert "guides/tma" in (docs / "index.rst").read_text()
    for page in ("mbarrier_bulk.rst", "wgmma.rst", "memory.rst", "dynamic_shared_memory.rst"):
        assert ":doc:`tma`" in (docs / "guides" / page).read_text(), page


@testing.requires_nvcc
def test_the_examples_assemble_for_sm_90a(guide):
    for func in guide.values():
        testing.assemble(tvm_tirx.compile(func, target="cuda", arch="sm_90a"))


def test_the_maps_and_the_run_time_asserts_are_what_the_page_says(guide):
    # one map per tensor, encoded on the host; the coordinates reach PTX innermost first
    fixed = testing.lower(guide["add_one"]).script()
    assert fixed.count("T.tensormap_encode_tiled(") == 2 and "oob_fill=0" in fixed
    dynamic = testing.lower(guide["add_one_any_shape"]).script()
    assert "global stride not a multiple of 16 bytes: expected the byte stride n * 4 of A a multiple of 16" in dynamic
    assert "global extent out of range" in dynamic


@pytest.mark.gpu
def test_the_examples_run_on_the_gpu(guide, torch_cuda):
    torch = torch_cuda
    a = torch.randn(64, 64, device="cuda")
    b = torch.full_like(a, float("nan"))
    tvm_tirx.compile(guide["add_one"], target="cuda")(a, b)
    torch.cuda.synchronize()
    assert torch.equal(b, a + 1)
    kernel = tvm_tirx.compile(guide["add_one_any_shape"], target="cuda")
    a = torch.randn(100, 36, device="cuda")
    b = torch.full_like(a, float("nan"))
    kernel(a, b)
    torch.cuda.synchronize()
    assert torch.equal(b, a + 1)
    with pytest.raises(ValueError, match="global stride not a multiple of 16 bytes"):
        kernel(torch.zeros(100, 35, device="cuda"), torch.zeros(100, 35, device="cuda"))
