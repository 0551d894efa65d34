"""One test session's emulator runs: capture the cases on the CPU (once per case and wave width),
build each launched module for each arch, and run each ISA family's launches in its own worker process.

The layer has two halves (``_registry.GROUPS``), one test file each, so that two xdist workers run
them side by side (tests/conftest.py schedules both files first); each file starts its half when its
first test runs (``start_selected``), on the cases and archs of its selected tests only, so that
``-k reduce`` captures, builds and emulates reduce's cases alone. Within a half, families start one
after another as soon as their code objects are built, so a worker's cold instruction compile
overlaps the builds of the next family's code objects.
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
        self.captured: dict[tuple[str, int], list[Launch]] = {}
        self.capture_errors: dict[tuple[str, int], str] = {}
        #: (group, family) -> the batch and, for each of its launches, (arch, case, index in the case)
        self.batches: dict[tuple[str, str], tuple[Batch, list[tuple[str, str, int]]]] = {}
        self.outcomes: dict[tuple[str, str], dict[tuple[str, str, int], Outcome]] = {}
        #: the cases each half runs on the emulator (all of the half's unless start() was given fewer)
        self.selected: dict[str, list[str]] = {}
        self.build_errors: dict[tuple[str, int], str] = {}
        self.timings: dict[str, float] = {}
        self._hsaco: dict[tuple[str, int], pathlib.Path | None] = {}

    # ---- the CPU side ---------------------------------------------------------------------------
    def capture(self, cases, wave_size: int) -> None:
        """Run each of ``cases`` not yet captured at ``wave_size`` on a capturing CPU device."""
        missing = [name for name in cases if (name, wave_size) not in self.captured]
        if not missing:
            return
        start = time.perf_counter()
        launches, errors = capture({name: CASES[name].run for name in missing}, wave_size)
        for name in missing:
            # the "families" half keeps the launches of its own modules: a wrapper's permuting copy or
            # cast is a unary or cast kernel, which the core half runs
            self.captured[name, wave_size] = [
                launch for launch in launches if launch.case == name
                and (group_of(name) == "core" or group_of(launch.instance.module.name) == "families")]
            if name in errors:
                self.capture_errors[name, wave_size] = errors[name]
        label = f"{group_of(missing[0])}: capture on the CPU, wave{wave_size}"
        self.timings[label] = self.timings.get(label, 0.0) + time.perf_counter() - start

    def launches(self, case: str, wave_size: int) -> tuple[list[Launch], str | None]:
        """The launches of ``case`` at ``wave_size``, and its error if it failed on the CPU."""
        self.capture([case], wave_size)
        return self.captured[case, wave_size], self.capture_errors.get((case, wave_size))

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
    def start(self, group: str, archs: set[str] | None = None, cases: list[str] | None = None) -> None:
        """Capture ``cases`` of ``group`` (all of them by default), build and start the worker of each
        family with an arch in ``archs`` (all by default), each as soon as its builds are done. The
        tests pass the cases and archs of the selected tests; the first call fixes a half's cases."""
        chosen = self.selected.setdefault(group, list(cases) if cases is not None else
                                          [name for name in CASES if group_of(name) == group])
        for family in FAMILIES:
            key = (group, family.name)
            if key in self.batches or (archs is not None and not archs & set(family.archs)):
                continue
            self.capture(chosen, family.wave_size)
            start = time.perf_counter()
            specs, where = [], []
            for arch in family.archs:
                for name in chosen:
                    for index, launch in enumerate(self.captured[name, family.wave_size]):
                        path = self.hsaco(arch, launch.instance.module)
                        if path is None:
                            continue
                        specs.append(spec(path, launch))
                        where.append((arch, name, index))
            self.timings[f"{group}: build {family.name} ({', '.join(family.archs)})"] = time.perf_counter() - start
            self.batches[key] = (Batch(family, specs, self.dir / f"batch-{group}-{family.name}"), where)

    def family_outcomes(self, group: str, family: Family) -> dict[tuple[str, str, int], Outcome]:
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
        launches, error = self.launches(case, family.wave_size)
        outcomes = self.family_outcomes(group, family)
        out = []
        for index, launch in enumerate(launches):
            if (arch, case, index) in outcomes:
                out.append(outcomes[(arch, case, index)])
            else:
                detail = self.build_errors.get((arch, launch.instance.module.uid),
                                               f"not run: {case} is not among the cases this session started")
                out.append(Outcome("build", detail=detail))
        return ArchResult(launches, out, error)


def spec(path: pathlib.Path, launch: Launch) -> dict:
    """What the worker needs for one launch (plain data: the worker imports no pykern)."""
    return {"hsaco": str(path), "kernel": launch.kernel, "grid": launch.grid, "block": launch.block,
            "shared_mem": launch.shared_mem, "args": launch.args, "buffers": [b.before for b in launch.buffers]}


def start_selected(request, group: str) -> None:
    """Start ``group`` on the cases and archs of the selected ``test_case`` tests of the requesting
    test file (``-k gfx1100`` runs RDNA3 alone, ``-k reduce`` reduce's cases alone), so its captures,
    builds and emulator workers get going before its first test waits for them; nothing where the
    emulator is unavailable (the tests skip, saying why) or no ``test_case`` of the file is selected."""
    if unavailable_reason():
        return
    selected = [item.callspec.params for item in request.session.items
                if item.module is request.module and hasattr(item, "callspec") and "arch" in item.callspec.params]
    if not selected:
        return
    session = request.getfixturevalue("emulator")
    cases = list(dict.fromkeys(params["name"] for params in selected))
    session.start(group, {params["arch"] for params in selected}, cases)
