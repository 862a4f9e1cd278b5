"""CUDA architecture names and the GPU present: the one parser and the one query.

``sm_90a`` names SM version 9.0 with the arch-specific (``a``) feature set;
``sm_100f`` the family-portable (``f``) one (CUDA C++ Programming Guide,
"Compute Capabilities"; PTX ISA 1.3, "Architecture-specific features").
"""

from __future__ import annotations

import re

__all__ = ["parse_arch", "arch_number", "device_capability", "gpu_arch"]

_ARCH = re.compile(r"(?:sm_)?(\d+)(\d)([af]?)")


def parse_arch(arch) -> tuple[int, int, str]:
    """``(major, minor, suffix)`` of ``arch``: ``"sm_90a"`` -> ``(9, 0, "a")``, ``80`` -> ``(8, 0, "")``.

    Parameters
    ----------
    arch : str | int
        ``"sm_<digits>[a|f]"``, ``"<digits>"`` or an int such as 90.

    Raises
    ------
    ValueError
        ``arch`` is not an SM architecture (a bool is not one either).
    """
    match = _ARCH.fullmatch(str(arch).strip())
    if isinstance(arch, bool) or match is None:
        raise ValueError(f"expected an SM architecture such as 'sm_90a' or 90, got {arch!r}")
    return int(match.group(1)), int(match.group(2)), match.group(3)


def arch_number(arch) -> int:
    """The SM version as one number: ``"sm_90a"`` -> 90, ``"sm_100"`` -> 100 (suffix dropped).

    Raises
    ------
    ValueError
        ``arch`` is not an SM architecture.
    """
    major, minor, _ = parse_arch(arch)
    return 10 * major + minor


def device_capability() -> tuple[int, int] | None:
    """``(major, minor)`` compute capability of GPU 0, or None without a GPU.

    Asks apache-tvm's CUDA runtime, then torch (when installed with CUDA).
    Never raises: a missing driver reads as "no GPU".
    """
    try:
        # Not at the top: this module is imported by the modules the tvm.backends hook
        # loads, so importing tvm here at load time would run the hook half-way through.
        import tvm  # pylint: disable=import-outside-toplevel

        dev = tvm.cuda(0)
        if dev.exist:
            major, minor = dev.compute_version.split(".")
            return int(major), int(minor)
    except Exception:  # pylint: disable=broad-except
        pass
    try:
        import torch  # pylint: disable=import-outside-toplevel  # optional

        if torch.cuda.is_available():
            return tuple(int(x) for x in torch.cuda.get_device_capability(0))
    except Exception:  # pylint: disable=broad-except
        pass
    return None


def gpu_arch() -> str | None:
    """``sm_XY`` of GPU 0 (``sm_90a`` on Hopper, whose arch-specific features we use), or None."""
    capability = device_capability()
    if capability is None:
        return None
    major, minor = capability
    suffix = "a" if (major, minor) == (9, 0) else ""
    return f"sm_{major}{minor}{suffix}"
