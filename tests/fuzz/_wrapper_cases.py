"""Random launch arguments against the stdlib wrappers, run as a script in a child process
(``test_wrappers.py``): shapes, strided/broadcast/offset views, None, NumPy arrays, wrong dtypes,
sizes past the arrays; the elementwise families and copy2d here, the others (reduce, indexing, sort,
conv, matmul, quantized) from ``_wrapper_families.py``. Each case must give NumPy's answer or raise a clear error; anything else is a
failure. Each case is printed before it runs, so a crash (which kills this process) is named by the
last line of its output.

    python tests/fuzz/_wrapper_cases.py [examples]
"""
from __future__ import annotations

import sys
import traceback

import ml_dtypes  # noqa: F401 - NumPy learns bf16 / fp8
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pykern as pk
from stdlib_kernels import affine, binary, fill, ternary, unary
from stdlib_kernels._common import from_f64

from _wrapper_families import FAMILIES, Invalid, compare

#: what a bad argument may raise: a clear, typed error (never an IndexError, AttributeError, a crash...)
CLEAR = (ValueError, TypeError, pk.LaunchError, pk.CompileError, pk.DeviceError)
DTYPES = [np.float32, np.float64, np.float16, np.uint8, np.uint32, np.int64, np.int32, np.complex64]
DEV = pk.device("cpu")


@st.composite
def operand(draw, shape=None, dtype=None):
    """(what to pass, its logical host value or None when it is not an array)."""
    kind = draw(st.sampled_from(["array", "array", "array", "transposed", "broadcast", "offset", "numpy", "none",
                                 "scalar"]))
    if kind == "none":
        return None, None
    if kind == "scalar":
        return 1.5, np.asarray(1.5)
    dtype = dtype or draw(st.sampled_from(DTYPES))
    shape = shape if shape is not None else tuple(draw(st.lists(st.integers(0, 5), max_size=3)))
    rng = np.random.default_rng(draw(st.integers(0, 1000)))
    host = (rng.uniform(-3, 3, shape) * 4).astype(dtype) if np.dtype(dtype).kind != "c" else np.zeros(shape, dtype)
    if kind == "numpy":
        return host, host
    try:
        if kind == "transposed" and len(shape) >= 2:
            base = DEV.to_device(np.ascontiguousarray(np.swapaxes(host, -1, -2)))
            return base.transpose(), host
        if kind == "broadcast" and shape and host.size:
            row = host[(0,) * (len(shape) - 1)] if len(shape) > 1 else host
            full = np.broadcast_to(row, shape)
            return DEV.to_device(np.ascontiguousarray(row)).broadcast_to(shape), full
        if kind == "offset" and host.size:
            flat = np.concatenate([np.zeros(3, dtype), host.reshape(-1)])
            return DEV.to_device(flat).offset_view(3, shape), host
        return DEV.to_device(host), host
    except CLEAR:  # e.g. a complex dtype: the error is the point of the case; pass the host array
        return host, host


def reference(op: str, args, params):
    """NumPy's answer for the logical host values, or raise (then pykern must have raised too)."""
    v = [a if not isinstance(a, np.ndarray) else a for a in args]
    if any(x is None for x in v):
        raise ValueError("an operand is not an array")
    if op in ("add", "maximum"):
        if v[0].dtype != v[1].dtype:
            raise TypeError("dtypes differ")
        return np.add(v[0], v[1]) if op == "add" else np.where(v[0] < v[1], v[1], v[0])
    if op == "where":
        if v[1].dtype != v[2].dtype:
            raise TypeError("dtypes differ")
        return np.where(v[0] != 0, v[1], v[2])
    if op in ("neg", "sqr"):
        return -v[0] if op == "neg" else v[0] * v[0]
    if op == "affine":  # the parameters converted as candle's T::from_f64 (ints truncate and saturate)
        dt = pk.ir.types.dtype_of_numpy(v[0].dtype)
        mul, add = (v[0].dtype.type(from_f64(p, dt)) for p in params)
        return v[0] * mul + add
    raise AssertionError(op)


