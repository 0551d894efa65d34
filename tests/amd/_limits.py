"""The emulator's known limits: launches it cannot run, by the instruction that stops it.

A launch the emulator refuses or dies in is an expected failure only when its error matches a row
here, which names the instruction; anything else fails the test. The same table is listed in
``docs/targets/amdgpu.md`` (test_docs_list_every_limit keeps them in step).
"""
from __future__ import annotations

import dataclasses
import re


@dataclasses.dataclass(frozen=True)
class Limit:
    archs: tuple[str, ...]
    #: a regular expression searched in the emulator's error
    pattern: str
    instruction: str
    why: str

    def matches(self, arch: str, detail: str) -> bool:
        return arch in self.archs and re.search(self.pattern, detail) is not None


LIMITS: tuple[Limit, ...] = (
    Limit(("gfx90a",), r"V_MAD_F32|v_mad_f32", "v_mad_f32",
          "gfx90a runs on the emulator's CDNA4 (gfx950) tables, which no longer have CDNA2's v_mad_f32"),
)


def known_limit(arch: str, detail: str) -> Limit | None:
    return next((lim for lim in LIMITS if lim.matches(arch, detail)), None)
