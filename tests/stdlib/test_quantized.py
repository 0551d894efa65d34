"""QUANTIZED: candle's 142 GGUF kernels, against gguf (the oracle for ggml's formats) and NumPy.

* Dequantizers (``dequantize_block_*``, ``get_rows_*``) are bit-exact against
  ``gguf.quants.dequantize`` (Q8_K, which gguf has no dequantizer for: ``d * q`` from the byte
  layout), on random block bytes (every quant bit pattern; finite scales of both signs, subnormal
  ones included) and on gguf's own quantization of Gaussian data.
* ``quantize_q8_1`` is bit-exact against a NumPy emulation of candle's CUDA definition.
* The products (MMVQ, MMQ, MoE with q8_1 activations; DMMV with f32 ones) are checked within error
  bounds derived below, not a fixed tolerance, under candle's launch shapes, odd row counts and
  ``ncols`` not a multiple of 512; rows past the matrix are never written.

Every kernel runs on the CPU at wave widths 32 and 64 (and with the GPU's grid-stride tiles).
"""
from __future__ import annotations

import functools

import json

import numpy as np
import pytest
from gguf import GGMLQuantizationType as GT
from gguf.quants import dequantize as gguf_dequantize
from gguf.quants import quantize as gguf_quantize

import pykern as pk
from stdlib_kernels import QUANTIZED, quantized as Q
from tests.conftest import GPU_KINDS
from _elementwise import ABI, abi_mismatches


@pytest.fixture(params=[32, 64] + GPU_KINDS, ids=lambda p: f"cpu{p}" if isinstance(p, int) else p)
def wave_device(request):
    """The CPU at wave widths 32 and 64, and any GPU. (No kernel here has a grid-stride loop, so
    the GPU's tiles change nothing: the package-wide fixture's third CPU device is left out.)"""
    if isinstance(request.param, int):
        return pk.device("cpu", wave_size=request.param)
    return pk.device(request.param)

@pytest.fixture(params=[32, 64, "tiles"] + GPU_KINDS, ids=lambda p: f"cpu{p}" if isinstance(p, int) else p)
def span_device(request):
    """``wave_device`` and the CPU with the GPU's tiles (the dequantizers' ``pk.parallel_range``
    takes 16 bytes of output a thread where aligned: that path is checked here on the CPU too)."""
    if request.param == "tiles":
        return pk.device("cpu", wave_size=32, tile_bytes=16)
    if isinstance(request.param, int):
        return pk.device("cpu", wave_size=request.param)
    return pk.device(request.param)


U = 2.0 ** -24  # f32 unit roundoff
TYPES = list(Q.QTYPES)
MATMUL = [q.name for q in Q.MATMUL_TYPES]
LEGACY = [q for q in MATMUL if not q.endswith("K")]

#: byte offsets of each format's f16 scale fields (Q8_K's d is an f32 at 0)
SCALE_FIELDS = {"q4_0": [0], "q4_1": [0, 2], "q5_0": [0], "q5_1": [0, 2], "q8_0": [0], "q2_K": [80, 82],
                "q3_K": [108], "q4_K": [0, 2], "q5_K": [0, 2], "q6_K": [208], "q8_K": []}
#: the bytes holding each format-with-a-min's quants: zeroed, a block dequantizes to its mins
QUANT_BYTES = {"q4_1": (4, 20), "q5_1": (4, 24), "q2_K": (16, 80), "q4_K": (16, 144), "q5_K": (16, 176)}


def gguf_type(name: str) -> GT:
    return GT[name.upper()]