def check_case(op: str, args, hosts, params) -> str:
    print(f"CASE {op} args={[type(a).__name__ + str(getattr(a, 'shape', '')) + str(getattr(a, 'strides', '')) for a in args]} "
          f"dtypes={[getattr(a, 'dtype', None) for a in args]} params={params}", flush=True)
    call = {"add": binary.add, "maximum": binary.maximum, "where": ternary.where, "neg": unary.neg, "sqr": unary.sqr,
            "affine": lambda x: affine.affine(x, *params)}[op]
    try:
        got = call(*args)
    except CLEAR as exc:
        return f"refused: {type(exc).__name__}"
    except Exception as exc:  # noqa: BLE001 - an unclear error is the failure this hunts
        raise AssertionError(f"{op}: unclear error {type(exc).__name__}: {exc}\n{traceback.format_exc()}") from None
    try:
        with np.errstate(all="ignore"):
            want = reference(op, hosts, params)
    except (ValueError, TypeError) as exc:
        raise AssertionError(f"{op} returned a result where NumPy raises {exc!r}") from None
    host = got.to_host()
    assert host.shape == np.shape(want), f"{op}: shape {host.shape}, NumPy's {np.shape(want)}"
    wf, gf = np.asarray(want, np.float64), host.astype(np.float64)
    close = np.isclose(gf, wf, rtol=1e-2, atol=1e-2, equal_nan=True) | (np.isinf(gf) & np.isinf(wf))
    assert close.all(), f"{op}: wrong values {host.reshape(-1)[:8]} vs {np.asarray(want).reshape(-1)[:8]}"
    return "ok"


def check_copy2d(args) -> str:
    src_n, dst_n, d1, d2, ss, ds, so, do = args
    print(f"CASE copy2d src={src_n} dst={dst_n} d1={d1} d2={d2} src_s={ss} dst_s={ds} src_o={so} dst_o={do}", flush=True)
    src = DEV.to_device(np.arange(src_n, dtype=np.float32))
    dst = DEV.zeros(dst_n, np.float32)
    try:
        fill.copy2d(src, dst, d1, d2, ss, ds, so, do)
    except CLEAR as exc:
        return f"refused: {type(exc).__name__}"
    want = np.zeros(dst_n, np.float32)
    s = np.arange(src_n, dtype=np.float32)
    for r in range(d1):
        want[do + r * ds: do + r * ds + d2] = s[so + r * ss: so + r * ss + d2]
    assert np.array_equal(dst.to_host(), want), "copy2d: wrong values"
    return "ok"


def check_family(family: str, data) -> str:
    drawn = []

    def draw(strategy):  # every drawn value goes on the CASE line, so a crash is named by it
        value = data.draw(strategy)
        drawn.append(value)
        return value
    op, call, reference = FAMILIES[family](draw)
    print(f"CASE {family}.{op} draws={drawn}", flush=True)
    try:
        got = call()
    except CLEAR as exc:
        try:
            reference()
        except Invalid:
            return f"refused: {type(exc).__name__}: {str(exc)[:120]}"
        raise AssertionError(f"{family}.{op} refused a valid call: {type(exc).__name__}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - an unclear error is the failure this hunts
        raise AssertionError(f"{family}.{op}: unclear error {type(exc).__name__}: {exc}\n{traceback.format_exc()}") from None
    try:
        with np.errstate(all="ignore"):
            want = reference()
    except Invalid as why:
        raise AssertionError(f"{family}.{op} returned a result for an invalid call ({why})") from None
    compare(f"{family}.{op}", got, want)
    return "ok"


def main(examples: int) -> None:
    cfg = settings(max_examples=examples, deadline=None, database=None,
                   suppress_health_check=list(HealthCheck))

    @cfg
    @given(data=st.data())
    def elementwise(data):
        op = data.draw(st.sampled_from(["add", "maximum", "where", "neg", "sqr", "affine"]))
        arity = {"add": 2, "maximum": 2, "where": 3}.get(op, 1)
        shape = tuple(data.draw(st.lists(st.integers(0, 5), max_size=3)))
        same = data.draw(st.booleans())
        dtype = data.draw(st.sampled_from(DTYPES))
        pairs = [data.draw(operand(shape if same else None, dtype if same else None)) for _ in range(arity)]
        if op == "where" and pairs[0][1] is not None and data.draw(st.booleans()):
            pairs[0] = data.draw(operand(shape, np.uint8))
        params = (data.draw(st.sampled_from([0.5, 2.0, -1.0])), data.draw(st.sampled_from([0.0, 1.0])))
        print("  ->", check_case(op, [p[0] for p in pairs], [p[1] for p in pairs], params), flush=True)

    @cfg
    @given(st.tuples(st.integers(0, 64), st.integers(0, 64), st.integers(0, 2 ** 33), st.integers(0, 40),
                     st.integers(0, 40), st.integers(0, 40), st.integers(-2, 70), st.integers(-2, 70)))
    def copy2d(args):
        print("  ->", check_copy2d(args), flush=True)

    @settings(cfg, max_examples=3 * examples)  # six families share it
    @given(family=st.sampled_from(sorted(FAMILIES)), data=st.data())
    def families(family, data):
        print("  ->", check_family(family, data), flush=True)

    elementwise()
    copy2d()
    families()
    print("DONE", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 50)
