"""Instruction families: one module each, each exporting ``MNEMONICS`` and ``contract``."""
