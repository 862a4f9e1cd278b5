"""The package version (one place: the root package and the compile cache read it)."""

__version__ = "0.1.0"
