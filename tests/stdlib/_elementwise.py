"""Shared by the elementwise family tests (affine, cast, fill, unary): layouts, ulp checks, the ABI check."""
from __future__ import annotations

import json
import pathlib

import ml_dtypes
import numpy as np

import pykern as pk
from pykern import bf16, f8e4m3, f16, f32, f64

_REPO = pathlib.Path(__file__).resolve().parents[2]
ABI = next((p for p in (_REPO.parent / "shared", _REPO / "shared") if (p / "spec" / "candle_abi.json").exists()),
           _REPO.parent / "shared") / "spec" / "candle_abi.json"
RNG = np.random.default_rng(1234)


def abi_mismatches(module) -> list[str]:
    """Each of candle's names for ``module`` with the wrong (or no) parameter sizes here."""
    if not ABI.exists():
        import pytest
        pytest.skip(f"{ABI} is not in this checkout")
    want = json.loads(ABI.read_text())["modules"][module.name]
    target = pk.device("cpu").target
    bad = []
    for name, sizes in want.items():
        if name not in module:
            bad.append(f"{name}: missing")
            continue
        got = [ty.nbytes for _, ty in module.get(name).typed(target).params]
        if got != sizes:
            bad.append(f"{name}: sizes {got}, candle {sizes}")
    return bad


def random(dtype, shape, lo=-4.0, hi=4.0) -> np.ndarray:
    """Random values of ``dtype`` (ints over their whole range, floats uniform in [lo, hi))."""
    if dtype.is_int:
        info = np.iinfo(dtype.np)
        return RNG.integers(info.min, info.max, size=shape, endpoint=True, dtype=dtype.np)
    return RNG.uniform(lo, hi, size=shape).astype(dtype.np)


def layouts(device, make):
    """(label, device view, host array of the same values) for each layout a kernel must handle.

    ``make(shape)`` builds a host array; every view is read through candle's info/strides path."""
    a = make((3, 1037))                               # contiguous, odd size (not a block multiple)
    yield "contiguous", device.to_device(a), a
    a = make((37, 29))                                # transposed: strided
    yield "transposed", device.to_device(a).transpose(), a.T
    a = make((1, 53))                                 # broadcast: zero strides
    yield "broadcast", device.to_device(a).broadcast_to((7, 53)), np.broadcast_to(a, (7, 53))
    a = make((2000,))                                 # sliced with a start offset, row stride 150
    it = a.itemsize
    host = np.lib.stride_tricks.as_strided(a[13:], (5, 97), (150 * it, it))
    yield "sliced", device.to_device(a).as_strided((5, 97), (150, 1), offset=13), host
    a = make((0, 5))
    yield "empty", device.to_device(a), a


def ordered(x: np.ndarray) -> np.ndarray:
    """Float bits mapped to integers whose difference counts ulps (+0 and -0 coincide)."""
    i = np.ascontiguousarray(x).view(f"i{x.itemsize}").astype(np.int64)
    return np.where(i < 0, np.int64(np.iinfo(f"i{x.itemsize}").min) - i, i)


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    oa, ob = ordered(a), ordered(b)
    same = (oa >= 0) == (ob >= 0)  # opposite signs: |a| + |b| without overflow (halved: still huge)
    return np.where(same, np.abs(np.where(same, oa - ob, 0)), np.abs(oa) // 2 + np.abs(ob) // 2)


def to_f8(x) -> np.ndarray:
    """Round to f8 e4m3fn as pykern and CUDA do: nearest even, saturating to +-448, NaN kept."""
    x = np.asarray(x, np.float32)
    return np.where(np.isnan(x), x, np.clip(x, -448, 448)).astype(ml_dtypes.float8_e4m3fn)


def round_to(x, dtype) -> np.ndarray:
    """An f32/f64 result rounded to ``dtype`` the way kernels store it."""
    if dtype is f8e4m3:
        return to_f8(np.asarray(x, np.float64).astype(np.float32))
    with np.errstate(over="ignore"):
        return np.asarray(x).astype(dtype.np)


def assert_ulp(got: np.ndarray, want: np.ndarray, ulps: int, what: str = "") -> None:
    """``got`` within ``ulps`` units in the last place of ``want`` (same dtype); NaNs must match."""
    got, want = np.asarray(got), np.asarray(want).astype(got.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    gn, wn = np.isnan(got.astype(np.float64)), np.isnan(want.astype(np.float64))
    assert (gn == wn).all(), f"{what}: NaN mismatch at {np.argwhere(gn != wn)[:5].tolist()}"
    d = ulp_distance(got, want)
    d[gn] = 0
    if d.size and d.max() > ulps:
        i = np.unravel_index(np.argmax(d), d.shape)
        raise AssertionError(f"{what}: {d.max()} ulp > {ulps} at {i}: got {got[i]!r}, want {want[i]!r}")


def assert_bits(got: np.ndarray, want: np.ndarray, what: str = "") -> None:
    """Bit-exact (NaN payloads aside: any NaN matches any NaN)."""
    want = np.asarray(want).astype(got.dtype)
    if got.dtype.kind in "fV" or got.dtype in (ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn):
        assert_ulp(got, want, 0, what)
    else:
        assert got.shape == want.shape and (got == want).all(), f"{what}: got {got}, want {want}"


def specials(dtype) -> np.ndarray:
    """NaN, +-inf, +-0, the smallest subnormal and normal, the largest finite, and a few ordinary values."""
    fi = ml_dtypes.finfo(dtype.np)
    vals = [np.nan, np.inf, -np.inf, 0.0, -0.0, float(fi.smallest_subnormal), -float(fi.smallest_subnormal),
            float(fi.tiny), float(fi.max), -float(fi.max), 0.5, -0.5, 1.5, -2.5, 1.0, -1.0, 3.0]
    if dtype is f8e4m3:  # e4m3fn has no infinities
        vals = [v for v in vals if not np.isinf(v)]
    return np.array(vals, dtype=np.float64).astype(dtype.np)


FLOATS = (f32, f64, f16, bf16, f8e4m3)
