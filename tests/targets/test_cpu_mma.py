"""The CPU target's ``pk.mma`` (``targets/cpu.py``: ``CpuMatrixUnit``): the products of the portable
lowering through wave shuffles it replaced on the CPU (``targets/matrix.py``: ``PortableMatrixUnit``,
still RDNA2's, the generic AMD targets' and RDNA wave64's) added in the same order, so the same bits,
at a fraction of the compile (two suspends a product instead of 2 (1 + E) K).

* Against an exact model of that order in NumPy (f16/bf16: each product exact in f32, then the f32
  sums in order of k; i8: exact), bit for bit, at both widths; each wave does two products in a row
  (the second exchange reuses the wave buffer the first one filled) on tiles of its own.
* Against the shuffle lowering itself, bit for bit, one product a wave at wave64 (its compile is the
  cost of this file), and in a block whose second wave is partial (96 threads): a lane reading a lane
  past the block gets its own element, as from a shuffle.
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


@pk.kernel
def k_one_product(a: ConstPtr[T], b: ConstPtr[T], c: Ptr[C], *, T, C, KD):
    """Wave w: c[w] = a[w] @ b + c[w] (the layouts of ``k_two_products``)."""
    w = i32(pk.thread_idx.x) // pk.wave_size
    acc = pk.mma.mma(pk.mma.load_a(a + w * 16 * KD, KD), pk.mma.load_b(b, KD, layout="col"),
                     pk.mma.load_c(c + w * 256, 16))
    pk.mma.store(c + w * 256, 16, acc)


def _inputs(dtype, shape, gen):
    if dtype is i8:
        return gen.integers(-128, 128, size=shape).astype(np.int8)
    return gen.standard_normal(shape).astype(np.float32).astype(dtype.np)


def _run(dev, kernel, dtype, waves: int, threads: int, products: int):
    kd = 32 if dtype is i8 else 16
    acc_t = i32 if dtype is i8 else f32
    gen = np.random.default_rng(kd + threads + products)
    a = _inputs(dtype, (products * waves * 16, kd), gen)
    b = _inputs(dtype, (16, kd), gen)  # column-major B: B[k][n] at n * kd + k
    c = (gen.integers(-1000, 1000, (waves * 16, 16)) if dtype is i8 else gen.standard_normal((waves * 16, 16)))
    c = c.astype(acc_t.np)
    out = dev.to_device(c)
    kernel.instance(T=dtype, C=acc_t, KD=kd).launch(1, threads, dev.to_device(a), dev.to_device(b), out, device=dev)
    return out.to_host(), a, b, c


def _sequential(a_tile, b, acc):
    """acc + a_tile @ b.T in the portable order: for each k, acc += a[m][k] * b[n][k] (i8: exact;
    f16/bf16: the product exact in f32, each sum rounded to f32)."""
    if a_tile.dtype == np.int8:
        return (acc.astype(np.int64) + a_tile.astype(np.int64) @ b.T.astype(np.int64)).astype(np.int32)
    acc = acc.astype(np.float32)
    for k in range(a_tile.shape[1]):
        acc = acc + a_tile[:, k:k + 1].astype(np.float32) * b[:, k].astype(np.float32)[None, :]
    return acc


@pytest.mark.parametrize("wave_size", [32, 64])
@pytest.mark.parametrize("dtype", [f16, bf16, i8], ids=lambda d: d.name)
def test_the_portable_order_bit_for_bit(dtype, wave_size):
    waves = 2
    got, a, b, c = _run(CpuDevice(wave_size=wave_size), k_two_products, dtype, waves, waves * wave_size, 2)
    for w in range(waves):  # c[w] = a[2w] @ b + (a[2w + 1] @ b + c[w])
        want = _sequential(a[32 * w:32 * w + 16], b, _sequential(a[32 * w + 16:32 * w + 32], b, c[16 * w:16 * w + 16]))
        np.testing.assert_array_equal(got[16 * w:16 * w + 16].view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("threads", [128, 96], ids=["whole", "partial"])
@pytest.mark.parametrize("dtype", [f16, bf16, i8], ids=lambda d: d.name)
def test_same_bits_as_the_shuffles(dtype, threads):
    got, *_ = _run(CpuDevice(wave_size=64), k_one_product, dtype, 2, threads, 1)
    want, *_ = _run(shuffle_device(64), k_one_product, dtype, 2, threads, 1)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_cpu_unit_and_suspends():
    """The CPU target takes CpuMatrixUnit; a product suspends twice (the shuffles: 2 (1 + E) K)."""
    assert isinstance(CpuTarget(wave_size=32).matrix_unit(i8), CpuMatrixUnit)
    inst = k_two_products.instance("two_i8", T=i8, C=i32, KD=32)
    for target, per_product in ((CpuTarget(wave_size=32), 2), (ShuffleCpuTarget(wave_size=32), 2 * (1 + 8) * 32)):
        text = str(lower_module([inst], target, "mma")[0])
        assert len(re.findall(r'call i8 @"llvm\.coro\.suspend"\(token none, i1 0\)', text)) == 2 * per_product
