"""The CPU target's ``pk.mma`` (``targets/cpu.py``: ``CpuMatrixUnit``) against the portable lowering
through wave shuffles it replaced (``targets/matrix.py``: ``PortableMatrixUnit``, still the lowering of
RDNA2, the generic AMD targets and RDNA in wave64): the same products added in the same order, so the
results must be the same bits, and the exchange through the wave buffer must be far cheaper to compile
(the reason for it: two suspends a product instead of 2 (1 + E) K).

Each block has several waves with different tiles, and each wave does two products in a row (the
second exchange reuses the wave buffer the first one filled); a block whose last wave is partial
(48 threads at wave32) checks that lanes past the block give a lane its own element, as a shuffle does.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import pykern as pk
from pykern import ConstPtr, Ptr, bf16, f16, f32, i8, i32
from pykern.compiler import lower_module
from pykern.runtime.cpu import CpuDevice
from pykern.targets.cpu import CpuMatrixUnit, CpuTarget
from pykern.targets.matrix import PortableMatrixUnit

T = pk.TypeVar("T")
C = pk.TypeVar("C")


class ShuffleCpuTarget(CpuTarget):
    """The CPU target with the shuffle lowering of ``pk.mma`` (the reference here), cached apart."""

    def matrix_unit(self, dtype):
        return PortableMatrixUnit(dtype, self.wave_size)

    def cache_key(self) -> str:
        return super().cache_key() + ":mma-shuffles"


def shuffle_device(wave_size: int) -> CpuDevice:
    dev = CpuDevice(wave_size=wave_size)
    dev._target = ShuffleCpuTarget(wave_size=wave_size)
    return dev


@pk.kernel
def k_two_products(a: ConstPtr[T], b: ConstPtr[T], c: Ptr[C], *, T, C, KD):
    """Wave w: c[w] = a[2w] @ b + (a[2w + 1] @ b + c[w]) on 16 x KD tiles of A (row-major, ld KD) and
    one KD x 16 B (column-major, ld KD); c[w] is 16x16 (ld 16)."""
    w = i32(pk.thread_idx.x) // pk.wave_size
    fb = pk.mma.load_b(b, KD, layout="col")
    acc = pk.mma.load_c(c + w * 256, 16)
    acc = pk.mma.mma(pk.mma.load_a(a + (2 * w + 1) * 16 * KD, KD), fb, acc)
    acc = pk.mma.mma(pk.mma.load_a(a + 2 * w * 16 * KD, KD), fb, acc)
    pk.mma.store(c + w * 256, 16, acc)


def _inputs(dtype, shape, gen):
    if dtype is i8:
        return gen.integers(-128, 128, size=shape).astype(np.int8)
    return gen.standard_normal(shape).astype(np.float32).astype(dtype.np)


def _run(dev, dtype, waves: int, threads: int):
    kd = 32 if dtype is i8 else 16
    acc_t = i32 if dtype is i8 else f32
    gen = np.random.default_rng(kd + threads)
    a = _inputs(dtype, (2 * waves * 16, kd), gen)
    b = _inputs(dtype, (16, kd), gen)  # column-major B: B[k][n] at n * kd + k
    c = (gen.integers(-1000, 1000, (waves * 16, 16)) if dtype is i8 else gen.standard_normal((waves * 16, 16)))
    c = c.astype(acc_t.np)
    out = dev.to_device(c)
    k_two_products.instance(T=dtype, C=acc_t, KD=kd).launch(1, threads, dev.to_device(a), dev.to_device(b), out,
                                                           device=dev)
    return out.to_host(), a, b, c


@pytest.mark.parametrize("wave_size", [32, 64])
@pytest.mark.parametrize("dtype", [f16, bf16, i8], ids=lambda d: d.name)
def test_same_bits_as_the_shuffles(dtype, wave_size):
    waves = 2
    got, a, b, c = _run(CpuDevice(wave_size=wave_size), dtype, waves, waves * wave_size)
    want, *_ = _run(shuffle_device(wave_size), dtype, waves, waves * wave_size)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    wide = np.int64 if dtype is i8 else np.float64
    for w in range(waves):  # and both are the product (i8: exact; f16/bf16: products exact, f32 sums)
        ref = a[32 * w:32 * w + 16].astype(wide) @ b.T.astype(wide) + (
            a[32 * w + 16:32 * w + 32].astype(wide) @ b.T.astype(wide) + c[16 * w:16 * w + 16])
        if dtype is i8:
            np.testing.assert_array_equal(got[16 * w:16 * w + 16], ref.astype(np.int32))
        else:
            np.testing.assert_allclose(got[16 * w:16 * w + 16], ref, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("dtype", [f16, i8], ids=lambda d: d.name)
def test_lanes_past_the_block_as_the_shuffles(dtype):
    """48 threads at wave32: the second wave's lanes 16-31 do not exist; a lane reading one of them
    gets its own element, as from a shuffle."""
    got, *_ = _run(CpuDevice(wave_size=32), dtype, 2, 48)
    want, *_ = _run(shuffle_device(32), dtype, 2, 48)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_cpu_unit_and_suspends():
    """The CPU target takes CpuMatrixUnit; a product suspends twice (the shuffles: 2 (1 + E) K)."""
    assert isinstance(CpuTarget(wave_size=32).matrix_unit(i8), CpuMatrixUnit)
    inst = k_two_products.instance("two_i8", T=i8, C=i32, KD=32)
    for target, per_product in ((CpuTarget(wave_size=32), 2), (ShuffleCpuTarget(wave_size=32), 2 * (1 + 8) * 32)):
        text = str(lower_module([inst], target, "mma")[0])
        assert len(re.findall(r'call i8 @"llvm\.coro\.suspend"\(token none, i1 0\)', text)) == 2 * per_product
