"""The code-generation targets by name: ``make_target("amdgpu", "gfx1100")``.

The valid archs come from each target's own table (``amdgpu_archs.ARCHS``, ``nvptx.ARCHS``); nothing
here spells an arch list of its own.
"""
from __future__ import annotations

from ..errors import PykernError
from . import amdgpu_archs, nvptx
from .amdgpu import AmdgpuTarget
from .base import Target
from .cpu import CpuTarget

#: target name -> its class
TARGETS: dict[str, type[Target]] = {"amdgpu": AmdgpuTarget, "cuda": nvptx.NvptxTarget, "cpu": CpuTarget}
DEFAULT_TARGET = "amdgpu"
_DEFAULT_ARCH = {"amdgpu": "gfx90a", "cuda": "sm_90", "cpu": "host"}


class UnknownChoiceError(PykernError, ValueError):
    """A target or arch name that does not exist; the message lists the valid choices."""

    def __init__(self, what: str, given: str, choices):
        self.what, self.given, self.choices = what, given, tuple(choices)
        super().__init__(f"unknown {what} {given!r}; choose one of: {', '.join(self.choices)}")


def _check_target(name: str) -> str:
    if name not in TARGETS:
        raise UnknownChoiceError("target", name, TARGETS)
    return name


def archs(target: str) -> tuple[str, ...]:
    """The archs ``target`` compiles for, in table order."""
    target = _check_target(target)
    if target == "amdgpu":
        return tuple(amdgpu_archs.ARCHS)
    if target == "cuda":
        return tuple(nvptx.ARCHS)
    return ("host",)


def default_arch(target: str) -> str:
    return _DEFAULT_ARCH[_check_target(target)]


def check_arch(target: str, arch: str) -> str:
    """``arch`` if ``target`` supports it (AMDGPU target ids such as ``gfx90a:xnack-`` reduce to
    their base arch), else ``UnknownChoiceError`` listing the supported ones."""
    valid = archs(target)
    if target == "amdgpu":
        arch = amdgpu_archs.base_arch(arch)
    if arch not in valid:
        raise UnknownChoiceError(f"{target} arch", arch, valid)
    return arch


def make_target(name: str, arch: str | None = None, **options) -> Target:
    """A ``Target`` for ``name`` (amdgpu, cuda, cpu) and ``arch`` (the target's default if None).

    ``options`` go to the target's constructor (``code_object_version``/``wave64`` for amdgpu,
    ``wave_size``/``check_bounds`` for cpu)."""
    arch = check_arch(name, arch or default_arch(name))
    return TARGETS[name](arch, **options)
