"""The lowering pass that expands tile calls."""