def random_blocks(rng, qtype: str, nrows: int, ncols: int, scale: float = 1e-2) -> np.ndarray:
    """Random block bytes (every quant bit pattern) with finite scales of both signs, some subnormal:
    uint8 of shape (nrows, ncols / qk * nbytes)."""
    q = Q.QTYPES[qtype]
    raw = rng.integers(0, 256, size=(nrows, ncols // q.qk, q.nbytes), dtype=np.uint8)
    for off in SCALE_FIELDS[qtype]:
        v = rng.uniform(0.5, 1.5, raw.shape[:2]) * scale * rng.choice([-1.0, 1.0], raw.shape[:2])
        v[rng.random(raw.shape[:2]) < 0.05] = 3e-6  # an f16 subnormal
        raw[..., off:off + 2] = v.astype(np.float16)[..., None].view(np.uint8)
    if qtype == "q8_K":
        raw[..., 0:4] = (rng.standard_normal(raw.shape[:2]) * scale).astype(np.float32)[..., None].view(np.uint8)
    return raw.reshape(nrows, -1)


def gaussian_blocks(rng, qtype: str, nrows: int, ncols: int) -> np.ndarray:
    """gguf's quantization of N(0, 1) weights where gguf has a quantizer (the legacy formats)."""
    if qtype in LEGACY:
        return gguf_quantize(rng.standard_normal((nrows, ncols)).astype(np.float32), gguf_type(qtype))
    return random_blocks(rng, qtype, nrows, ncols)


def reference_dequantize(blocks: np.ndarray, qtype: str) -> np.ndarray:
    """gguf's dequantizer; Q8_K (none in gguf) from its layout: f32 d, 256 x i8, 16 x i16 sums."""
    if qtype == "q8_K":
        b = blocks.reshape(-1, 292)
        d = b[:, 0:4].copy().view(np.float32)
        return (d * b[:, 4:260].view(np.int8).astype(np.float32)).reshape(blocks.shape[0], -1)
    return gguf_dequantize(blocks, gguf_type(qtype))


def group_mins(blocks: np.ndarray, qtype: str) -> np.ndarray:
    """Each element's group min (0 where the format has none): the block dequantized with its quants zeroed."""
    if qtype not in QUANT_BYTES:
        return np.zeros((blocks.shape[0], blocks.shape[1] // Q.QTYPES[qtype].nbytes * Q.QTYPES[qtype].qk))
    q = Q.QTYPES[qtype]
    b = blocks.reshape(blocks.shape[0], -1, q.nbytes).copy()
    lo, hi = QUANT_BYTES[qtype]
    b[..., lo:hi] = 0
    return reference_dequantize(b.reshape(blocks.shape[0], -1), qtype).astype(np.float64)


def padded(blocks: np.ndarray) -> np.ndarray:
    """The flat weight buffer as candle stores it: MATRIX_ROW_PADDING elements' worth of zero bytes after."""
    return np.concatenate([blocks.reshape(-1), np.zeros(512 * 2, np.uint8)])


# ------------------------------------------------------------------------------------------------- ABI
def test_abi_names_and_param_sizes():
    assert abi_mismatches(QUANTIZED) == []
    spec = json.loads(ABI.read_text())["modules"]["quantized"]
    # the wrappers' own MMQ tile and batch-1 MMVQ rows a block, with candle's signatures
    extras = {f"mul_mat_vec_rows_{q}_q8_1": f"mul_mat_vec_{q}_q8_1_cuda1" for q in MATMUL}
    sizes = {name: spec[like] for name, like in extras.items()}
    sizes.update({f"dequantize_{q}_{d}": [8, 8, 8] for q in TYPES for d in ("f32", "f16")})  # the wrappers' own
    # the wrappers' planar MMQ: candle's mul_mat_{q} signature; its quantize: quantize_q8_1's
    sizes.update({f"mul_mat_planar_{q}": spec[f"mul_mat_{q}"] for q in MATMUL})
    sizes["quantize_q8_1_planar"] = spec["quantize_q8_1"]
    # the wrappers' MMQ on pk.mma (q4_0, q8_0, q4_K, q6_K above 16 columns): candle's mul_mat_{q} signature
    sizes.update({f"mul_mat_mma_{q}_{wr}x{wc}x{kw}": spec[f"mul_mat_{q}"] for q in Q.MMQ_MMA_TYPES
                  for wr, wc, kw in Q.mmq_mma_tiles(q)})
    assert sorted(QUANTIZED.names()) == sorted(set(spec) | set(sizes)) and len(spec) == 142
    target = pk.device("cpu").target
    for name, want in sizes.items():
        assert [ty.nbytes for _, ty in QUANTIZED.get(name).typed(target).params] == want


# ------------------------------------------------------------------------------------------------- dequantize
@pytest.mark.parametrize("qtype", TYPES)
@pytest.mark.parametrize("dtype", [pk.f32, pk.f16], ids=str)
def test_dequantize_block_bit_exact(span_device, qtype, dtype):
    """candle's launch (grid, block, count) for each format; every element equals gguf's."""
    rng = np.random.default_rng(len(qtype) + dtype.nbytes)
    q = Q.QTYPES[qtype]
    for blocks in (random_blocks(rng, qtype, 3, 5 * q.qk if q.qk == 256 else 44 * 32),
                   gaussian_blocks(rng, qtype, 2, 768)):
        el = blocks.size // q.nbytes * q.qk
        per, threads, unit = Q.DEQUANTIZE_LAUNCH[qtype]
        fn = span_device.get_or_load_func(f"dequantize_block_{qtype}_{dtype}", QUANTIZED)
        want = reference_dequantize(blocks, qtype).reshape(-1).astype(dtype.np)
        for offset in (0, 1):  # 8-byte aligned output (packed 8-byte stores), and not (one element a store)
            y = span_device.zeros(el + 64, dtype)  # what is past the output must stay untouched
            args = (span_device.to_device(blocks.reshape(-1)), y.offset_view(offset, (el,)))
            fn[-(-el // per), threads](*args, *(() if unit is None else (el // unit,)))
            got = y.to_host()
            np.testing.assert_array_equal(got[offset:offset + el], want)
            assert not got[:offset].any() and not got[offset + el:].any()


# ------------------------------------------------------------------------------------------------- get_rows
@pytest.mark.parametrize("qtype", MATMUL + ["f32", "f16", "bf16"])
def test_get_rows_bit_exact(span_device, qtype):
    rng = np.random.default_rng(7)
    hidden, rows = 512, 9
    if qtype in Q.QTYPES:
        q = Q.QTYPES[qtype]
        table = random_blocks(rng, qtype, rows, hidden)
        full = reference_dequantize(table, qtype)
        row_bytes = hidden // q.qk * q.nbytes
        block = 256 if q.qk == 32 else (32 if qtype == "q4_K" else 64)
        grid_y = -(-hidden // 512) if q.qk == 32 else hidden // 256
        src = span_device.to_device(table.reshape(-1))
    else:
        dt = getattr(pk, qtype)
        table = rng.standard_normal((rows, hidden)).astype(dt.np)
        full = table.astype(np.float32)
        row_bytes, block, grid_y = hidden * dt.nbytes, 256, -(-hidden // 256)
        src = span_device.to_device(table)
    ids = np.array([3, 0, 8, 3, 5], np.uint32)
    dst = span_device.zeros((len(ids), hidden), pk.f32)
    span_device.get_or_load_func(f"get_rows_{qtype}", QUANTIZED)[(len(ids), grid_y), block](
        src, span_device.to_device(ids), dst, hidden, row_bytes)
    np.testing.assert_array_equal(dst.to_host(), full[ids])


# ------------------------------------------------------------------------------------------------- quantize_q8_1
def roundf(a: np.ndarray) -> np.ndarray:
    """C's roundf: halves away from zero."""
    return np.sign(a) * np.floor(np.abs(a) + np.float32(0.5))


def quantize_q8_1_reference(x: np.ndarray, kx_padded: int) -> np.ndarray:
    """candle's CUDA quantize_q8_1 in NumPy: per 32 values (zero past the row), ``d = amax / 127``,
    ``q = roundf(x / d)`` (0 where amax = 0), ``s`` the f16 of the xor-butterfly f32 sum (the kernels'
    order of additions). Returns the q8_1 bytes, (rows, kx_padded / 32 * 36)."""
    rows, kx = x.shape
    xp = np.zeros((rows, kx_padded), np.float32)
    xp[:, :kx] = x
    v = xp.reshape(rows, -1, 32)
    amax = np.abs(v).max(axis=2)
    total = v.copy()
    lanes = np.arange(32)
    for off in (16, 8, 4, 2, 1):
        total = total + total[..., lanes ^ off]
    d = amax / np.float32(127)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(amax[..., None] == 0, 0, roundf(v / d[..., None])).astype(np.int8)
    out = np.zeros(v.shape[:2] + (36,), np.uint8)
    out[..., 0:2] = d.astype(np.float16)[..., None].view(np.uint8)
    out[..., 2:4] = total[..., 0].astype(np.float16)[..., None].view(np.uint8)
    out[..., 4:] = q.view(np.uint8)
    return out.reshape(rows, -1)


def activations(rng, rows: int, kx: int) -> np.ndarray:
    x = rng.standard_normal((rows, kx)).astype(np.float32)
    x[0, :32] = 0.0                                   # a block of zeros: d = 0, q = 0
    x[0, 32:64] = np.linspace(-1, 1, 32) * 127 / 64   # halves of d: roundf's ties away from zero
    return x


@pytest.mark.parametrize("rows,kx", [(1, 4096), (3, 700), (5, 96)])
def test_quantize_q8_1_bit_exact(wave_device, rows, kx):
    rng = np.random.default_rng(kx)
    x = activations(rng, rows, kx)
    kx_padded = -(-kx // 512) * 512
    vy = wave_device.zeros(rows * kx_padded // 32 * 36, pk.u8)
    wave_device.get_or_load_func("quantize_q8_1", QUANTIZED)[(kx_padded // 256, rows), 256](
        wave_device.to_device(x), vy, kx, kx_padded)
    np.testing.assert_array_equal(vy.to_host().reshape(rows, -1), quantize_q8_1_reference(x, kx_padded))


# ------------------------------------------------------------------------------------------------- products
def q8_1_values(qy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The dequantized q8_1 activations (d8 * q8, float64) and |q8| times d8, per element."""
    b = qy.reshape(qy.shape[0], -1, 36)
    d8 = b[..., 0:2].copy().view(np.float16)[..., 0].astype(np.float64)
    q8 = b[..., 4:].view(np.int8).astype(np.float64)
    return (d8[..., None] * q8).reshape(qy.shape[0], -1), (d8[..., None] * np.abs(q8)).reshape(qy.shape[0], -1)


def check_q8_1_product(got: np.ndarray, blocks: np.ndarray, qtype: str, x: np.ndarray, qy: np.ndarray):
    """``got`` (ncols_y, nrows) against the weights times the activations, two bounds:

    1. The kernel's arithmetic against ``W · xq`` (xq = d8·q8, the dequantized q8_1 activations, in
       float64). Per 16/32-element group it forms integer dots (exact) and
       ``d8 · (scale · Σ(q + qoff)·q8 + min · Σ q8)``; with ``|scale·q| ≤ |w| + |min|`` each group term
       is at most ``Σ_j d8·(|w_j| + 2|min_j|)·|q8_j|`` and carries a few roundings, and at most
       ``ncols / 16`` group terms are added in sequence (fewer: a thread's chunks, then a tree). So
       ``|got − W·xq| ≤ (ncols/16 + 24) · u · Σ_j d8·(|w_j| + 2|min_j|)·|q8_j|`` (u = 2^-24; gguf's own
       rounding of ``scale·q`` in W is one more u per element, inside the slack).
    2. q8_1 against the float activations: ``|xq_j − x_j| ≤ 0.5·d8·(1 + 2^-9) + 2^-10·|x_j|`` (half a
       step of the f32 d, d's rounding to f16 — 2^-11 relative — times |q| ≤ |x|/d + 1/2, and the
       quotient's rounding), so ``|W·xq − W·x| ≤ Σ_j |w_j|·that``.
    """
    w = reference_dequantize(blocks, qtype).astype(np.float64)
    ncols = w.shape[1]
    xq, d8q8 = q8_1_values(qy)
    xq, d8q8 = xq[:, :ncols], d8q8[:, :ncols]
    mins = np.abs(group_mins(blocks, qtype))
    emulated = xq @ w.T
    arith = (ncols / 16 + 24) * U * (d8q8 @ (np.abs(w) + 2 * mins).T)
    assert np.all(np.abs(got - emulated) <= arith), np.max(np.abs(got - emulated) / arith)
    d8 = np.repeat(qy.reshape(qy.shape[0], -1, 36)[..., 0:2].copy().view(np.float16)[..., 0].astype(np.float64),
                   32, axis=1)[:, :ncols]
    x64 = x.astype(np.float64)[:, :ncols]
    quant = (0.5 * d8 * (1 + 2 ** -9) + 2 ** -10 * np.abs(x64)) @ np.abs(w).T
    assert np.all(np.abs(emulated - x64 @ w.T) <= quant)
    assert np.all(np.abs(got - x64 @ w.T) <= arith + quant)


def quantize_on(device, x: np.ndarray) -> tuple[object, np.ndarray]:
    """x (rows, k) quantized to q8_1 by the kernel: (device bytes, host bytes)."""
    rows, kx = x.shape
    kx_padded = -(-kx // 512) * 512
    vy = device.zeros(rows * kx_padded // 32 * 36, pk.u8)
    device.get_or_load_func("quantize_q8_1", QUANTIZED)[(kx_padded // 256, rows), 256](
        device.to_device(np.ascontiguousarray(x)), vy, kx, kx_padded)
    return vy, vy.to_host().reshape(rows, -1)


def weights(rng, qtype: str, nrows: int, ncols: int) -> np.ndarray:
    """Random block bytes for the K formats, gguf's quantization of Gaussian weights for the legacy ones
    (their random bytes are checked by the dequantizer tests); a random-bytes half for both."""
    blocks = random_blocks(rng, qtype, nrows, ncols, scale=0.05)
    if qtype in LEGACY:
        blocks[: nrows // 2] = gaussian_blocks(rng, qtype, nrows // 2, ncols)
    return blocks


def shape_for(qtype: str) -> tuple[int, int]:
    """An odd row count and a row length that is not a multiple of 512."""
    return (7, 768) if qtype.endswith("K") else (7, 352)


@pytest.mark.parametrize("width", Q.MMVQ_WIDTHS)
@pytest.mark.parametrize("qtype", MATMUL)
def test_mmvq(wave_device, qtype, width):
    """candle's launch: grid ceil(nrows / rows a block), block (32, 4 or 2); dst zeroed with a guard."""
    rng = np.random.default_rng(width)
    nrows, ncols = shape_for(qtype)
    blocks = weights(rng, qtype, nrows, ncols)
    x = activations(rng, width, ncols)
    vy, qy = quantize_on(wave_device, x)
    kx_padded = qy.shape[1] // 36 * 32
    rows = Q.mmvq_rows(width)
    dst = wave_device.zeros(width * nrows + 8, pk.f32)
    wave_device.get_or_load_func(f"mul_mat_vec_{qtype}_q8_1_cuda{width}", QUANTIZED)[
        -(-nrows // rows), (32, 4 if width <= 4 else 2)](
        wave_device.to_device(padded(blocks)), vy, dst, ncols, nrows, kx_padded, nrows)
    got = dst.to_host()
    assert not got[width * nrows:].any()  # candle's N >= 2 odd-nrows kernels write one past
    check_q8_1_product(got[:width * nrows].reshape(width, nrows), blocks, qtype, x, qy)


def run_mmvq_wrapper_rows(device, qtype: str, blocks: np.ndarray, nrows: int, x: np.ndarray, block=None):
    """The wrappers' batch-1 MMVQ (MMVQ_WRAPPER_ROWS rows a block, under MMVQ_WRAPPER_BLOCK or ``block``) on
    exact-size weights: (got, q8_1 bytes)."""
    block = Q.MMVQ_WRAPPER_BLOCK[qtype] if block is None else block
    vy, qy = quantize_on(device, x)
    dst = device.zeros(nrows + 8, pk.f32)
    rows = Q.MMVQ_WRAPPER_ROWS[qtype]
    device.get_or_load_func(f"mul_mat_vec_rows_{qtype}_q8_1", QUANTIZED)[-(-nrows // rows), block](
        device.to_device(blocks.reshape(-1)), vy, dst, x.shape[1], nrows, qy.shape[1] // 36 * 32, nrows)
    got = dst.to_host()
    assert not got[nrows:].any()  # rows past the matrix are not written
    return got[:nrows].reshape(1, nrows), qy


@pytest.mark.parametrize("qtype", MATMUL)
def test_mmvq_wrapper_rows(wave_device, qtype):
    """Odd row counts (the last block part empty), rows of 2-byte aligned blocks starting mid-word; the
    pair formats (a thread a pair of chunks) also with rows of more pairs than threads, under (32, 4) too."""
    rng = np.random.default_rng(11)
    shapes = [shape_for(qtype)] + ([(5, 4608)] if qtype in Q.MMVQ_PAIRS else [])
    for nrows, ncols in shapes:
        blocks = weights(rng, qtype, nrows, ncols)
        x = activations(rng, 1, ncols)
        for block in (None, (32, 4)):
            got, qy = run_mmvq_wrapper_rows(wave_device, qtype, blocks, nrows, x, block)
            check_q8_1_product(got, blocks, qtype, x, qy)


#: every format with a pair loader (``QType.pair``) through ``mul_mat_vec_pairs``, wrapper or not, at
#: 2 and 4 rows a block
PAIR_TYPES = [q.name for q in Q.MATMUL_TYPES if q.pair is not None]
PAIR_KERNELS = pk.Module("quantized_pairs_test").add(
    *(Q.mul_mat_vec_pairs.instance(f"pairs_{q}_{rows}", Q=Q.QTYPES[q], rows=rows, early=False) for q in PAIR_TYPES
      for rows in (2, 4)))


#: the batch-1 MMVQ kernels with a step's weights loaded before ``grid_dependency_wait`` (``early``) for
#: every format, at 2 and 4 rows a block: the wrappers take it for MMVQ_WEIGHTS_FIRST's formats only,
#: and benchmarks/quantized.py --only early times it for the others
EARLY_KERNELS = pk.Module("quantized_early_test").add(
    *((Q.mul_mat_vec_pairs.instance(f"early_{q}_{rows}", Q=Q.QTYPES[q], rows=rows, early=True) if q in PAIR_TYPES else
       Q.mul_mat_vec_q8_1.instance(f"early_{q}_{rows}", Q=Q.QTYPES[q], N=1, rows=rows, early=True))
      for q in MATMUL for rows in (2, 4)))


@pytest.mark.parametrize("qtype", MATMUL)
def test_mmvq_weights_first(wave_device, qtype):
    """``early``: every row's chunk (pair) of a step held at once, the activations after the wait. Odd
    row counts, rows of fewer and of more units than threads, (32, 2) and (32, 4); dst zeroed with a
    guard."""
    check_batch1_mmvq(wave_device, qtype, EARLY_KERNELS, "early", (shape_for(qtype), (5, 4608)), seed=18)


def check_batch1_mmvq(device, qtype: str, module, prefix: str, shapes, seed: int) -> None:
    """Kernels ``{prefix}_{qtype}_{rows}`` of ``module`` (a batch-1 MMVQ of 2 or 4 rows a block) under
    blocks of (32, 2) and (32, 4) at each (nrows, ncols) of ``shapes``: dst past the rows stays 0 and
    the rows are within §6.5's bound."""
    rng = np.random.default_rng(seed)
    for nrows, ncols in shapes:
        blocks = weights(rng, qtype, nrows, ncols)
        x = activations(rng, 1, ncols)
        vy, qy = quantize_on(device, x)
        for rows in (2, 4):
            for block in ((32, 2), (32, 4)):
                dst = device.zeros(nrows + 8, pk.f32)
                device.get_or_load_func(f"{prefix}_{qtype}_{rows}", module)[-(-nrows // rows), block](
                    device.to_device(blocks.reshape(-1)), vy, dst, ncols, nrows, qy.shape[1] // 36 * 32, nrows)
                got = dst.to_host()
                assert not got[nrows:].any()
                check_q8_1_product(got[:nrows].reshape(1, nrows), blocks, qtype, x, qy)


@pytest.mark.parametrize("qtype", PAIR_TYPES)
def test_mmvq_pairs(wave_device, qtype):
    """A thread a pair of chunks from one load (q4_K, q5_K: chunks 2p, 2p + 1; q6_K: 4h + s, 4h + s + 2):
    odd row counts, rows of fewer pairs than threads and of more (4608 columns: 72 pairs), blocks of
    (32, 2) and (32, 4); dst zeroed with a guard."""
    check_batch1_mmvq(wave_device, qtype, PAIR_KERNELS, "pairs", ((7, 768), (5, 4608)), seed=16)


@pytest.fixture(scope="module")
def warps_kernels():
    """benchmarks/quantized.py's batch-1 MMVQ probes (their GPU figures are in docs/targets/cuda.md:
    they stand only if the kernels are right): ``mul_mat_vec_warps`` (a wave per group of rows, the
    grid's waves striding over the groups) for every format at 1 and 2 rows a wave, WARPS_UNROLL
    units a lane and 1; ``mmvq_stride`` (the wrappers' kernel, the blocks striding over the groups)."""
    bench = tile_probe_module()
    return bench, pk.Module("quantized_warps_test").add(
        *(bench.mul_mat_vec_warps.instance(f"warps_{q}_{rows}_{unroll}", QT=Q.QTYPES[q], rows=rows, unroll=unroll)
          for q in MATMUL for rows in (1, 2) for unroll in (1, bench.WARPS_UNROLL[q])),
        *(bench.mmvq_stride.instance(f"stride_{q}", QT=Q.QTYPES[q], rows=Q.MMVQ_WRAPPER_ROWS[q]) for q in MATMUL))


@pytest.mark.parametrize("qtype", MATMUL)
def test_mmvq_warps(wave_device, warps_kernels, qtype):
    """Odd row counts; rows whose units a lane holds in registers across rows and rows of more units
    than a wave's lanes hold (4608 columns); grids of fewer waves than row groups (a wave takes
    several) and of more (waves with none); dst zeroed with a guard. The grid-stride wrappers' kernel
    likewise, 1 and 5 blocks."""
    bench, kernels = warps_kernels
    rng = np.random.default_rng(21)
    for nrows, ncols in (shape_for(qtype), (5, 4608)):
        blocks = weights(rng, qtype, nrows, ncols)
        x = activations(rng, 1, ncols)
        vy, qy = quantize_on(wave_device, x)
        for rows in (1, 2):
            for unroll in (1, bench.WARPS_UNROLL[qtype]):
                for grid, block in ((1, (32, 2)), (5, (32, 4))):
                    dst = wave_device.zeros(nrows + 8, pk.f32)
                    wave_device.get_or_load_func(f"warps_{qtype}_{rows}_{unroll}", kernels)[grid, block](
                        wave_device.to_device(blocks.reshape(-1)), vy, dst, ncols, nrows, qy.shape[1] // 36 * 32,
                        nrows)
                    got = dst.to_host()
                    assert not got[nrows:].any()
                    check_q8_1_product(got[:nrows].reshape(1, nrows), blocks, qtype, x, qy)
        for grid in (1, 5):
            dst = wave_device.zeros(nrows + 8, pk.f32)
            wave_device.get_or_load_func(f"stride_{qtype}", kernels)[grid, Q.MMVQ_WRAPPER_BLOCK[qtype]](
                wave_device.to_device(blocks.reshape(-1)), vy, dst, ncols, nrows, qy.shape[1] // 36 * 32, nrows)
            got = dst.to_host()
            assert not got[nrows:].any()
            check_q8_1_product(got[:nrows].reshape(1, nrows), blocks, qtype, x, qy)


#: the planar-activation MMQ (``quantize_q8_1_planar`` + ``mul_mat_planar``) at the shapes the benchmark
#: times beside the wrappers' (MMQ_PLANAR_COLUMNS x MMQ_PLANAR_ROWS: ``mul_mat_planar_{q}`` of the module)
PLANAR_SHAPES = ((4, 8), (16, 2))
PLANAR_KERNELS = pk.Module("quantized_planar_test").add(
    *(Q.mul_mat_planar.instance(f"planar_{q}_{n}x{r}", Q=Q.QTYPES[q], N=n, rows=r)
      for q in MATMUL for n, r in PLANAR_SHAPES))


def planar_to_q8_1(planes: np.ndarray, rows: int, k_padded: int) -> np.ndarray:
    """The first ``rows`` rows of planar q8_1 bytes back to q8_1 blocks (rows, k_padded / 32 * 36), and
    the planes' sums checked against the quants."""
    c, g = k_padded // 32, Q.PLANAR_GROUP
    p = planes[:rows * c * 44].reshape(rows, c // g, 11, g, 4)  # groups of g chunks: 8 quant planes, d8, two sums
    quants = p[:, :, :8].transpose(0, 1, 3, 2, 4).reshape(rows, c, 32)
    d8 = p[:, :, 8].copy().view(np.float32).reshape(rows, c)
    sums = p[:, :, 9:].copy().view(np.int32)[..., 0].transpose(0, 2, 1, 3).reshape(rows, 2, c)
    q = quants.view(np.int8).astype(np.int32)
    np.testing.assert_array_equal(sums[:, 0], q[..., :16].sum(axis=2))
    np.testing.assert_array_equal(sums[:, 1], q[..., 16:].sum(axis=2))
    out = np.zeros((rows, c, 36), np.uint8)
    out[..., 0:2] = d8.astype(np.float16)[..., None].view(np.uint8)  # exact: d8 is an f16 value
    out[..., 4:] = quants
    return out.reshape(rows, -1)


@pytest.mark.parametrize("rows, kx", [(1, 256), (3, 700), (5, 4096)])
def test_quantize_q8_1_planar_matches(wave_device, rows, kx):
    """The planar layout holds quantize_q8_1's quants and d (an f16 value, as f32) bit for bit, and
    the sum of each 16 quants; the padding is zero quants. Through the API, in launches of 2 rows."""
    x = activations(np.random.default_rng(kx), rows, kx)
    vp, kx_padded = qapi.quantize_q8_1_planar(wave_device.to_device(x), max_rows=2, pad_rows=4)
    assert kx_padded == -(-kx // 512) * 512 and vp.size == -(-rows // 4) * 4 * kx_padded // 32 * Q.PLANAR_BYTES
    assert not vp.to_host()[rows * kx_padded // 32 * Q.PLANAR_BYTES:].any()  # the padding rows: zeros
    _, qy = quantize_on(wave_device, x)
    got = planar_to_q8_1(vp.to_host(), rows, kx_padded).reshape(rows, -1, 36)
    want = qy.reshape(rows, -1, 36)
    np.testing.assert_array_equal(got[..., 4:], want[..., 4:])
    np.testing.assert_array_equal(got[..., 0:2], want[..., 0:2])


def run_mmq_planar(device, qtype: str, blocks: np.ndarray, nrows: int, x: np.ndarray, shape=None):
    """The planar MMQ (the module's ``mul_mat_planar_{q}``, or the test's at ``shape`` = (columns, rows)
    a block) on exact-size weights, dst with a guard: (got, the q8_1 blocks the planes hold)."""
    ncols_y, ncols = x.shape
    n, r = (Q.MMQ_PLANAR_COLUMNS, Q.MMQ_PLANAR_ROWS) if shape is None else shape
    vp, kx_padded = qapi.quantize_q8_1_planar(device.to_device(x), pad_rows=n)
    dst = device.zeros(ncols_y * nrows + 8, pk.f32)
    fn = (device.get_or_load_func(f"mul_mat_planar_{qtype}", QUANTIZED) if shape is None else
          device.get_or_load_func(f"planar_{qtype}_{n}x{r}", PLANAR_KERNELS))
    fn[(-(-nrows // r), -(-ncols_y // n)), (32, Q.MMQ_PLANAR_BLOCK_Y)](
        device.to_device(blocks.reshape(-1)), vp, dst, ncols, nrows, ncols_y, kx_padded, nrows)
    got = dst.to_host()
    assert not got[ncols_y * nrows:].any()  # outputs outside the matrix are not written
    return got[:ncols_y * nrows].reshape(ncols_y, nrows), planar_to_q8_1(vp.to_host(), ncols_y, kx_padded)


@pytest.mark.parametrize("qtype", MATMUL)
def test_mmq_planar(wave_device, qtype):
    """The wrappers' MMQ and the benchmark's other shapes: odd row counts, a last group of columns only
    partly inside the matrix (13, 37 columns), rows of more chunks than threads (4608 columns)."""
    rng = np.random.default_rng(18)
    for nrows, ncols, ncols_y in (shape_for(qtype) + (13,), (5, 4608, 37)):
        blocks = weights(rng, qtype, nrows, ncols)
        x = activations(rng, ncols_y, ncols)
        for shape in (None,) + PLANAR_SHAPES:
            got, qy = run_mmq_planar(wave_device, qtype, blocks, nrows, x, shape)
            check_q8_1_product(got, blocks, qtype, x, qy)


def run_mmq_mma(device, qtype: str, blocks: np.ndarray, nrows: int, x: np.ndarray, tile=None):
    """``mul_mat_mma_{q}`` (the tile the wrappers pick for the batch, or ``tile`` = (WR, WC, KW)) under
    the wrappers' launch on exact-size weights and unpadded q8_1 rows, dst with a guard: (got, q8_1)."""
    ncols_y, ncols = x.shape
    wr, wc, kw = tile or Q.mmq_mma_tile(qtype, ncols_y)
    vy, qy = quantize_on(device, x)
    dst = device.zeros(ncols_y * nrows + 8, pk.f32)
    device.get_or_load_func(f"mul_mat_mma_{qtype}_{wr}x{wc}x{kw}", QUANTIZED)[
        (-(-nrows // (16 * wr)), -(-ncols_y // (16 * wc))), Q.MMQ_MMA_WAVES * device.target.wave_size](
        device.to_device(blocks.reshape(-1)), vy, dst, ncols, nrows, ncols_y, qy.shape[1] // 36 * 32, nrows)
    got = dst.to_host()
    assert not got[ncols_y * nrows:].any()  # outputs outside the matrix are not written
    return got[:ncols_y * nrows].reshape(ncols_y, nrows), qy


#: (activation columns, weight rows, ncols_x): columns past a whole tile (17, 31, 33, 100, 300: under
#: every tile), rows 16k + 5 (a partial last tile, one of 2 x 16 rows too), ncols_x 32 x odd (a
#: partial last stage of MMQ_MMA_STEP blocks: 288 = 9 blocks; 4128 = 129)
MMA_SHAPES = [(17, 21, 288), (31, 37, 4128), (33, 5, 288), (100, 37, 288), (300, 21, 288)]
#: the K formats' (q4_K, q6_K: a stage is one 256-element superblock a row): ncols_x 256 x odd
MMA_K_SHAPES = [(17, 21, 768), (31, 37, 1280), (33, 5, 256), (100, 37, 256), (300, 21, 768)]
MMA_LEGACY = [q for q in Q.MMQ_MMA_TYPES if q in LEGACY]
MMA_K = [q for q in Q.MMQ_MMA_TYPES if q not in LEGACY]
#: the tile the K formats are checked with at every shape (the others at the first): each
#: mul_mat_mma kernel costs 30-60 s of CPU compile a wave width
MMA_K_TILE = (1, 2, 2)
assert all(MMA_K_TILE in Q.mmq_mma_tiles(q) for q in MMA_K)


@pytest.mark.parametrize("qtype", MMA_LEGACY)
@pytest.mark.parametrize("ncols_y,nrows,ncols", MMA_SHAPES)
def test_mmq_mma(wave_device, qtype, ncols_y, nrows, ncols):
    """The wrappers' MMQ on pk.mma within spec §6.5's bound, every tile at every shape."""
    rng = np.random.default_rng(ncols_y + nrows)
    blocks = weights(rng, qtype, nrows, ncols)
    x = activations(rng, ncols_y, ncols)
    for tile in Q.mmq_mma_tiles(qtype):
        got, qy = run_mmq_mma(wave_device, qtype, blocks, nrows, x, tile)
        check_q8_1_product(got, blocks, qtype, x, qy)


@pytest.mark.parametrize("qtype", MMA_K)
@pytest.mark.parametrize("ncols_y,nrows,ncols", MMA_K_SHAPES)
def test_mmq_mma_k(wave_device, qtype, ncols_y, nrows, ncols):
    """q4_K (its mins through a product with ones) and q6_K (two 16-deep products a block) on pk.mma
    within spec §6.5's bound: MMA_K_TILE at every shape, every tile at the first."""
    rng = np.random.default_rng(ncols_y + nrows)
    blocks = weights(rng, qtype, nrows, ncols)
    x = activations(rng, ncols_y, ncols)
    first = (ncols_y, nrows, ncols) == MMA_K_SHAPES[0]
    for tile in Q.mmq_mma_tiles(qtype) if first else [MMA_K_TILE]:
        got, qy = run_mmq_mma(wave_device, qtype, blocks, nrows, x, tile)
        check_q8_1_product(got, blocks, qtype, x, qy)


@pytest.mark.parametrize("qtype", Q.MMQ_MMA_TYPES)
def test_mmq_mma_stays_in_bounds(checked, qtype):
    """Exact-size weights, q8_1 rows and dst: rows and columns past the matrix re-read the last valid
    one, blocks past the row the last block, never past the buffers; nothing outside dst is written.
    (The K formats: MMA_K_TILE only, the compile time.)"""
    rng = np.random.default_rng(20)
    nrows, ncols, ncols_y = 21, 288 if qtype in LEGACY else 256, 19
    blocks = weights(rng, qtype, nrows, ncols)
    x = activations(rng, ncols_y, ncols)
    vy, qy = quantize_on(checked, x)
    for wr, wc, kw in Q.mmq_mma_tiles(qtype) if qtype in LEGACY else [MMA_K_TILE]:
        dst = checked.zeros((ncols_y, nrows), pk.f32)
        checked.get_or_load_func(f"mul_mat_mma_{qtype}_{wr}x{wc}x{kw}", QUANTIZED)[
            (-(-nrows // (16 * wr)), -(-ncols_y // (16 * wc))), Q.MMQ_MMA_WAVES * checked.target.wave_size](
            checked.to_device(blocks.reshape(-1)), vy, dst, ncols, nrows, ncols_y, qy.shape[1] // 36 * 32, nrows)
        check_q8_1_product(dst.to_host(), blocks, qtype, x, qy)


@pytest.mark.parametrize("qtype", MATMUL)
@pytest.mark.parametrize("ncols_y", [9, 130, 300])
def test_mmq(wave_device, qtype, ncols_y):
    """candle's launch: grid (ceil(rows / mmq_y), ceil(cols / mmq_x)), block (32, 4)."""
    rng = np.random.default_rng(ncols_y)
    nrows, ncols = shape_for(qtype)
    blocks = weights(rng, qtype, nrows, ncols)
    x = activations(rng, ncols_y, ncols)
    vy, qy = quantize_on(wave_device, x)
    tile_x, tile_y = Q.MMQ_TILES[qtype]
    fn = wave_device.get_or_load_func(f"mul_mat_{qtype}", QUANTIZED)
    w = wave_device.to_device(padded(blocks))
    for block in ((32, 4), (32, 2)):  # candle's block: staged in shared memory; any other: per thread
        dst = wave_device.zeros(ncols_y * nrows + 8, pk.f32)
        fn[(-(-nrows // tile_y), -(-ncols_y // tile_x)), block](w, vy, dst, ncols, nrows, ncols_y,
                                                               qy.shape[1] // 36 * 32, nrows)
        got = dst.to_host()
        assert not got[ncols_y * nrows:].any()
        check_q8_1_product(got[:ncols_y * nrows].reshape(ncols_y, nrows), blocks, qtype, x, qy)


def run_mmq_wrapper_cols(device, qtype: str, blocks: np.ndarray, nrows: int, x: np.ndarray):
    """The wrappers' earlier MMQ kernel (benchmarks/quantized.py's ``mul_mat_cols``, which its probes
    compare with: MMQ_ROWS_A_BLOCK rows x MMQ_COLUMNS_A_BLOCK columns a block, the column groups along
    grid y) on exact-size weights: (got, q8_1 bytes)."""
    bench = tile_probe_module()
    ncols_y, ncols = x.shape
    assert ncols_y % bench.MMQ_COLUMNS_A_BLOCK == 0
    vy, qy = quantize_on(device, x)
    dst = device.zeros(ncols_y * nrows + 8, pk.f32)
    device.get_or_load_func(f"mul_mat_cols_{qtype}", bench.EARLIER_MMQ)[
        (-(-nrows // bench.MMQ_ROWS_A_BLOCK), ncols_y // bench.MMQ_COLUMNS_A_BLOCK), (32, bench.MMQ_BLOCK_Y)](
        device.to_device(blocks.reshape(-1)), vy, dst, ncols, nrows, qy.shape[1] // 36 * 32, nrows)
    got = dst.to_host()
    assert not got[ncols_y * nrows:].any()  # outputs outside the matrix are not written
    return got[:ncols_y * nrows].reshape(ncols_y, nrows), qy


@pytest.mark.parametrize("qtype", MATMUL)
@pytest.mark.parametrize("ncols_y", [8, 16])
def test_mmq_wrapper_cols(wave_device, qtype, ncols_y):
    """Odd row counts (the last block's rows part past the matrix); q4_0 also with rows of 136 chunks,
    more than the block's 64 threads take in one step."""
    rng = np.random.default_rng(ncols_y + 1)
    shapes = [shape_for(qtype)] + ([(5, 4352)] if qtype == "q4_0" else [])
    for nrows, ncols in shapes:
        blocks = weights(rng, qtype, nrows, ncols)
        x = activations(rng, ncols_y, ncols)
        got, qy = run_mmq_wrapper_cols(wave_device, qtype, blocks, nrows, x)
        check_q8_1_product(got, blocks, qtype, x, qy)


@functools.cache
def tile_probe_module():
    """benchmarks/quantized.py's probe kernels (their GPU figures are in docs/targets/cuda.md: they
    stand only if the kernels are right), loaded from the file once."""
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "quantized.py"
    spec = importlib.util.spec_from_file_location("bench_quantized_tile_probe", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_tile_probe(device, qtype: str, blocks: np.ndarray, nrows: int, x: np.ndarray):
    bench = tile_probe_module()
    ncols_y, ncols = x.shape
    vy, qy = quantize_on(device, x)
    dst = device.zeros(ncols_y * nrows + 8, pk.f32)
    device.get_or_load_func(f"mmq_tile_probe_{qtype}", bench.TILE_PROBES)[
        (-(-nrows // bench.TILE_ROWS), -(-ncols_y // bench.TILE_COLS)), (32, 8)](
        device.to_device(blocks.reshape(-1)), vy, dst, ncols, nrows, ncols_y, qy.shape[1] // 36 * 32, nrows)
    got = dst.to_host()
    assert not got[ncols_y * nrows:].any()  # outputs outside the matrix are not written
    return got[:ncols_y * nrows].reshape(ncols_y, nrows), qy


@pytest.mark.parametrize("qtype", MATMUL)
def test_mmq_tile_probe(wave_device, qtype):
    """The benchmark's tiled MMQ probe: odd row counts, a last step of fewer chunks (legacy formats:
    11 chunks), a second tile of rows and of columns (37 x 40)."""
    rng = np.random.default_rng(14)
    for nrows, ncols, ncols_y in (shape_for(qtype) + (9,), (37, 512 if qtype.endswith("K") else 288, 40)):
        blocks = weights(rng, qtype, nrows, ncols)
        x = activations(rng, ncols_y, ncols)
        got, qy = run_tile_probe(wave_device, qtype, blocks, nrows, x)
        check_q8_1_product(got, blocks, qtype, x, qy)


@pytest.mark.parametrize("qtype", list(Q.MOE_NAMES))
@pytest.mark.parametrize("shared_input", [True, False])
def test_indexed_moe_forward(wave_device, qtype, shared_input):
    """grid (n, batch, topk), block (32, 4); each expert is n·k/qk blocks of its format (q8_0's own)."""
    rng = np.random.default_rng(11)
    n, k, batch, topk, experts = 5, 768, 3, 2, 4
    blocks = weights(rng, qtype, experts * n, k)
    ids = rng.integers(0, experts, (batch, topk)).astype(np.uint32)
    x = activations(rng, batch * (1 if shared_input else topk), k)
    vy, qy = quantize_on(wave_device, x)
    out = wave_device.zeros(batch * topk * n, pk.f32)
    tag = Q.MOE_NAMES[qtype]
    wave_device.get_or_load_func(f"indexed_moe_forward_{tag}_q8_1", QUANTIZED)[(n, batch, topk), (32, 4)](
        wave_device.to_device(padded(blocks)), vy, wave_device.to_device(ids), out, n, k, batch, topk,
        qy.shape[1] // 36 * 32, 1 if shared_input else topk)
    got = out.to_host().reshape(batch, topk, n)
    per_expert = blocks.reshape(experts, n, -1)
    for b in range(batch):
        for t in range(topk):
            row = b if shared_input else b * topk + t
            check_q8_1_product(got[b, t][None], per_expert[ids[b, t]], qtype, x[row:row + 1], qy[row:row + 1])


@pytest.mark.parametrize("qtype", MATMUL)
def test_dmmv(wave_device, qtype):
    """grid nrows, block 32: ``dst = W · y`` in f32. Each thread adds ``ncols / 32`` products in
    sequence, then five tree levels and the waves' sums: ``|dst − W·y| ≤ (ncols/32 + 16) · u · Σ|w·y|``."""
    rng = np.random.default_rng(3)
    nrows, ncols = shape_for(qtype)
    blocks = weights(rng, qtype, nrows, ncols)
    y = rng.standard_normal(ncols).astype(np.float32)
    dst = wave_device.zeros(nrows + 4, pk.f32)
    name = f"dequantize_mul_mat_vec_{qtype.lower()}" + ("" if qtype.endswith("K") else "_cuda")
    args = (wave_device.to_device(padded(blocks)), wave_device.to_device(y), dst, ncols) + \
        (() if qtype == "q5_K" else (nrows,))
    wave_device.get_or_load_func(name, QUANTIZED)[nrows, 32](*args)
    w = reference_dequantize(blocks, qtype).astype(np.float64)
    got = dst.to_host()
    assert not got[nrows:].any()
    bound = (ncols / 32 + 16) * U * (np.abs(w) @ np.abs(y.astype(np.float64)))
    assert np.all(np.abs(got[:nrows] - w @ y.astype(np.float64)) <= bound)


# ------------------------------------------------------------------------------------------------- Python API
from stdlib_kernels import quantized_api as qapi  # noqa: E402


def test_api_dequantize_and_names(wave_device):
    rng = np.random.default_rng(5)
    blocks = random_blocks(rng, "q4_K", 3, 512)
    want = reference_dequantize(blocks, "q4_K").reshape(3, 512)
    for spec in ("q4_K", "Q4_K", "q4_k", int(GT.Q4_K), GT.Q4_K):
        got = qapi.dequantize(wave_device.to_device(blocks.reshape(-1)), spec, (3, 512), device=wave_device)
        np.testing.assert_array_equal(got.to_host(), want)
    half = qapi.dequantize(blocks, "q4_K", (3, 512), pk.f16, device=wave_device)  # host bytes are copied
    np.testing.assert_array_equal(half.to_host(), want.astype(np.float16))
    assert qapi.GGUF_TYPES == ("q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "q8_K")


@pytest.mark.parametrize("qtype", TYPES)
def test_api_dequantize_every_format(span_device, qtype):
    """The wrappers' own launch (``dequantize_{q}_{d}``, DEQUANTIZE_WRAPPER_ELEMENTS a block): 16
    elements a thread (the 16-byte tiles where aligned) and fewer (a block that is mostly idle)."""
    rng = np.random.default_rng(9)
    for rows, cols in ((5, 4096), (1, 256)):
        blocks = random_blocks(rng, qtype, rows, cols)
        want = reference_dequantize(blocks, qtype).reshape(rows, cols)
        for dtype in (pk.f32, pk.f16):
            got = qapi.dequantize(span_device.to_device(blocks.reshape(-1)), qtype, (rows, cols), dtype,
                                  device=span_device)
            np.testing.assert_array_equal(got.to_host(), want.astype(dtype.np))


@pytest.mark.parametrize("qtype", ["q4_0", "q5_1", "q3_K", "q6_K"])
def test_api_get_rows_wide(span_device, qtype):
    """The wrappers' get_rows launch (a block of 256 a row): 4096-wide rows take the 16-byte tiles."""
    rng = np.random.default_rng(10)
    table = random_blocks(rng, qtype, 5, 4096)
    ids = np.array([4, 0, 2, 2], np.uint32)
    got = qapi.get_rows(span_device.to_device(table.reshape(-1)), qtype, (5, 4096), ids)
    np.testing.assert_array_equal(got.to_host(), reference_dequantize(table, qtype)[ids])


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("hidden", [4096, 4099])
def test_api_get_rows_float_wide(span_device, dtype, hidden):
    """The wrappers' launch of a float table (a block of 256 a row): 4096-wide rows take the 16-byte
    tiles; 4099 leaves a tail after them, and its rows are not 16-byte aligned (each element alone)."""
    rng = np.random.default_rng(11)
    dt = getattr(pk, dtype)
    table = rng.standard_normal((6, hidden)).astype(dt.np)
    ids = np.array([5, 0, 3, 3, 1], np.uint32)
    got = qapi.get_rows(span_device.to_device(table), dtype, (6, hidden), ids)
    np.testing.assert_array_equal(got.to_host(), table.astype(np.float32)[ids])


@pytest.mark.parametrize("batch", [1, 3, 8, 9, 16, 20])
def test_api_matmul_dispatch(wave_device, batch):
    """Up to 8 rows: q8_1 + MMVQ; more: q8_1 + MMQ (candle's dispatch); both within the bounds above."""
    rng = np.random.default_rng(batch)
    blocks = weights(rng, "q6_K", 5, 512)
    x = activations(rng, batch, 512)
    got = qapi.matmul(wave_device.to_device(blocks.reshape(-1)), "q6_K", wave_device.to_device(x))
    _, qy = quantize_on(wave_device, x)
    assert got.shape == (batch, 5)
    check_q8_1_product(got.to_host(), blocks, "q6_K", x, qy)


@pytest.mark.parametrize("qtype,batch,kernel", [
    ("q4_0", 16, "mul_mat_planar_q4_0"), ("q4_0", 17, "mul_mat_mma_q4_0_1x1x4"), ("q4_0", 33, "mul_mat_mma_q4_0_2x2x1"),
    ("q8_0", 64, "mul_mat_mma_q8_0_2x2x1"), ("q8_0", 65, "mul_mat_mma_q8_0_1x2x2"), ("q8_0", 97, "mul_mat_mma_q8_0_2x2x1"),
    ("q5_0", 40, "mul_mat_planar_q5_0"), ("q4_K", 16, "mul_mat_planar_q4_K"),
    ("q4_K", 17, "mul_mat_mma_q4_K_1x2x2"), ("q4_K", 130, "mul_mat_mma_q4_K_1x2x2"), ("q6_K", 32, "mul_mat_mma_q6_K_1x2x2"),
    ("q6_K", 33, "mul_mat_mma_q6_K_2x2x1"), ("q5_K", 40, "mul_mat_planar_q5_K")])
def test_api_matmul_mmq_dispatch(wave_device, monkeypatch, qtype, batch, kernel):
    """Above 8 rows: q4_0, q8_0, q4_K and q6_K from 17 rows on take mul_mat_mma (its tile by format and batch),
    the other formats and 9-16 rows the planar MMQ; within the bounds above (21 rows, 288 columns;
    the K formats 256)."""
    names = []
    real = wave_device.get_or_load_func
    monkeypatch.setattr(wave_device, "get_or_load_func",
                        lambda name, *a, **kw: names.append(name) or real(name, *a, **kw))
    rng = np.random.default_rng(batch)
    ncols = 288 if qtype in LEGACY else 256
    blocks = weights(rng, qtype, 21, ncols)
    x = activations(rng, batch, ncols)
    got = qapi.matmul(wave_device.to_device(blocks.reshape(-1)), qtype, wave_device.to_device(x))
    assert names[-1] == kernel
    _, qy = quantize_on(wave_device, x)
    check_q8_1_product(got.to_host(), blocks, qtype, x, qy)


@pytest.mark.parametrize("qtype", ["q4_0", "q4_K"])
def test_api_matmul_wide_rows(wave_device, qtype):
    """Batch 1 on rows longer than MMVQ_WIDE_COLUMNS: the wrappers' kernel under twice its block's
    threads (a thread a chunk and a thread a pair), odd row count, within the bounds above."""
    ncols = Q.MMVQ_WIDE_COLUMNS + 512
    bx, by = Q.MMVQ_WRAPPER_BLOCK[qtype]
    assert Q.mmvq_wrapper_block(qtype, ncols) == (bx, 2 * by)
    assert Q.mmvq_wrapper_block(qtype, Q.MMVQ_WIDE_COLUMNS) == (bx, by)
    rng = np.random.default_rng(23)
    blocks = weights(rng, qtype, 3, ncols)
    x = activations(rng, 1, ncols)
    got = qapi.matmul(wave_device.to_device(blocks.reshape(-1)), qtype, wave_device.to_device(x))
    _, qy = quantize_on(wave_device, x)
    check_q8_1_product(got.to_host(), blocks, qtype, x, qy)


def test_api_matmul_dmmv_and_batch_dims(wave_device):
    rng = np.random.default_rng(2)
    blocks = weights(rng, "q8_0", 6, 256)
    x = rng.standard_normal((1, 256)).astype(np.float32)
    w = reference_dequantize(blocks, "q8_0").astype(np.float64)
    got = qapi.matmul(blocks, "q8_0", wave_device.to_device(x), dmmv=True).to_host()
    bound = (256 / 32 + 16) * U * (np.abs(x.astype(np.float64)) @ np.abs(w).T)
    assert np.all(np.abs(got - x.astype(np.float64) @ w.T) <= bound)
    x3 = activations(rng, 6, 256).reshape(2, 3, 256)
    got3 = qapi.matmul(blocks, "q8_0", wave_device.to_device(x3))
    assert got3.shape == (2, 3, 6)
    _, qy = quantize_on(wave_device, x3.reshape(6, 256))
    check_q8_1_product(got3.to_host().reshape(6, 6), blocks, "q8_0", x3.reshape(6, 256), qy)


@pytest.mark.parametrize("dtype", [pk.f16, pk.bf16], ids=str)
def test_api_matmul_16_bit_activations(wave_device, dtype):
    """Converted to f32 (exactly), the f32 product rounded once to the input's dtype."""
    rng = np.random.default_rng(8)
    blocks = weights(rng, "q4_1", 4, 256)
    x = activations(rng, 2, 256).astype(dtype.np)
    got = qapi.matmul(blocks, "q4_1", wave_device.to_device(x))
    want = qapi.matmul(blocks, "q4_1", wave_device.to_device(x.astype(np.float32)))
    assert got.dtype is dtype
    np.testing.assert_array_equal(got.to_host(), want.to_host().astype(dtype.np))


def test_api_quantize_q8_1_in_chunks(wave_device):
    """Rows a launch limited (candle: 65535, the grid's y): the same bytes as one launch."""
    x = activations(np.random.default_rng(9), 7, 300)
    whole, k_padded = qapi.quantize_q8_1(wave_device.to_device(x))
    chunked, _ = qapi.quantize_q8_1(wave_device.to_device(x), max_rows=3)
    assert k_padded == 512
    np.testing.assert_array_equal(whole.to_host(), quantize_q8_1_reference(x, 512).reshape(-1))
    np.testing.assert_array_equal(chunked.to_host(), whole.to_host())


def test_api_get_rows_and_moe(wave_device):
    rng = np.random.default_rng(4)
    table = random_blocks(rng, "q5_0", 6, 256)
    got = qapi.get_rows(wave_device.to_device(table.reshape(-1)), "q5_0", (6, 256), [5, 1, 1])
    np.testing.assert_array_equal(got.to_host(), reference_dequantize(table, "q5_0")[[5, 1, 1]])
    floats = rng.standard_normal((4, 40)).astype(np.float16)
    got = qapi.get_rows(wave_device.to_device(floats), "f16", (4, 40), np.array([3, 0], np.uint32))
    np.testing.assert_array_equal(got.to_host(), floats[[3, 0]].astype(np.float32))
    blocks = weights(rng, "q3_K", 3 * 4, 256)
    x = activations(rng, 2, 256).reshape(2, 1, 256)
    ids = np.array([[2, 0], [1, 1]], np.uint32)
    out = qapi.moe_matmul(wave_device.to_device(blocks.reshape(-1)), "q3_K", (3, 4, 256), wave_device.to_device(x), ids)
    _, qy = quantize_on(wave_device, x.reshape(2, 256))
    for b in range(2):
        for t in range(2):
            check_q8_1_product(out.to_host()[b, t][None], blocks.reshape(3, 4, -1)[ids[b, t]], "q3_K", x[b], qy[b:b + 1])


def test_api_bad_input():
    dev = pk.device("cpu")
    blocks = np.zeros(2 * 18, np.uint8)  # two q4_0 blocks: one row of 64
    with pytest.raises(ValueError, match=r"unknown GGUF type 'q4_3'; the quantized kernels read q4_0, q4_1"):
        qapi.dequantize(blocks, "q4_3", (1, 64))
    with pytest.raises(ValueError, match=r"unknown GGUF type 99"):
        qapi.dequantize(blocks, 99, (1, 64))
    with pytest.raises(TypeError, match=r"a GGUF type is a name"):
        qapi.dequantize(blocks, 4.0, (1, 64))
    with pytest.raises(ValueError, match=r"q4_0 rows are 32-element blocks: a row of 48 elements"):
        qapi.dequantize(blocks, "q4_0", (1, 48))
    with pytest.raises(ValueError, match=r"q4_0 weights of shape \(2, 64\) take 72 bytes \(2 blocks of 18 bytes a "
                                         r"row\), got 36"):
        qapi.dequantize(blocks, "q4_0", (2, 64))
    with pytest.raises(ValueError, match=r"q4_K rows are 256-element blocks"):
        qapi.matmul(np.zeros(144, np.uint8), "q4_K", np.zeros((1, 64), np.float32))
    with pytest.raises(ValueError, match=r"weights of shape \(1, 64\) multiply activations of 64 columns, got "
                                         r"shape \(2, 32\)"):
        qapi.matmul(blocks, "q4_0", np.zeros((2, 32), np.float32), shape=(1, 64))
    with pytest.raises(ValueError, match=r"q4_0 weights of shape \(2, 64\) take 72 bytes"):
        qapi.matmul(blocks, "q4_0", np.zeros((2, 64), np.float32), shape=(2, 64))
    with pytest.raises(ValueError, match=r"whole number of rows, got 40 bytes"):
        qapi.matmul(np.zeros(40, np.uint8), "q4_0", np.zeros((1, 64), np.float32))
    with pytest.raises(TypeError, match=r"activations must be f32 .*got i32"):
        qapi.matmul(blocks, "q4_0", dev.to_device(np.zeros((1, 64), np.int32)))
    with pytest.raises(ValueError, match=r"no matmul kernels for q8_K"):
        qapi.matmul(np.zeros(292, np.uint8), "q8_K", np.zeros((1, 256), np.float32))
    with pytest.raises(ValueError, match=r"dmmv=True is candle's forced path for one activation row, got 2"):
        qapi.matmul(blocks, "q4_0", np.zeros((2, 64), np.float32), dmmv=True)
    with pytest.raises(ValueError, match=r"ids must be a 1-D array of row indices below 1"):
        qapi.get_rows(blocks, "q4_0", (1, 64), [1])
    with pytest.raises(ValueError, match=r"not q4_0"):
        qapi.moe_matmul(blocks, "q4_0", (1, 1, 64), np.zeros((1, 1, 64), np.float32), [[0]])
    with pytest.raises(ValueError, match=r"expert ids must be below 1"):
        qapi.moe_matmul(np.zeros(34 * 2, np.uint8), "q8_0", (1, 1, 64), np.zeros((1, 1, 64), np.float32), [[1]])


def test_read_gguf(tmp_path):
    from gguf import GGUFWriter
    rng = np.random.default_rng(6)
    w = rng.standard_normal((6, 128)).astype(np.float32)
    path = tmp_path / "t.gguf"
    writer = GGUFWriter(str(path), "llama")
    writer.add_tensor("w.q5_1", gguf_quantize(w, GT.Q5_1), raw_dtype=GT.Q5_1)
    writer.add_tensor("w.f32", w)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    t = qapi.read_gguf(path, "w.q5_1")
    assert (t.name, t.qtype, t.shape) == ("w.q5_1", "q5_1", (6, 128))
    np.testing.assert_array_equal(t.dequantize().to_host(), gguf_dequantize(gguf_quantize(w, GT.Q5_1), GT.Q5_1))
    f = qapi.read_gguf(path, "w.f32")
    assert f.qtype == "f32" and f.shape == (6, 128) and np.array_equal(f.data, w)
    with pytest.raises(KeyError, match="no tensor 'nope'; tensors: w.q5_1, w.f32"):
        qapi.read_gguf(path, "nope")


# ------------------------------------------------------------------------------------------------- bounds
@pytest.fixture(scope="module")
def checked():
    """A CPU device that checks every access against the launch's buffers (an access outside one is
    a LaunchError): buffers here are exactly the data's size, no padding."""
    return pk.device("cpu", check_bounds=True)


@pytest.mark.parametrize("qtype", ["q5_0", "q6_K"])
@pytest.mark.parametrize("width", Q.MMVQ_WIDTHS)
def test_mmvq_odd_rows_stay_in_bounds(checked, qtype, width):
    """candle's N >= 2 kernels read one row past the matrix and write one past dst when nrows is odd."""
    rng = np.random.default_rng(width)
    nrows, ncols = shape_for(qtype)
    blocks = weights(rng, qtype, nrows, ncols)
    x = activations(rng, width, ncols)
    vy, qy = quantize_on(checked, x)
    dst = checked.zeros(width * nrows, pk.f32)
    checked.get_or_load_func(f"mul_mat_vec_{qtype}_q8_1_cuda{width}", QUANTIZED)[
        -(-nrows // Q.mmvq_rows(width)), (32, 4 if width <= 4 else 2)](
        checked.to_device(blocks.reshape(-1)), vy, dst, ncols, nrows, qy.shape[1] // 36 * 32, nrows)
    check_q8_1_product(dst.to_host().reshape(width, nrows), blocks, qtype, x, qy)


@pytest.mark.parametrize("qtype", MATMUL)
def test_mmvq_wrapper_rows_stay_in_bounds(checked, qtype):
    """Whole-word reads of 2-byte aligned blocks (``span_words``) never leave the weights, and
    neither does the last block of rows."""
    rng = np.random.default_rng(12)
    nrows, ncols = shape_for(qtype)
    blocks = weights(rng, qtype, nrows, ncols)
    x = activations(rng, 1, ncols)
    got, qy = run_mmvq_wrapper_rows(checked, qtype, blocks, nrows, x)
    check_q8_1_product(got, blocks, qtype, x, qy)


@pytest.mark.parametrize("qtype", ["q4_0", "q8_0", "q5_K", "q6_K"])
def test_mmvq_weights_first_stays_in_bounds(checked, qtype):
    """The weights loaded ahead of the activations (``early``) stay inside exact-size weights."""
    check_batch1_in_bounds(checked, qtype, EARLY_KERNELS, f"early_{qtype}_2", rows=2, seed=19)


def check_batch1_in_bounds(checked, qtype: str, module, name: str, rows: int, seed: int) -> None:
    """Kernel ``name`` of ``module`` (a batch-1 MMVQ of ``rows`` rows a block, blocks of (32, 2)) on the
    bounds-checked device, over weights of exactly their size: no access outside, §6.5's bound."""
    rng = np.random.default_rng(seed)
    nrows, ncols = shape_for(qtype)
    blocks = weights(rng, qtype, nrows, ncols)
    x = activations(rng, 1, ncols)
    vy, qy = quantize_on(checked, x)
    dst = checked.zeros(nrows, pk.f32)
    checked.get_or_load_func(name, module)[-(-nrows // rows), (32, 2)](
        checked.to_device(blocks.reshape(-1)), vy, dst, ncols, nrows, qy.shape[1] // 36 * 32, nrows)
    check_q8_1_product(dst.to_host().reshape(1, nrows), blocks, qtype, x, qy)


@pytest.mark.parametrize("qtype", PAIR_TYPES)
def test_mmvq_pairs_stay_in_bounds(checked, qtype):
    """The pair loaders' whole-word reads (q6_K's ``span_words`` of a 2-byte aligned block) stay
    inside exact-size weights."""
    check_batch1_in_bounds(checked, qtype, PAIR_KERNELS, f"pairs_{qtype}_4", rows=4, seed=17)


@pytest.mark.parametrize("qtype", MATMUL)
def test_mmvq_warps_stay_in_bounds(checked, warps_kernels, qtype):
    """``mul_mat_vec_warps``' loads (the held q8_1 units, the last unit re-read past a row's end, the
    last row re-read past the matrix) stay inside exact-size weights and activations."""
    bench, kernels = warps_kernels
    rng = np.random.default_rng(22)
    for nrows, ncols in (shape_for(qtype), (3, 4608)):
        blocks = weights(rng, qtype, nrows, ncols)
        x = activations(rng, 1, ncols)
        vy, qy = quantize_on(checked, x)
        dst = checked.zeros(nrows, pk.f32)
        checked.get_or_load_func(f"warps_{qtype}_2_{bench.WARPS_UNROLL[qtype]}", kernels)[2, (32, 2)](
            checked.to_device(blocks.reshape(-1)), vy, dst, ncols, nrows, qy.shape[1] // 36 * 32, nrows)
        check_q8_1_product(dst.to_host().reshape(1, nrows), blocks, qtype, x, qy)


@pytest.mark.parametrize("qtype", ["q5_0", "q6_K", "q4_K"])
def test_mmq_planar_stays_in_bounds(checked, qtype):
    """Exact-size weights, planes (whole groups of columns, as the API pads them) and dst: the last
    group of rows re-reads the last row, never past; columns past the matrix are never written."""
    rng = np.random.default_rng(19)
    nrows, ncols = shape_for(qtype)
    blocks = weights(rng, qtype, nrows, ncols)
    x = activations(rng, 11, ncols)
    vp, kx_padded = qapi.quantize_q8_1_planar(checked.to_device(x), pad_rows=Q.MMQ_PLANAR_COLUMNS)
    dst = checked.zeros((11, nrows), pk.f32)
    checked.get_or_load_func(f"mul_mat_planar_{qtype}", QUANTIZED)[
        (-(-nrows // Q.MMQ_PLANAR_ROWS), 2), (32, Q.MMQ_PLANAR_BLOCK_Y)](
        checked.to_device(blocks.reshape(-1)), vp, dst, ncols, nrows, 11, kx_padded, nrows)
    check_q8_1_product(dst.to_host(), blocks, qtype, x, planar_to_q8_1(vp.to_host(), 11, kx_padded))


@pytest.mark.parametrize("qtype", ["q5_0", "q3_K", "q4_K"])
def test_mmq_wrapper_cols_stay_in_bounds(checked, qtype):
    rng = np.random.default_rng(13)
    nrows, ncols = shape_for(qtype)
    blocks = weights(rng, qtype, nrows, ncols)
    x = activations(rng, 16, ncols)
    got, qy = run_mmq_wrapper_cols(checked, qtype, blocks, nrows, x)
    check_q8_1_product(got, blocks, qtype, x, qy)


@pytest.mark.parametrize("qtype", ["q4_0", "q6_K"])
def test_mmq_tile_probe_stays_in_bounds(checked, qtype):
    rng = np.random.default_rng(15)
    nrows, ncols = shape_for(qtype)
    blocks = weights(rng, qtype, nrows, ncols)
    x = activations(rng, 33, ncols)
    got, qy = run_tile_probe(checked, qtype, blocks, nrows, x)
    check_q8_1_product(got, blocks, qtype, x, qy)


def test_other_groups_stay_in_bounds(checked):
    """Every other group under candle's launch with exact-size buffers (one format each)."""
    rng = np.random.default_rng(0)
    blocks = weights(rng, "q4_K", 3, 512)
    w = checked.to_device(blocks.reshape(-1))
    y = checked.zeros(3 * 512, pk.f32)
    checked.get_or_load_func("dequantize_block_q4_K_f32", QUANTIZED)[6, 32](w, y)
    np.testing.assert_array_equal(y.to_host(), reference_dequantize(blocks, "q4_K").reshape(-1))
    legacy = random_blocks(rng, "q5_1", 3, 96)                 # 288 elements: the last CUDA block half full
    y = checked.zeros(288, pk.f16)
    checked.get_or_load_func("dequantize_block_q5_1_f16", QUANTIZED)[1, 256](checked.to_device(legacy.reshape(-1)), y,
                                                                              288)
    np.testing.assert_array_equal(y.to_host(), reference_dequantize(legacy, "q5_1").reshape(-1).astype(np.float16))
    x = activations(rng, 9, 512)
    vy, qy = quantize_on(checked, x)
    out = checked.zeros((9, 3), pk.f32)
    checked.get_or_load_func("mul_mat_q4_K", QUANTIZED)[(1, 1), (32, 4)](w, vy, out, 512, 3, 9, 512, 3)
    check_q8_1_product(out.to_host(), blocks, "q4_K", x, qy)
    dst = checked.zeros(3, pk.f32)
    checked.get_or_load_func("dequantize_mul_mat_vec_q4_k", QUANTIZED)[3, 32](w, checked.to_device(x[0]), dst, 512, 3)
    assert np.all(np.abs(dst.to_host() - reference_dequantize(blocks, "q4_K").astype(np.float64) @ x[0])
                  <= (512 / 32 + 16) * U * (np.abs(reference_dequantize(blocks, "q4_K")) @ np.abs(x[0])))
    rows = checked.zeros((2, 512), pk.f32)
    checked.get_or_load_func("get_rows_q4_K", QUANTIZED)[(2, 2), 32](
        w, checked.to_device(np.array([2, 0], np.uint32)), rows, 512, 288)
    np.testing.assert_array_equal(rows.to_host(), reference_dequantize(blocks, "q4_K")[[2, 0]])
    moe = checked.zeros(1 * 1 * 3, pk.f32)
    checked.get_or_load_func("indexed_moe_forward_q4k_q8_1", QUANTIZED)[(3, 1, 1), (32, 4)](
        w, vy, checked.to_device(np.array([0], np.uint32)), moe, 3, 512, 1, 1, 512, 1)
    check_q8_1_product(moe.to_host()[None], blocks, "q4_K", x[:1], qy[:1])


@pytest.mark.parametrize("qtype,dtype", [("q4_0", pk.f32), ("q6_K", pk.f16), ("q5_1", pk.f16), ("q3_K", pk.f32),
                                         ("q3_K", pk.f16)], ids=str)
def test_dequantize_tiles_stay_in_bounds(qtype, dtype):
    """The dequantizers' 16-byte tiles (the GPU's path) with exact-size buffers: the whole tiles, the
    elements after them, and get_rows' rows, every access inside the data."""
    dev = pk.device("cpu", check_bounds=True, tile_bytes=16)
    rng = np.random.default_rng(3)
    q = Q.QTYPES[qtype]
    cols = 288 if q.qk == 32 else 512          # q5_1: the last CUDA block half full
    blocks = random_blocks(rng, qtype, 3, cols)
    want = reference_dequantize(blocks, qtype)
    el = 3 * cols
    per, threads, unit = Q.DEQUANTIZE_LAUNCH[qtype]
    y = dev.zeros(el, dtype)
    dev.get_or_load_func(f"dequantize_block_{qtype}_{dtype}", QUANTIZED)[-(-el // per), threads](
        dev.to_device(blocks.reshape(-1)), y, *(() if unit is None else (el // unit,)))
    np.testing.assert_array_equal(y.to_host(), want.reshape(-1).astype(dtype.np))
    if qtype in MATMUL:
        rows = dev.zeros((2, cols), pk.f32)
        block, grid_y = (256, -(-cols // 512)) if q.qk == 32 else (64, cols // 256)
        dev.get_or_load_func(f"get_rows_{qtype}", QUANTIZED)[(2, grid_y), block](
            dev.to_device(blocks.reshape(-1)), dev.to_device(np.array([2, 0], np.uint32)), rows, cols,
            cols // q.qk * q.nbytes)
        np.testing.assert_array_equal(rows.to_host(), want[[2, 0]])


# ------------------------------------------------------------------------------------------------- GPU code
@pytest.mark.parametrize("arch", ["sm_90", "gfx90a", "gfx1100"])
def test_gpu_code_uses_dot_instructions(arch):
    """MMVQ's integer dots are the arch's dot instruction (docs/language.md's table), without spills."""
    from pykern.compiler import compile_kernels, lower_module
    from pykern.targets.codeobject import CodeObject
    from pykern.targets.registry import make_target
    kernels = [QUANTIZED.get("mul_mat_vec_q4_K_q8_1_cuda1"), QUANTIZED.get("mul_mat_q5_0")]
    if arch.startswith("sm_"):
        ptx = compile_kernels(kernels, make_target("cuda", arch), "dots")[0].decode()
        assert ptx.count("dp4a.s32.s32") >= 16 and ".local" not in ptx
        return
    from pykern.targets.linker import find_lld
    try:
        find_lld()
    except Exception:
        pytest.skip("no ld.lld here to link AMDGPU code objects (pip install ziglang)")
    target = make_target("amdgpu", arch)
    hsaco = compile_kernels(kernels, target, "dots")[0]
    asm = target.assembly(lower_module(kernels, target, "dots")[0])
    assert len([ln for ln in asm.splitlines() if "v_dot4" in ln]) >= 16
    for k in CodeObject(hsaco).kernels.values():
        assert (k.scratch, k.vgpr_spill_count, k.sgpr_spill_count) == (0, 0, 0)
