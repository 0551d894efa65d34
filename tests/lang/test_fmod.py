"""``%`` on floats is C's fmod, exact, with the same bits on every target (pykern.math.fmod)."""
from __future__ import annotations

import numpy as np
import pytest

import pykern as pk
from pykern import ConstPtr, Ptr, usize

T = pk.TypeVar("T")
FLOATS = (pk.f32, pk.f64, pk.f16, pk.bf16)


@pk.kernel
def k_mod(n: usize, a: ConstPtr[T], b: ConstPtr[T], out: Ptr[T], *, T):
    for i in pk.grid_stride(n):
        out[i] = a[i] % b[i]


MOD = pk.Module("test_fmod").add(*(k_mod.instance(f"mod_{t.name}", T=t) for t in FLOATS))


@pytest.mark.parametrize("ty", FLOATS, ids=str)
def test_float_remainder_is_exact_fmod(device, ty):
    rng = np.random.default_rng(7)
    sp = np.array([0.0, -0.0, 1.0, -1.0, 0.5, 3.0, -7.25, np.inf, -np.inf, np.nan, 1e-40, 1e30, -2.5,
                   1e-300, 5e-324, 6.5, -6.5])
    with np.errstate(all="ignore"):
        a = np.concatenate([sp.repeat(len(sp)), rng.standard_normal(3000) * 10.0 ** rng.integers(-30, 30, 3000)])
        b = np.concatenate([np.tile(sp, len(sp)), rng.standard_normal(3000) * 10.0 ** rng.integers(-30, 30, 3000)])
        a, b = a.astype(ty.np), b.astype(ty.np)
        want = np.fmod(a.astype(np.float64), b.astype(np.float64)).astype(ty.np)  # exact in every type
    out = device.zeros(len(a), ty)
    device.get_or_load_func(f"mod_{ty.name}", MOD)[8, 256](len(a), device.to_device(a), device.to_device(b), out)
    got = out.to_host()
    nan = np.isnan(got.astype(np.float64)) & np.isnan(want.astype(np.float64))
    assert ((got.view(f"u{ty.nbytes}") == want.view(f"u{ty.nbytes}")) | nan).all()
