"""A GGUF-quantized mat-vec: write a small .gguf with gguf's writer, read a tensor back and multiply it
on the CPU target with candle's kernels (q8_1 activations + MMVQ), checked against NumPy.

Run: python examples/gguf_matvec.py   (needs the gguf package: pip install gguf)
"""
import os
import tempfile

import numpy as np
from gguf import GGMLQuantizationType, GGUFWriter
from gguf.quants import dequantize, quantize

import pykern as pk
from stdlib_kernels import quantized_api as q


def write_model(path: str, weights: dict[str, np.ndarray], qtype: GGMLQuantizationType) -> None:
    writer = GGUFWriter(path, "llama")
    for name, w in weights.items():
        writer.add_tensor(name, quantize(w, qtype), raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def q8_1_error_bound(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    """How far a q8_1 product may be from ``w @ x`` (tests/stdlib/test_quantized.py derives it): half
    a quantization step of x (d8 = amax / 127 per 32 values, f16) and d8's rounding, plus f32 sums."""
    d8 = np.repeat((np.abs(x.reshape(-1, 32)).max(axis=1) / 127).astype(np.float16).astype(np.float64), 32)
    step = 0.5 * d8 * (1 + 2 ** -9) + 2 ** -10 * np.abs(x)
    return np.abs(w) @ step + (x.size / 16 + 24) * 2 ** -24 * (np.abs(w) @ (np.abs(x) + d8))


def main() -> None:
    rng = np.random.default_rng(0)
    rows, cols = 96, 1024
    weights = {"blk.0.ffn_up.weight": rng.standard_normal((rows, cols)).astype(np.float32)}
    x = rng.standard_normal(cols).astype(np.float32)
    dev = pk.device("cpu")
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "tiny.gguf")
        for qtype in (GGMLQuantizationType.Q4_0, GGMLQuantizationType.Q8_0):
            write_model(path, weights, qtype)
            t = q.read_gguf(path, "blk.0.ffn_up.weight")
            y = t.matmul(dev.to_device(x[None])).to_host()[0]
            w = dequantize(t.data.reshape(rows, -1), qtype).astype(np.float64)   # NumPy's view of the file
            exact = w @ x.astype(np.float64)
            err = np.abs(y - exact)
            good = bool(np.all(err <= q8_1_error_bound(w, x.astype(np.float64))))
            ok &= good
            print(f"{t.name} {t.qtype} {t.shape}: max |y - W x| {err.max():.3g} "
                  f"(|W x| up to {np.abs(exact).max():.3g}): {'OK' if good else 'FAILED'}")
    print("gguf mat-vec:", "OK" if ok else "FAILED")
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
