"""One test session's emulator runs: capture every case on the CPU (once per wave width), build each
launched module for each arch, and run each ISA family's launches in its own worker process.

Families start one after another as soon as their code objects are built, so a worker's cold
instruction compile overlaps the builds of the next family's code objects.
"""
from __future__ import annotations

import dataclasses
import json
import pathlib
import time

from pykern.compiler import build_module
from pykern.targets.amdgpu import AmdgpuTarget

from tests.amd import _emulator
from tests.amd._capture import Launch, capture
from tests.amd._emulator import FAMILIES, Batch, Family, Outcome
from tests.amd._registry import CASES
from tests.amd import _language_cases, _stdlib_cases  # noqa: F401,E402 - they fill CASES


@dataclasses.dataclass
class ArchResult:
    """A case's launches on one arch with what the emulator made of each (None: pykern failed to build)."""

    launches: list[Launch]
    outcomes: list[Outcome]
    capture_error: str | None


class EmulatorSession:
    def __init__(self, workdir: pathlib.Path):
        self.dir = workdir
        self.captures: dict[int, tuple[list[Launch], dict[str, str]]] = {}
        self.batches: dict[str, tuple[Batch, list[tuple[str, int]]]] = {}
        self.outcomes: dict[str, dict[tuple[str, int], Outcome]] = {}
        self.build_errors: dict[tuple[str, int], str] = {}
        self.timings: dict[str, float] = {}
        self._hsaco: dict[tuple[str, int], pathlib.Path | None] = {}

    # ---- the CPU side ---------------------------------------------------------------------------
    def launches(self, wave_size: int) -> tuple[list[Launch], dict[str, str]]:
        if wave_size not in self.captures:
            start = time.perf_counter()
            self.captures[wave_size] = capture({n: c.run for n, c in CASES.items()}, wave_size)
            self.timings[f"capture on the CPU, wave{wave_size}"] = time.perf_counter() - start
        return self.captures[wave_size]

    # ---- building ---------------------------------------------------------------------------------
    def hsaco(self, arch: str, module) -> pathlib.Path | None:
        key = (arch, module.uid)
        if key not in self._hsaco:
            path = self.dir / arch / f"{module.name}-{module.uid}.hsaco"
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                blob, _ = build_module(module, AmdgpuTarget(arch))
                path.write_bytes(blob)
                self._hsaco[key] = path
            except Exception as exc:  # a pykern failure: every launch of this module reports it
                self.build_errors[key] = f"pykern could not build module {module.name} for {arch}: {exc}"
                self._hsaco[key] = None
        return self._hsaco[key]

    # ---- running ----------------------------------------------------------------------------------
    def start(self, archs: set[str] | None = None) -> None:
        """Capture, build and start the worker of each family with an arch in ``archs`` (all by default;
        the tests pass the archs of the selected tests), each as soon as its builds are done."""
        for family in FAMILIES:
            if family.name in self.batches or (archs is not None and not archs & set(family.archs)):
                continue
            launches, _ = self.launches(family.wave_size)
            start = time.perf_counter()
            specs, where = [], []
            for arch in family.archs:
                for index, launch in enumerate(launches):
                    path = self.hsaco(arch, launch.instance.module)
                    if path is None:
                        continue
                    specs.append(spec(path, launch))
                    where.append((arch, index))
            self.timings[f"build {family.name} ({', '.join(family.archs)})"] = time.perf_counter() - start
            self.batches[family.name] = (Batch(family, specs, self.dir / f"batch-{family.name}"), where)

    def family_outcomes(self, family: Family) -> dict[tuple[str, int], Outcome]:
        if family.name not in self.outcomes:
            self.start(set(family.archs))
            batch, where = self.batches[family.name]
            results = batch.wait()
            self.outcomes[family.name] = {where[i]: results[i] for i in range(len(where))}
            self.timings[f"emulate {family.name}: {len(where)} launches, {batch.restarts} worker restarts"] = \
                batch.wall_s
            (self.dir / "timings.json").write_text(json.dumps(self.timings, indent=1))
        return self.outcomes[family.name]

    def result(self, case: str, arch: str) -> ArchResult:
        family = _emulator.ARCHS[arch]
        launches, errors = self.launches(family.wave_size)
        mine = [(i, launch) for i, launch in enumerate(launches) if launch.case == case]
        outcomes = self.family_outcomes(family)
        out = []
        for i, launch in mine:
            if (arch, i) in outcomes:
                out.append(outcomes[(arch, i)])
            else:
                error = self.build_errors.get((arch, launch.instance.module.uid), "not run")
                out.append(Outcome("build", detail=error))
        return ArchResult([launch for _, launch in mine], out, errors.get(case))


def spec(path: pathlib.Path, launch: Launch) -> dict:
    """What the worker needs for one launch (plain data: the worker imports no pykern)."""
    return {"hsaco": str(path), "kernel": launch.kernel, "grid": launch.grid, "block": launch.block,
            "shared_mem": launch.shared_mem, "args": launch.args, "buffers": [b.before for b in launch.buffers]}
