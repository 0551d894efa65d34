"""The checks both test files run (``test_emulator.py``, ``test_emulator_families.py``): a case on an
arch against the CPU target, and every kernel of a covered module launched by some case."""
from __future__ import annotations

import pytest

from tests.amd._compare import launch_problems
from tests.amd._limits import known_limit, known_mismatch
from tests.amd._registry import CASES, group_of


def check_case(emulator, name: str, arch: str) -> None:
    """Every launch of case ``name`` leaves memory on ``arch`` as the CPU target does; a disagreement
    is an expected failure only where a row of ``_limits.py`` names its instruction."""
    case = CASES[name]
    result = emulator.result(name, arch)
    if result.capture_error:
        pytest.fail(f"the case fails on the CPU target itself: {result.capture_error}")
    assert result.launches, f"{name} launched nothing"
    failures, limited = [], []
    for launch, outcome in zip(result.launches, result.outcomes):
        if outcome.status == "ok":
            problems = launch_problems(launch, outcome.buffers, case.tolerance(launch.kernel))
            mismatch = known_mismatch(arch, launch.kernel) if problems else None
            if mismatch is not None:
                limited.append(f"{launch.kernel}: {mismatch.instruction} ({problems[0][:160]})")
            elif problems:
                failures.append(f"{launch.describe()} on {arch}:\n  " + "\n  ".join(problems))
            continue
        limit = known_limit(arch, launch.kernel, outcome.detail)
        if limit is not None:
            limited.append(f"{launch.kernel}: {limit.instruction} ({limit.why})")
        else:
            failures.append(f"{launch.describe()} on {arch}: {outcome.status}: {outcome.detail}")
    if failures:
        pytest.fail(f"{len(failures)} of {len(result.launches)} launches disagree with the CPU target:\n"
                    + "\n".join(failures[:12]))
    if limited:
        pytest.xfail("emulator limit: " + "; ".join(sorted(set(limited))))


def check_every_kernel_launched(emulator, module, wave_size: int) -> None:
    """Every kernel of ``module`` is launched by the cases of its own family (those named
    ``module.name/...``): what runs on the emulator covers the module whatever else is selected."""
    launched = set()
    for name in cases_of(group_of(module.name)):
        if name.startswith(module.name + "/"):
            launched |= {launch.kernel for launch in emulator.launches(name, wave_size)[0]
                         if launch.instance.module is module}
    missing = [name for name in module.names() if name not in launched]
    assert not missing, f"no case launches {len(missing)} {module.name} kernels: {missing[:20]}"


def cases_of(group: str) -> list[str]:
    return [name for name in CASES if group_of(name) == group]


def modules_of(group: str) -> list:
    from tests.amd._stdlib_cases import COVERED_MODULES
    return [m for m in COVERED_MODULES if group_of(m.name) == group]
