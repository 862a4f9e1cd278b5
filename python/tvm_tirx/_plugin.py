"""apache-tvm plugin hook (entry point group ``tvm.backends``).

apache-tvm calls :func:`autoload` at the end of ``import tvm``.  In
runtime-only mode (``TVM_USE_RUNTIME_LIB=1``) the compiler is absent, so the
hook installs nothing: compiled kernels need no tvm_tirx code to run.
"""


def autoload() -> None:
    """Install tvm_tirx's TVMScript names unless TVM runs runtime-only."""
    import tvm  # pylint: disable=import-outside-toplevel

    if getattr(tvm, "_RUNTIME_ONLY", False):
        return
    from .script.install import install  # pylint: disable=import-outside-toplevel

    install()
