"""apache-tvm plugin hook (entry point group ``tvm.backends``).

apache-tvm calls :func:`autoload` at the end of ``import tvm``.  In
runtime-only mode (``TVM_USE_RUNTIME_LIB=1``) the compiler is absent, so the
hook installs nothing: compiled kernels need no tvm_tirx code to run.

This module is loaded while ``import tvm`` is still running, and in
runtime-only mode too, so it imports nothing of the compiler at load time:
:func:`install` imports what it installs.
"""


def install() -> None:
    """Install tvm_tirx into apache-tvm (idempotent): the TVMScript names
    (:func:`tvm_tirx.script.install.install`) and the ``"tvm_tirx"`` TIR and
    Relax pipelines, so that ``tvm.compile(..., tir_pipeline="tvm_tirx",
    relax_pipeline="tvm_tirx")`` works after a plain ``import tvm``."""
    # pylint: disable=import-outside-toplevel  # loaded during `import tvm`, see above
    from .build.pipeline import register_pipeline
    from .ops.relax import register_relax_pipeline
    from .script.install import install as install_script_names

    install_script_names()
    register_pipeline()
    register_relax_pipeline()


def autoload() -> None:
    """Install tvm_tirx (:func:`install`) unless TVM runs runtime-only."""
    import tvm  # pylint: disable=import-outside-toplevel  # tvm is importing us: bind it, nothing more

    if getattr(tvm, "_RUNTIME_ONLY", False):
        return
    install()
