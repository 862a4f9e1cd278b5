"""Type stub of the package root: the names ``tvm_tirx/__init__.py`` loads lazily."""

from . import build as build
from . import demo as demo
from . import errors as errors
from . import ops as ops
from . import schedule as schedule
from . import script as script
from . import testing as testing
from . import tile as tile
from .build.debug import debug_build as debug_build
from .build.kernel import Kernel as Kernel
from .build.kernel import compile as compile
from .errors import TileError as TileError
from ._version import __version__ as __version__
from .tile.lower.lower import LowerTileApply as LowerTileApply

__all__ = ["TileError", "compile", "Kernel", "LowerTileApply", "debug_build", "__version__"]
