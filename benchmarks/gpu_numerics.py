"""What the GPU's fast paths do to results, measured on the device (not a test: a report).

* tanh and gelu f32 max ulp error over 2^21 points (the math library's reciprocal estimate plus one
  Newton step instead of an IEEE division);
* gelu_erf of every f16 and bf16 input (the 16-bit fast path) in ulp of the type;
* bf16 rounding through ``cvt.rn.bf16.f32``: every non-NaN f32 bit pattern of a sample against the
  integer rounding the other targets use, and what becomes of NaN payloads.
Run on the GPU machine: ``python benchmarks/gpu_numerics.py``.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

import pykern as pk
from pykern import ConstPtr, Ptr, bf16, f32, usize
from pykern import math as pkm


@pk.kernel
def tanh_k(n: usize, x: ConstPtr[f32], y: Ptr[f32]):
    for i in pk.grid_stride(n):
        y[i] = pkm.tanh(x[i])


@pk.kernel
def round_k(n: usize, x: ConstPtr[f32], y: Ptr[bf16]):
    for i in pk.grid_stride(n):
        y[i] = bf16(x[i])


def main() -> None:
    dev = pk.device("cuda")
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.standard_normal(1 << 20).astype(np.float32) * 3,
                        np.linspace(-12, 12, 1 << 20, dtype=np.float32)])
    y = dev.empty(x.shape, f32)
    tanh_k[256, 256](x.size, dev.to_device(x), y)
    ref = np.tanh(x.astype(np.float64))
    got = y.to_host().astype(np.float64)
    ulp = np.abs(got - ref) / np.spacing(np.abs(ref).astype(np.float32)).astype(np.float64)
    print(f"tanh f32 on the GPU: max {ulp.max():.3f} ulp at x = {x[ulp.argmax()]!r} over {x.size} points")
    bits = np.concatenate([rng.integers(0, 2 ** 32, 1 << 22, dtype=np.uint64).astype(np.uint32),
                           np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FC12345, 0xFFFFFFFF, 0x80000000,
                                     0x00000001, 0x7F7FFFFF, 0x7F800000], np.uint32)])
    xs = bits.view(np.float32)
    out = dev.empty(xs.shape, bf16)
    round_k[256, 256](xs.size, dev.to_device(xs), out)
    got = out.to_host().view(np.uint16)
    want = xs.astype(ml_dtypes.bfloat16).view(np.uint16)
    nan = np.isnan(xs)
    bad = (got != want) & ~nan
    print(f"bf16 rounding: {int(bad.sum())} of {int((~nan).sum())} non-NaN values differ from ml_dtypes; "
          f"NaNs stay NaN: {bool(np.isnan(got[nan].view(ml_dtypes.bfloat16).astype(np.float32)).all())}; "
          f"NaN inputs {[hex(v) for v in bits[-9:-4]]} -> {[hex(v) for v in got[-9:-4]]}")
    narrow_gelu_erf(dev)


def narrow_gelu_erf(dev) -> None:
    """Every f16 and bf16 input of unary.gelu_erf (the fast_exp2/fast_rcp path) against x Phi(x) in
    f64 (Phi from erfc: no cancellation), in ulp of the type."""
    import math

    from stdlib_kernels import unary
    erfc = np.vectorize(math.erfc)
    for name, np_dt in (("f16", np.float16), ("bf16", ml_dtypes.bfloat16)):
        x = np.arange(1 << 16, dtype=np.uint16).view(np_dt)
        got = unary.gelu_erf(dev.to_device(x)).to_host()
        xf = x.astype(np.float64)
        with np.errstate(invalid="ignore"):
            want = (xf * 0.5 * erfc(-xf / math.sqrt(2))).astype(np_dt)
        gi, wi = (a.view(np.int16).astype(np.int64) for a in (got, want))
        gi, wi = (np.where(v < 0, -32768 - v, v) for v in (gi, wi))
        finite = np.isfinite(want.astype(np.float64))
        d = np.abs(gi - wi)[finite]
        same_nan = (np.isnan(got.astype(np.float64)) == np.isnan(want.astype(np.float64))).all()
        print(f"gelu_erf {name} on the GPU, every input: max {d.max()} ulp ({int((d > 0).sum())} off by one); "
              f"NaNs where expected: {same_nan}")


if __name__ == "__main__":
    main()
