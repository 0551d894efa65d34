"""GGUF-quantized tensors through candle's QUANTIZED kernels: the host-side API.

Weights are ggml block bytes (a row is ``cols / qk`` blocks, rows concatenated, as in a ``.gguf``
file and candle's storage); a format is named as in GGUF and candle (``"q4_0"``, ``"q4_K"``, …;
case-insensitive), by ggml type id, or by a ``gguf.GGMLQuantizationType``.

* ``dequantize(blocks, qtype, shape, dtype)``: f32/f16 values (``dequantize_block_*``).
* ``matmul(blocks, qtype, x)``: ``x @ W.T`` the way candle's CUDA backend dispatches: activations
  quantized to q8_1, then MMVQ for up to 8 activation rows and MMQ above; ``dmmv=True`` for one
  row takes candle's forced DMMV path (f32 activations).
* ``get_rows(table, qtype, shape, ids)``: embedding rows (``get_rows_*``; f32/f16/bf16 tables too).
* ``moe_matmul(blocks, qtype, shape, x, ids)``: ``indexed_moe_forward_*``.
* ``read_gguf(path, name)``: one tensor of a ``.gguf`` file (through ``gguf.GGUFReader``).

Bad input (unknown format, a row length that is not a whole number of blocks, a buffer whose size
does not match the shape) raises ``ValueError``/``TypeError`` naming what was expected.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

import pykern as pk
from pykern.runtime.base import DeviceArray

from . import QUANTIZED
from ._common import as_device_array
from .cast import to as cast_to
from .quantized import (DEQUANTIZE_WRAPPER_BLOCK, DEQUANTIZE_WRAPPER_ELEMENTS, FLOAT_ROWS, MATMUL_TYPES,
                        MMQ_MMA_MIN_BATCH, MMQ_MMA_TYPES, MMQ_MMA_WAVES, MMQ_PLANAR_BLOCK_Y, MMQ_PLANAR_COLUMNS,
                        MMQ_PLANAR_ROWS, MMVQ_WIDTHS, mmq_mma_name, mmq_mma_tile,
                        MMVQ_WRAPPER_ROWS, PLANAR_BYTES,
                        MOE_NAMES, Q8_1_BYTES, Q8_1_QK, QTYPES, ROW_PADDING, QType, mmvq_rows, mmvq_wrapper_block)

#: GGUF's names of the formats the kernels read
GGUF_TYPES = tuple(QTYPES)
_BY_LOWER = {name.lower(): q for name, q in QTYPES.items()}
_BY_ID = {q.ggml_type: q for q in QTYPES.values()}
_FLOAT_BY_NAME = {t.tag: t for t in FLOAT_ROWS}
#: candle chunks quantize_q8_1's rows to the grid's y limit
MAX_GRID_Y = 65535


def qtype(spec) -> QType:
    """The format named by ``spec``: a GGUF name (``"q4_K"``, any case), a ggml type id, or a
    ``gguf.GGMLQuantizationType``."""
    if isinstance(spec, QType):
        return spec
    if isinstance(spec, str):
        found = _BY_LOWER.get(spec.lower())
    elif isinstance(spec, (int, np.integer)):  # GGMLQuantizationType is an IntEnum
        found = _BY_ID.get(int(spec))
    else:
        raise TypeError(f"a GGUF type is a name ({', '.join(GGUF_TYPES)}) or a ggml type id, not "
                        f"{type(spec).__name__}")
    if found is None:
        raise ValueError(f"unknown GGUF type {spec!r}; the quantized kernels read {', '.join(GGUF_TYPES)}")
    return found


def row_bytes(q: QType, cols: int) -> int:
    """Bytes of one row of ``cols`` elements; ``cols`` must be a whole number of blocks."""
    if cols <= 0 or cols % q.qk:
        raise ValueError(f"{q.name} rows are {q.qk}-element blocks: a row of {cols} elements is not a "
                         f"positive multiple of {q.qk}")
    return cols // q.qk * q.nbytes


def _weights(blocks, q: QType, shape: tuple[int, ...], device=None) -> DeviceArray:
    """``blocks`` as device bytes, checked against ``shape`` (rows of ``shape[-1]`` elements)."""
    shape = tuple(int(s) for s in shape)
    if not shape or any(s < 0 for s in shape):
        raise ValueError(f"shape must be a non-empty tuple of sizes, got {shape!r}")
    want = math.prod(shape[:-1]) * row_bytes(q, shape[-1])
    if isinstance(blocks, (bytes, bytearray, memoryview)):
        blocks = np.frombuffer(blocks, np.uint8)
    data = as_device_array(blocks if isinstance(blocks, DeviceArray) else np.ascontiguousarray(blocks).view(np.uint8)
                           .reshape(-1), device)
    if data.dtype is not pk.u8 or not data.is_contiguous:
        raise TypeError(f"{q.name} blocks must be contiguous bytes (u8), got {data.dtype}")
    if data.size != want:
        raise ValueError(f"{q.name} weights of shape {shape} take {want} bytes ({shape[-1] // q.qk} blocks of "
                         f"{q.nbytes} bytes a row), got {data.size}")
    return data.reshape((data.size,))


def dequantize(blocks, qtype_spec, shape, dtype=pk.f32, device=None) -> DeviceArray:
    """The values of quantized ``blocks`` of ``shape``, as ``dtype`` (f32 or f16), bit-exact with
    gguf's dequantizer: ``dequantize_{q}_{dtype}``, the elements of candle's ``dequantize_block_*``
    under a launch of fewer, larger blocks (quantized.DEQUANTIZE_WRAPPER_ELEMENTS)."""
    q = qtype(qtype_spec)
    if dtype not in (pk.f32, pk.f16):
        raise TypeError(f"dequantize writes f32 or f16, not {dtype}")
    data = _weights(blocks, q, shape, device)
    shape = tuple(int(s) for s in shape)
    out = data.device.empty(shape, dtype)
    el = math.prod(shape)
    if el:
        fn = data.device.get_or_load_func(f"dequantize_{q.name}_{dtype}", QUANTIZED)
        fn[-(-el // DEQUANTIZE_WRAPPER_ELEMENTS), DEQUANTIZE_WRAPPER_BLOCK](data, out, el)
    return out


def _activations(x, k: int, device) -> DeviceArray:
    x = as_device_array(x, device)
    if x.dtype is not pk.f32:
        raise TypeError(f"the activations must be f32 (candle's PTX path quantizes f32; matmul converts f16 and "
                        f"bf16), got {x.dtype}")
    if x.ndim == 0 or x.shape[-1] != k:
        raise ValueError(f"the activations' last dimension must be the weights' {k} columns, got shape {x.shape}")
    return x if x.is_contiguous else x.device.to_device(x.to_host())


def quantize_q8_1(x, max_rows: int = MAX_GRID_Y) -> tuple[DeviceArray, int]:
    """f32 rows ``x`` (…, k) as q8_1 blocks, rows padded to ``k_padded`` (a multiple of 512) with
    zeros: (bytes, k_padded). Rows go ``max_rows`` a launch, as candle's grid-y limit makes it."""
    return _quantize_rows(x, "quantize_q8_1", Q8_1_BYTES, max_rows, 1)


