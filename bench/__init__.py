"""Benchmarks: run each script directly (``python bench/copy.py``)."""
