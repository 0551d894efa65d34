"""The case table: every piece of code the emulator layer runs on each AMD arch.

A case is a function ``run(dev)`` that launches kernels on ``dev`` (a capturing CPU device, see
``_capture.py``) exactly as real code does: through a stdlib wrapper, candle's
``dev.get_or_load_func(name, MODULE)[grid, block](...)``, or a user kernel's ``launch(..., device=dev)``.
Arrays must be made on ``dev`` (``dev.to_device``, ``dev.empty``, ``dev.zeros``). Whatever it
launches is replayed on every emulated arch and compared with the CPU's result.
"""
from __future__ import annotations

import dataclasses
import zlib
from typing import Callable

import numpy as np


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    run: Callable
    #: kernel name -> allowed distance in ulps of the buffer's dtype (absent: bit for bit); only for
    #: kernels whose math lowering differs by target (``pk.fast_exp2`` / ``pk.fast_rcp``: the host
    #: computes them exactly, AMDGPU with ``v_exp_f32`` / ``v_rcp_f32``), with ``why`` saying so
    ulps: dict = dataclasses.field(default_factory=dict)
    why: str = ""

    def tolerance(self, kernel: str) -> int:
        return self.ulps.get(kernel, self.ulps.get("*", 0))


CASES: dict[str, Case] = {}

#: the layer's two halves, one test file each so that two xdist workers run them (tests/conftest.py): the
#: cases of candle's elementwise families, reduce and the language (``test_emulator.py``), and those of
#: the families with their own ABIs (``test_emulator_families.py``), by the case name's prefix
FAMILY_PREFIXES = ("indexing/", "sort/", "conv/", "matmul/", "quantized/")
GROUPS = ("core", "families")


#: the stdlib modules the "families" half launches (its captures keep only their launches: a wrapper's
#: permuting copy or cast is a unary or cast kernel, which the core half runs)
FAMILY_MODULES = ("conv", "indexing", "matmul", "quantized", "sort")


def group_of(name: str) -> str:
    """The half a case (by name) or a stdlib module (by ``module.name``) belongs to."""
    return "families" if name.startswith(FAMILY_PREFIXES) or name in FAMILY_MODULES else "core"


def add(name: str, run: Callable, ulps: dict | None = None, why: str = "") -> Case:
    """Register one case (names are unique: they are the test ids)."""
    if name in CASES:
        raise ValueError(f"duplicate emulator case {name!r}")
    CASES[name] = Case(name, run, dict(ulps or {}), why)
    return CASES[name]


def case(name: str, ulps: dict | None = None, why: str = ""):
    """Decorator form of ``add``."""
    def register(run: Callable) -> Callable:
        add(name, run, ulps, why)
        return run
    return register


def rng(name: str) -> np.random.Generator:
    """A generator seeded by the case's name: the same inputs in every run."""
    return np.random.default_rng(zlib.crc32(name.encode()))
