"""Type stub of the package root: the names ``tvm_tirx/__init__.py`` loads lazily."""

from . import demo as demo
from . import errors as errors
from . import relax as relax
from . import script as script
from . import testing as testing
from . import tile as tile
from .errors import TileError as TileError
from .kernel import Kernel as Kernel
from .kernel import compile as compile
from .tile.lower import LowerTileApply as LowerTileApply

__version__: str
__all__ = ["TileError", "compile", "Kernel", "LowerTileApply", "__version__"]