def quantize_q8_1_planar(x, max_rows: int = MAX_GRID_Y, pad_rows: int = 1) -> tuple[DeviceArray, int]:
    """f32 rows ``x`` (…, k) as planar q8_1 (``quantized.quantize_q8_1_planar``: quantize_q8_1's
    quants and scales, in planes of PLANAR_GROUP chunks, with each 16 quants' sum), rows padded to
    ``k_padded`` with zeros and their count to a multiple of ``pad_rows`` with zero rows (the MMQ
    reads whole groups of MMQ_PLANAR_COLUMNS): (bytes, k_padded). The activations of the wrappers' MMQ."""
    return _quantize_rows(x, "quantize_q8_1_planar", PLANAR_BYTES, max_rows, pad_rows)


def _quantize_rows(x, kernel: str, chunk_bytes: int, max_rows: int, pad_rows: int) -> tuple[DeviceArray, int]:
    """Both quantizers' launch: ``chunk_bytes`` of output a 32-element chunk, zeroed rows up to a
    multiple of ``pad_rows``, ``max_rows`` rows a launch (grid y)."""
    x = as_device_array(x)
    if x.dtype is not pk.f32 or x.ndim == 0:
        raise TypeError(f"{kernel} takes f32 rows, got {x.dtype} of shape {x.shape}")
    x = x if x.is_contiguous else x.device.to_device(x.to_host())
    k = x.shape[-1]
    rows = x.size // k if k else 0
    k_padded = -(-k // ROW_PADDING) * ROW_PADDING
    row_out = k_padded // Q8_1_QK * chunk_bytes
    out = x.device.zeros(-(-rows // pad_rows) * pad_rows * row_out, pk.u8)
    fn = x.device.get_or_load_func(kernel, QUANTIZED)
    for first in range(0, rows, max_rows):
        n = min(max_rows, rows - first)
        fn[(k_padded // 256, n), 256](x.offset_view(first * k, (n * k,)), out.offset_view(first * row_out, (n * row_out,)),
                                      k, k_padded)
    return out, k_padded


def matmul(blocks, qtype_spec, x, *, shape=None, dmmv: bool = False) -> DeviceArray:
    """``x @ W.T`` (shape ``x.shape[:-1] + (n,)``) for quantized weights W of ``n`` rows of
    ``x.shape[-1]`` elements (n from the buffer's size; ``shape=(n, k)`` checks W's shape against
    the buffer and ``x`` instead of inferring it). Up to 8 activation rows take q8_1 + MMVQ,
    more take q8_1 + MMQ (candle's dispatch): q4_0, q8_0, q4_K and q6_K above 16 rows the matrix
    units' ``mul_mat_mma_{q}`` (faster there than the planar MMQ, docs/targets/cuda.md), the rest the
    planar MMQ; ``dmmv=True`` with one row takes DMMV. f16 and bf16
    activations are converted to f32 and the result back to their dtype (candle's fast paths: the
    output in the input's dtype); f32 gives f32."""
    q = qtype(qtype_spec)
    if q not in MATMUL_TYPES:
        raise ValueError(f"candle has no matmul kernels for {q.name}; formats: "
                         f"{', '.join(t.name for t in MATMUL_TYPES)}")
    x = as_device_array(x)
    if x.dtype in (pk.f16, pk.bf16):
        return cast_to(matmul(blocks, q, cast_to(x, pk.f32), shape=shape, dmmv=dmmv), x.dtype)
    k = x.shape[-1] if x.ndim else 0
    if shape is not None:
        n, k_w = (int(v) for v in shape)
        _weights(blocks, q, (n, k_w), x.device)
        if k_w != k:
            raise ValueError(f"weights of shape {(n, k_w)} multiply activations of {k_w} columns, got shape {x.shape}")
    per_row = row_bytes(q, k)
    size = blocks.size if isinstance(blocks, DeviceArray) else np.asarray(blocks).nbytes
    if size % per_row:
        raise ValueError(f"{q.name} weights with rows of {k} elements ({per_row} bytes) must be a whole number "
                         f"of rows, got {size} bytes")
    n = size // per_row
    w = _weights(blocks, q, (n, k), x.device)
    x = _activations(x, k, x.device)
    batch = x.size // k
    dev = x.device
    out = dev.zeros(x.shape[:-1] + (n,), pk.f32)
    if batch == 0 or n == 0:
        return out
    if dmmv:
        if batch != 1:
            raise ValueError(f"dmmv=True is candle's forced path for one activation row, got {batch} rows")
        name = f"dequantize_mul_mat_vec_{q.name.lower()}" + ("" if q.qk == 256 else "_cuda")
        args = (w, x, out, k) + (() if q.name == "q5_K" else (n,))
        dev.get_or_load_func(name, QUANTIZED)[n, max(32, dev.target.wave_size)](*args)  # a whole wave a row
        return out
    if batch <= max(MMVQ_WIDTHS):
        vy, k_padded = quantize_q8_1(x)
    # the MMVQ's start overlaps the quantize's end (programmatic dependent launch, CUDA sm_90+: the
    # kernel waits for the q8_1 in pk.grid_dependency_wait); other runtimes launch it as before
    if batch == 1:  # candle's kernel with more rows a block (quantized.MMVQ_WRAPPER_ROWS)
        fn = dev.get_or_load_func(f"mul_mat_vec_rows_{q.name}_q8_1", QUANTIZED)
        fn.launch(-(-n // MMVQ_WRAPPER_ROWS[q.name]), mmvq_wrapper_block(q.name, k), w, vy, out, k, n, k_padded, n,
                  programmatic=True)
    elif batch <= max(MMVQ_WIDTHS):
        rows = mmvq_rows(batch)
        fn = dev.get_or_load_func(f"mul_mat_vec_{q.name}_q8_1_cuda{batch}", QUANTIZED)
        fn.launch(-(-n // rows), (32, 4 if batch <= 4 else 2), w, vy, out, k, n, k_padded, n, programmatic=True)
    elif (q.name in MMQ_MMA_TYPES and batch >= MMQ_MMA_MIN_BATCH
          and max(w.size, batch * n, batch * (k + ROW_PADDING) // Q8_1_QK * Q8_1_BYTES) < 2**31):
        # the matrix units' MMQ (i32 offsets: under 2 GiB of weights, activations and outputs)
        vy, k_padded = quantize_q8_1(x)
        wr, wc, _ = mmq_mma_tile(q.name, batch)
        fn = dev.get_or_load_func(mmq_mma_name(q.name, batch), QUANTIZED)
        fn[(-(-n // (16 * wr)), -(-batch // (16 * wc))), MMQ_MMA_WAVES * dev.target.wave_size](
            w, vy, out, k, n, batch, k_padded, n)
    else:  # the wrappers' MMQ: planar q8_1, MMQ_PLANAR_COLUMNS columns a block along grid y
        vp, k_padded = quantize_q8_1_planar(x, pad_rows=MMQ_PLANAR_COLUMNS)
        fn = dev.get_or_load_func(f"mul_mat_planar_{q.name}", QUANTIZED)
        fn[(-(-n // MMQ_PLANAR_ROWS), -(-batch // MMQ_PLANAR_COLUMNS)), (32, MMQ_PLANAR_BLOCK_Y)](
            w, vp, out, k, n, batch, k_padded, n)
    return out


def get_rows(table, qtype_spec, shape, ids) -> DeviceArray:
    """Rows ``ids`` (u32) of a (rows, hidden) table, dequantized to f32 (``get_rows_*``): quantized
    blocks, or an f32/f16/bf16 array (``qtype_spec`` its dtype name)."""
    rows, hidden = (int(s) for s in shape)
    spec = qtype_spec.tag if isinstance(qtype_spec, pk.DType) else qtype_spec
    if isinstance(spec, str) and spec.lower() in _FLOAT_BY_NAME:
        dt = _FLOAT_BY_NAME[spec.lower()]
        data = as_device_array(table)
        if data.dtype is not dt or data.size != rows * hidden or not data.is_contiguous:
            raise ValueError(f"a {dt} table of shape {(rows, hidden)} must be a contiguous {dt} array of "
                             f"{rows * hidden} elements, got {data.dtype} of shape {data.shape}")
        # a block of 256 a row, as for the quantized tables (candle's: one element a thread)
        name, stride, block, grid_y = f"get_rows_{dt}", hidden * dt.nbytes, 256, 1
    else:
        q = qtype(spec)
        if q not in MATMUL_TYPES:
            raise ValueError(f"candle has no get_rows kernel for {q.name}")
        data = _weights(table, q, (rows, hidden))
        # one block of 256 threads a row (candle's: up to 16 blocks of 32 to 256 threads a row, which
        # for a 4096-wide table is 131,072 blocks for 8192 ids: block starts bound it)
        name, stride, block, grid_y = f"get_rows_{q.name}", row_bytes(q, hidden), 256, 1
    ids_host = np.asarray(ids.to_host() if isinstance(ids, DeviceArray) else ids)
    if ids_host.ndim != 1 or (ids_host.size and (ids_host.min() < 0 or ids_host.max() >= rows)):
        raise ValueError(f"ids must be a 1-D array of row indices below {rows}, got {ids_host!r}")
    dev = data.device
    out = dev.zeros((ids_host.size, hidden), pk.f32)
    if ids_host.size and hidden:
        dev.get_or_load_func(name, QUANTIZED)[(ids_host.size, min(grid_y, MAX_GRID_Y)), block](
            data, dev.to_device(ids_host.astype(np.uint32)), out, hidden, stride)
    return out


def moe_matmul(blocks, qtype_spec, shape, x, ids) -> DeviceArray:
    """Mixture-of-experts rows: ``out[b, t] = W[ids[b, t]] @ x[b, t or 0]`` for weights of shape
    (experts, n, k), activations (batch, topk or 1, k) and expert ids (batch, topk); (batch, topk, n) f32."""
    q = qtype(qtype_spec)
    if q.name not in MOE_NAMES:
        raise ValueError(f"candle has indexed_moe_forward kernels for {', '.join(MOE_NAMES)}, not {q.name}")
    experts, n, k = (int(s) for s in shape)
    w = _weights(blocks, q, (experts, n, k))
    dev = w.device
    x = _activations(x, k, dev)
    ids_host = np.asarray(ids.to_host() if isinstance(ids, DeviceArray) else ids)
    if x.ndim != 3 or ids_host.ndim != 2 or ids_host.shape[0] != x.shape[0] or x.shape[1] not in (1, ids_host.shape[1]):
        raise ValueError(f"moe_matmul takes x of shape (batch, topk or 1, {k}) and ids of shape (batch, topk), got "
                         f"{x.shape} and {ids_host.shape}")
    if ids_host.size and (ids_host.min() < 0 or ids_host.max() >= experts):
        raise ValueError(f"expert ids must be below {experts}, got {ids_host.min()}..{ids_host.max()}")
    batch, topk = ids_host.shape
    out = dev.zeros((batch, topk, n), pk.f32)
    if out.size == 0:
        return out
    vy, k_padded = quantize_q8_1(x)
    dev.get_or_load_func(f"indexed_moe_forward_{MOE_NAMES[q.name]}_q8_1", QUANTIZED)[(n, batch, topk), (32, 4)](
        w, vy, dev.to_device(ids_host.astype(np.uint32)), out, n, k, batch, topk, k_padded, x.shape[1])
    return out


@dataclass(frozen=True)
class GGUFTensor:
    """One tensor of a ``.gguf`` file: its format (a GGUF name, or f32/f16/bf16), its shape in
    candle's (row-major) order, and its raw bytes (ggml blocks for a quantized format)."""

    name: str
    qtype: str
    shape: tuple[int, ...]
    data: np.ndarray

    def dequantize(self, dtype=pk.f32, device=None) -> DeviceArray:
        return dequantize(self.data, self.qtype, self.shape, dtype, device)

    def matmul(self, x, **kw) -> DeviceArray:
        return matmul(self.data, self.qtype, x, shape=self.shape, **kw)


def read_gguf(path, name: str) -> GGUFTensor:
    """Tensor ``name`` of the GGUF file at ``path`` (needs the ``gguf`` package). GGUF lists
    dimensions fastest first; the shape here is reversed, as candle does when it loads one."""
    from gguf import GGUFReader  # an optional dependency: only this function needs it
    reader = GGUFReader(path)
    for t in reader.tensors:
        if t.name == name:
            break
    else:
        raise KeyError(f"{path} has no tensor {name!r}; tensors: {', '.join(t.name for t in reader.tensors)}")
    shape = tuple(int(s) for s in reversed(t.shape))
    kind = t.tensor_type.name.lower()
    if kind in _FLOAT_BY_NAME:
        data = np.asarray(t.data).view(_FLOAT_BY_NAME[kind].np).reshape(shape)
        return GGUFTensor(name, kind, shape, data)
    q = _BY_ID.get(int(t.tensor_type))
    if q is None:
        raise ValueError(f"tensor {name!r} is {t.tensor_type.name}, which the quantized kernels do not read "
                         f"(they read {', '.join(GGUF_TYPES)})")
    return GGUFTensor(name, q.name, shape, np.ascontiguousarray(t.data).view(np.uint8).reshape(-1))


__all__ = ["GGUF_TYPES", "GGUFTensor", "qtype", "row_bytes", "dequantize", "quantize_q8_1", "quantize_q8_1_planar",
           "matmul", "get_rows",
           "moe_matmul", "read_gguf"]
