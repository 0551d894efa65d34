"""One test session's emulator runs: capture the cases on the CPU (once per half and wave width),
build each launched module for each arch, and run each ISA family's launches in its own worker process.

The layer has two halves (``_registry.GROUPS``), one test file each, so that xdist's ``loadfile``
spreads them over two workers; each file starts its half when its first test runs (``start_selected``).
Within a half, families start one after another as soon as their code objects are built, so a
worker's cold instruction compile overlaps the builds of the next family's code objects.
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
from tests.amd._emulator import FAMILIES, Batch, Family, Outcome, unavailable_reason
from tests.amd._registry import CASES, group_of
from tests.amd import _family_cases, _language_cases, _stdlib_cases  # noqa: F401,E402 - they fill CASES


@dataclasses.dataclass
class ArchResult:
    """A case's launches on one arch with what the emulator made of each (None: pykern failed to build)."""

    launches: list[Launch]
    outcomes: list[Outcome]
    capture_error: str | None


class EmulatorSession:
    def __init__(self, workdir: pathlib.Path):
        self.dir = workdir
        self.captures: dict[tuple[str, int], tuple[list[Launch], dict[str, str]]] = {}
        self.batches: dict[tuple[str, str], tuple[Batch, list[tuple[str, int]]]] = {}
        self.outcomes: dict[tuple[str, str], dict[tuple[str, int], Outcome]] = {}
        self.build_errors: dict[tuple[str, int], str] = {}
        self.timings: dict[str, float] = {}
        self._hsaco: dict[tuple[str, int], pathlib.Path | None] = {}

    # ---- the CPU side ---------------------------------------------------------------------------
    def launches(self, group: str, wave_size: int) -> tuple[list[Launch], dict[str, str]]:
        """The launches of ``group``'s cases at ``wave_size`` (the "families" half keeps those of its
        own modules), and each failed case's error."""
        key = (group, wave_size)
        if key not in self.captures:
            start = time.perf_counter()
            launches, errors = capture({n: c.run for n, c in CASES.items() if group_of(n) == group}, wave_size)
            if group == "families":
                launches = [launch for launch in launches if group_of(launch.instance.module.name) == group]
            self.captures[key] = launches, errors
            self.timings[f"{group}: capture on the CPU, wave{wave_size}"] = time.perf_counter() - start
        return self.captures[key]

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
    def start(self, group: str, archs: set[str] | None = None) -> None:
        """Capture ``group``, build and start the worker of each family with an arch in ``archs`` (all
        by default; the tests pass the archs of the selected tests), each as soon as its builds are done."""
        for family in FAMILIES:
            key = (group, family.name)
            if key in self.batches or (archs is not None and not archs & set(family.archs)):
                continue
            launches, _ = self.launches(group, family.wave_size)
            start = time.perf_counter()
            specs, where = [], []
            for arch in family.archs:
                for index, launch in enumerate(launches):
                    path = self.hsaco(arch, launch.instance.module)
                    if path is None:
                        continue
                    specs.append(spec(path, launch))
                    where.append((arch, index))
            self.timings[f"{group}: build {family.name} ({', '.join(family.archs)})"] = time.perf_counter() - start
            self.batches[key] = (Batch(family, specs, self.dir / f"batch-{group}-{family.name}"), where)

    def family_outcomes(self, group: str, family: Family) -> dict[tuple[str, int], Outcome]:
        key = (group, family.name)
        if key not in self.outcomes:
            self.start(group, set(family.archs))
            batch, where = self.batches[key]
            results = batch.wait()
            self.outcomes[key] = {where[i]: results[i] for i in range(len(where))}
            self.timings[f"{group}: emulate {family.name}: {len(where)} launches, {batch.restarts} worker restarts"] = \
                batch.wall_s
            (self.dir / "timings.json").write_text(json.dumps(self.timings, indent=1))
        return self.outcomes[key]

    def result(self, case: str, arch: str) -> ArchResult:
        family = _emulator.ARCHS[arch]
        group = group_of(case)
        launches, errors = self.launches(group, family.wave_size)
        mine = [(i, launch) for i, launch in enumerate(launches) if launch.case == case]
        outcomes = self.family_outcomes(group, family)
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


def start_selected(request, group: str) -> None:
    """Start ``group`` on the archs of the selected tests of the requesting test file (``-k gfx1100``
    runs RDNA3 alone), so its captures, builds and emulator workers get going before its first test
    waits for them; nothing where the emulator is unavailable (the tests skip, saying why)."""
    if unavailable_reason():
        return
    session = request.getfixturevalue("emulator")
    archs = {item.callspec.params["arch"] for item in request.session.items
             if item.module is request.module and hasattr(item, "callspec") and "arch" in item.callspec.params}
    session.start(group, archs)
