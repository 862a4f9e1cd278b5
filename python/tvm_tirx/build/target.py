"""The apache-tvm ``Target`` a kernel is compiled for: CUDA, with an ``sm_`` arch."""

from __future__ import annotations

import tvm

from ..arch import gpu_arch as _gpu_arch

__all__ = ["resolve_target"]


def resolve_target(target="cuda", arch: str | None = None):
    """The apache-tvm ``Target`` for ``target`` and ``arch``.

    Parameters
    ----------
    target : str | dict | tvm.target.Target
        ``"cuda"``, a target dict, or a Target.
    arch : str | None
        ``"sm_90a"`` and the like.  Defaults to GPU 0's own arch
        (:func:`tvm_tirx.arch.gpu_arch`: ``sm_90a`` on Hopper, with the ``a``
        that wgmma and setmaxnreg need).

    Raises
    ------
    ValueError
        No GPU is present and ``arch`` was not given, the target is not CUDA, or it is an
        option string such as ``"cuda -arch=sm_90a"`` (apache-tvm 0.27 parses none; the
        message gives the ``arch=`` or dict form of the same target).
    """
    if isinstance(target, tvm.target.Target):
        if arch is None:
            return target
        target = dict(target.export())
    if isinstance(target, str):
        if target.strip() != "cuda":
            raise ValueError(_string_target_error(target))
        target = {"kind": "cuda"}
    target = dict(target)
    if target.get("kind") != "cuda":
        raise ValueError(f"tvm_tirx.compile: target kind must be 'cuda', got {target.get('kind')!r}")
    if arch is None:
        arch = target.get("arch") or _gpu_arch()
    if arch is None:
        raise ValueError(
            "tvm_tirx.compile: no CUDA GPU is present, so the architecture cannot be "
            "detected; pass arch=, e.g. tvm_tirx.compile(func, target='cuda', arch='sm_90a')"
        )
    target["arch"] = arch
    return tvm.target.Target(target)


def _string_options(text: str) -> dict:
    """``{"arch": "sm_90a"}`` of an option string's ``-arch=sm_90a`` / ``-arch sm_90a`` parts."""
    options, words = {}, text.split()[1:]
    i = 0
    while i < len(words):
        word = words[i].lstrip("-")
        if "=" in word:
            key, value = word.split("=", 1)
        else:
            key, value = word, words[i + 1] if i + 1 < len(words) and not words[i + 1].startswith("-") else "true"
            i += value != "true"
        options[key.replace("-", "_")] = int(value) if value.isdigit() else value
        i += 1
    return options


def _string_target_error(text: str) -> str:
    """The message for a string target other than ``"cuda"``: for the option strings of
    apache-tvm before 0.27 (``"cuda -arch=sm_90a"``), the same target as ``arch=`` or a dict."""
    kind = text.split()[0] if text.split() else ""
    if kind != "cuda":
        return f"tvm_tirx.compile: target must be 'cuda' (or a dict / Target of kind 'cuda'), got {text!r}"
    options = _string_options(text)
    as_dict = {"kind": "cuda", **options}
    fix = f"pass target={as_dict!r}"
    if set(options) == {"arch"}:
        fix = f"pass target='cuda', arch={options['arch']!r} (or the dict target {as_dict!r})"
    return (f"tvm_tirx.compile: target {text!r} is an option string, which apache-tvm 0.27 no longer parses "
            f"(targets are 'cuda', a dict or a tvm.target.Target); {fix}")
