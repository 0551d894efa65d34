"""What the emulator left in memory against what the CPU target left there, launch by launch.

Every byte of every allocation a launch touched is compared, so a stray write past the end of an
output (inside the allocation) is caught too. Where an allocation is read through one element dtype,
floats compare as values: NaN matches any NaN (payloads and signs are not part of pykern's results),
everything else bit for bit or within ``ulps`` units in the last place of that dtype, the documented
bound of kernels whose math lowering differs by target (``_cases.py``). Integers and raw bytes compare
bit for bit.
"""
from __future__ import annotations

import numpy as np

from tests.stdlib._elementwise import ulp_distance

from tests.amd._capture import Launch


def _as_values(data: bytes, dtype) -> np.ndarray:
    usable = len(data) - len(data) % dtype.nbytes
    return np.frombuffer(data[:usable], dtype=dtype.np)


def buffer_problem(before: bytes, cpu: bytes, amd: bytes, dtypes: set, ulps: int) -> str | None:
    """Why the emulator's bytes ``amd`` disagree with the CPU's ``cpu`` (None: they agree)."""
    if cpu == amd:
        return None
    dtype = next(iter(dtypes)) if len(dtypes) == 1 else None
    if dtype is None or not dtype.is_float:
        got, want = np.frombuffer(amd, np.uint8), np.frombuffer(cpu, np.uint8)
        if dtype is not None:
            got, want = _as_values(amd, dtype), _as_values(cpu, dtype)
        bad = np.flatnonzero(got != want)
        return (f"{len(bad)} of {want.size} {dtype or 'bytes'} differ, first at {bad[:4].tolist()}: "
                f"emulator {got[bad[:4]].tolist()}, cpu {want[bad[:4]].tolist()}")
    got, want = _as_values(amd, dtype), _as_values(cpu, dtype)
    wide_got, wide_want = got.astype(np.float64), want.astype(np.float64)
    nan_got, nan_want = np.isnan(wide_got), np.isnan(wide_want)
    distance = ulp_distance(got, want)
    distance[nan_got & nan_want] = 0
    distance[nan_got != nan_want] = np.iinfo(np.int64).max
    bad = np.flatnonzero(distance > ulps)
    if not bad.size:
        return None
    untouched = np.frombuffer(before[:len(cpu) - len(cpu) % dtype.nbytes], dtype=dtype.np)
    first = bad[:4]
    return (f"{len(bad)} of {want.size} {dtype} values beyond {ulps} ulp, first at {first.tolist()}: emulator "
            f"{wide_got[first].tolist()}, cpu {wide_want[first].tolist()} (before the launch "
            f"{untouched.astype(np.float64)[first].tolist()}); largest distance {int(distance.max())} ulp")


def launch_problems(launch: Launch, amd_buffers: list[bytes], ulps: int) -> list[str]:
    """Each buffer of ``launch`` where the emulator and the CPU disagree, described."""
    problems = []
    for index, (buf, amd) in enumerate(zip(launch.buffers, amd_buffers)):
        problem = buffer_problem(buf.before, buf.after, amd, buf.dtypes, ulps)
        if problem:
            problems.append(f"buffer {index}: {problem}")
    return problems
