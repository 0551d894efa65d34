"""The stdlib's cases: every kernel of every family launched by name, and the wrappers' own launches.

* ``sweep(module)`` registers, for every kernel of ``module`` with candle's elementwise ABI
  (``numel, num_dims, info, ...``), one case ``module/kernel`` with three launches: candle's launch
  (contiguous, null ``info``, ``ceil(numel/1024)`` blocks of 1024 with a partial last block and a
  partial wave), ``info`` describing contiguous operands, and ``info`` with each operand laid out
  differently (transposed, broadcast, and sliced at a storage offset) under a small grid-stride launch.
  Arguments are worked out from the parameter list alone (inputs are the ``ConstPtr`` parameters, the
  ``Ptr`` ones outputs, scalars get a value of their type), so a family with that ABI needs one line:
  ``sweep(FAMILY)``.
* Wrapper cases call the family's host functions on the layouts of ``tests/stdlib`` and in place
  (``out=x``): the launch shapes the wrappers choose.
* Other ABIs (fill's ``fill``/``copy2d``, reduce) have small case functions below.
"""
from __future__ import annotations

import inspect

import ml_dtypes
import numpy as np

import pykern as pk
import stdlib_kernels as sk
from pykern.ir.types import DType
from pykern.runtime.launch import storage
from stdlib_kernels import affine, binary, cast, fill, reduce, reduce_launch, ternary, unary
from stdlib_kernels._common import launch_1d
from stdlib_kernels.matmul import MATMUL

from tests.amd._registry import add, case, rng

ELEMENTWISE_HEAD = ["numel", "num_dims", "info"]
#: candle's launch: 1100 elements are a full block of 1024 and one of 76 threads (2 waves of 32 and
#: 12 lanes, or one wave of 64 and 12 lanes)
CANDLE_NUMEL = 1100
STRIDED_DIMS = (7, 19)
CONTIGUOUS_DIMS = (3, 50)
NARROW_WHY = ("f16/bf16/f8 exp, sigmoid, silu, gelu and gelu_erf use pk.fast_exp2 and pk.fast_rcp (docs/compat.md): "
              "the host computes them exactly, AMDGPU with v_exp_f32/v_rcp_f32, so a result may round to the "
              "neighbouring value of the narrow type")


def values(dtype: DType, count: int, gen: np.random.Generator) -> np.ndarray:
    """``count`` values of ``dtype``: floats uniform in [-4, 4) led by the specials (NaN, +-inf, +-0,
    subnormals, the extremes, halves), integers over their whole range led by 0, 1, -1 and the extremes."""
    if dtype.is_float:
        fi = ml_dtypes.finfo(dtype.np)
        special = [np.nan, np.inf, -np.inf, 0.0, -0.0, float(fi.smallest_subnormal), -float(fi.smallest_subnormal),
                   float(fi.tiny), float(fi.max), -float(fi.max), 0.5, -0.5, 1.5, -2.5, 1.0, -1.0, 3.0, 100.0, -30.0]
        if dtype is pk.f8e4m3:
            special = [v for v in special if not np.isinf(v)]
        out = gen.uniform(-4.0, 4.0, size=count)
        out[:min(count, len(special))] = special[:count]
        with np.errstate(over="ignore"):
            return out.astype(dtype.np)
    if dtype.is_bool:
        return gen.integers(0, 2, size=count).astype(dtype.np)
    lo, hi = dtype.int_range
    out = gen.integers(lo, hi, size=count, endpoint=True, dtype=np.int64 if dtype.bits < 64 or dtype.is_signed
                       else np.uint64).astype(dtype.np)
    lead = [0, 1, lo, hi] + ([-1] if dtype.is_signed else [2])
    out[:min(count, len(lead))] = np.array(lead[:count], dtype=object).astype(dtype.np)
    return out


def scalar(dtype: DType, index: int):
    """A by-value argument of ``dtype``: a non-trivial value of the type (different per position)."""
    if dtype.is_float:  # Python numbers: the launcher converts them (it refuses ml_dtypes' bf16/f8 scalars)
        return (0.75, -1.25, 2.5)[index % 3]
    return (3, 5, 7)[index % 3]


def _param_names(instance) -> list[str]:
    return list(inspect.signature(instance.kdef.__wrapped__).parameters)


def is_elementwise(instance) -> bool:
    return _param_names(instance)[:3] == ELEMENTWISE_HEAD


def _operand(dev, dtype: DType, dims: tuple[int, int], layout: str, gen) -> tuple:
    """(array to pass, element strides) for one operand of logical shape ``dims`` in ``layout``."""
    rows, cols = dims
    if layout == "contiguous":
        return dev.to_device(values(dtype, rows * cols, gen)), (cols, 1)
    if layout == "transposed":
        base = dev.to_device(values(dtype, rows * cols, gen))
        return storage(base.reshape(cols, rows).transpose()), (1, rows)
    if layout == "broadcast":
        return dev.to_device(values(dtype, cols, gen)), (0, 1)
    if layout == "sliced":  # rows of cols + 5, starting 13 elements into the storage
        base = dev.to_device(values(dtype, 13 + rows * (cols + 5), gen))
        return storage(base.as_strided(dims, (cols + 5, 1), offset=13)), (cols + 5, 1)
    raise ValueError(layout)


def launch_elementwise(dev, module, name: str, variant: str, gen) -> None:
    """One launch of candle's elementwise ABI in ``variant`` ("candle", "info-contiguous", "strided")."""
    instance = module.get(name)
    params = instance.typed(dev.target).params
    pointers = [(n, t) for n, t in params[3:] if not isinstance(t, DType)]
    inputs = [n for n, t in pointers if t.const]
    strided = inputs or [n for n, t in pointers if not t.const]  # const_set: the output carries the layout
    if variant == "candle":
        dims, layouts = (CANDLE_NUMEL,), {}
        grid, block = launch_1d(CANDLE_NUMEL)
    else:
        dims = STRIDED_DIMS if variant == "strided" else CONTIGUOUS_DIMS
        cycle = ("transposed", "broadcast", "sliced") if variant == "strided" else ("contiguous",)
        layouts = {n: cycle[k % len(cycle)] for k, n in enumerate(strided)}
        grid, block = 2, 64  # a grid-stride loop of two blocks, the last round partial
    numel = int(np.prod(dims))
    args, strides, scalars = [], [], 0
    for pname, ty in params[3:]:
        if isinstance(ty, DType):
            args.append(scalar(ty, scalars))
            scalars += 1
        elif pname in layouts:
            arr, st = _operand(dev, ty.elem, dims, layouts[pname], gen)
            args.append(arr)
            strides.append(st)
        elif ty.const:
            args.append(dev.to_device(values(ty.elem, numel, gen)))
        else:
            args.append(dev.to_device(values(ty.elem, numel, gen)))  # outputs start non-zero: every write shows
    info = None
    if variant != "candle":
        info = dev.to_device(np.array(list(dims) + [s for st in strides for s in st], dtype=np.uint64))
    dev.get_or_load_func(name, module)[grid, block](numel, len(dims), info, *args)


def sweep(module, ulps_of=lambda name: 0, why: str = "") -> None:
    """Register a case per elementwise kernel of ``module`` (see the module docstring)."""
    for instance in module.kernels:
        if not is_elementwise(instance):
            continue
        name = instance.name

        def run(dev, name=name, case_name=f"{module.name}/{name}"):
            gen = rng(case_name)
            for variant in ("candle", "info-contiguous", "strided"):
                launch_elementwise(dev, module, name, variant, gen)
        tolerance = ulps_of(name)
        add(f"{module.name}/{name}", run, {name: tolerance} if tolerance else None, why if tolerance else "")


def _narrow_math(name: str) -> int:
    narrow = any(t in name for t in ("_f16", "_bf16", "_fp8_e4m3", "_f8e4m3"))
    op = name.split("_")[0]
    return 1 if narrow and op in ("uexp", "usigmoid", "usilu", "ugelu") else 0


for _module in (sk.AFFINE, sk.BINARY, sk.CAST, sk.FILL, sk.TERNARY):
    sweep(_module)
sweep(sk.UNARY, _narrow_math, NARROW_WHY)


# ---- the wrappers' own launches on tests/stdlib's layouts, and in place ---------------------------------
def _layouts(dev, dtype, gen):
    """tests/stdlib's layouts (contiguous odd size, transposed, broadcast, sliced at an offset), smaller."""
    a = dev.to_device(values(dtype, 3 * 337, gen).reshape(3, 337))
    yield a
    yield dev.to_device(values(dtype, 37 * 29, gen).reshape(37, 29)).transpose()
    yield dev.to_device(values(dtype, 53, gen).reshape(1, 53)).broadcast_to((7, 53))
    yield dev.to_device(values(dtype, 600, gen)).as_strided((5, 97), (110, 1), offset=13)


WRAPPER_DTYPES = (pk.f32, pk.f16, pk.bf16, pk.f64, pk.f8e4m3)


@case("unary/wrappers", ulps={name: 1 for name in sk.UNARY.names() if _narrow_math(name)}, why=NARROW_WHY)
def _unary_wrappers(dev):
    gen = rng("unary/wrappers")
    for dtype in WRAPPER_DTYPES:
        for x in _layouts(dev, dtype, gen):
            unary.exp(x)
            unary.copy(x)
            unary.elu(x, 0.5)
        x = dev.to_device(values(dtype, 1000, gen))
        unary.gelu(x, out=x)  # in place: a null inp
        unary.neg(x, out=x)


@case("affine/wrappers")
def _affine_wrappers(dev):
    gen = rng("affine/wrappers")
    for dtype in (pk.f32, pk.bf16, pk.u8, pk.i64, pk.f8e4m3):
        for x in _layouts(dev, dtype, gen):
            affine.affine(x, 1.5, -2.0)
        x = dev.to_device(values(dtype, 1000, gen))
        affine.affine(x, 0.5, 3.0, out=x)


@case("binary/wrappers")
def _binary_wrappers(dev):
    gen = rng("binary/wrappers")
    for dtype in (pk.f32, pk.f16, pk.u32, pk.i64, pk.f8e4m3):
        a = dev.to_device(values(dtype, 7 * 45, gen).reshape(7, 45))
        for b in (dev.to_device(values(dtype, 45, gen)), dev.to_device(values(dtype, 7, gen).reshape(7, 1)),
                  dev.to_device(values(dtype, 7 * 45, gen).reshape(45, 7)).transpose()):
            binary.add(a, b)
            binary.div(b, a)
            binary.lt(a, b)
            binary.maximum(a, b)


@case("cast/wrappers")
def _cast_wrappers(dev):
    gen = rng("cast/wrappers")
    for src in (pk.f32, pk.f64, pk.bf16, pk.i64, pk.f8e4m3):
        for x in _layouts(dev, src, gen):
            for dst in (pk.f16, pk.bf16, pk.f8e4m3, pk.i32, pk.u8):
                cast.to(x, dst)


@case("ternary/wrappers")
def _ternary_wrappers(dev):
    gen = rng("ternary/wrappers")
    for cond, value in ((pk.u8, pk.f32), (pk.i64, pk.bf16), (pk.u32, pk.f8e4m3)):
        c = dev.to_device(gen.integers(0, 2, size=(5, 33)).astype(cond.np))
        t = dev.to_device(values(value, 33, gen))
        f = dev.to_device(values(value, 5 * 33, gen).reshape(33, 5)).transpose()
        ternary.where(c, t, f)
        ternary.where(c, t, dev.to_device(values(value, 5 * 33, gen).reshape(5, 33)))


@case("fill/wrappers")
def _fill_wrappers(dev):
    gen = rng("fill/wrappers")
    for dtype in list(fill.DTYPES) + list(fill.EXTRA):
        x = dev.to_device(values(dtype, 1037, gen))
        if "fill_" + dtype.tag in sk.FILL:
            fill.fill_buffer(x, 2.5)
        for view in _layouts(dev, dtype, gen):
            fill.fill(view, -1.5)
        src = dev.to_device(values(dtype, 40 * 33, gen))
        dst = dev.to_device(values(dtype, 40 * 50, gen))
        fill.copy2d(src, dst, 37, 31, 33, 50, src_o=3, dst_o=7)  # rows of 31 at strides 33 and 50
        fill.copy2d(src, dst, 1, 1000, 1000, 1000)


# ---- reduce: the wrappers' paths by row length and dtype, and candle's launches --------------------------
SOFTMAX_WHY = ("softmax takes e^x from pk.fast_exp2 (v_exp_f32 on AMDGPU, exact on the host: ~2 ulp of each term), "
               "so f32 results move by up to 4 ulps, 16-bit ones by one; f64 uses pk.math.exp and agrees bit for bit")
REDUCE_DTYPES = (pk.f32, pk.f64, pk.f16, pk.bf16)


def _rows(dev, dtype, rows: int, cols: int, gen, lo=-4.0, hi=4.0):
    x = gen.uniform(lo, hi, size=(rows, cols)).astype(dtype.np)
    return dev.to_device(x)


@case("reduce/fast_reductions")
def _fast_reductions(dev):
    gen = rng("reduce/fast_reductions")
    for dtype in reduce.FAST_DTYPES:
        for rows, cols in ((3, 5), (4, 100), (2, 1500), (1, 5000)):  # wave rows, wave rows, block rows, long
            x = dev.to_device(values(dtype, rows * cols, gen).reshape(rows, cols)) if dtype.is_int else \
                _rows(dev, dtype, rows, cols, gen)
            for op in ("fast_sum", "fast_max", "fast_min", "fast_argmax", "fast_argmin"):
                if dtype in reduce.FAST_DTYPES:
                    reduce.fast_reduce_launch(op, x, [1])
            if cols <= 100:  # a strided reduced dim (as 1,500 or 5,000 one-thread blocks it was a third of
                reduce.fast_reduce_launch("fast_sum", x, [0])  # the core half's emulated time, and no new path)
            reduce.fast_reduce_launch("fast_max", x, [1], candle_shape=True)
            reduce.fast_reduce_launch("fast_argmin", x, [1], candle_shape=True)


@case("reduce/sum_atomic")
def _sum_atomic(dev):
    gen = rng("reduce/sum_atomic")
    for dtype in reduce.SUM_DTYPES:
        # small integers: atomics add in any order, and the sums stay exact
        x = dev.to_device(gen.integers(-4, 5, size=(6, 7, 9)).astype(dtype.np) if dtype.is_float else
                          gen.integers(0, 9, size=(6, 7, 9)).astype(dtype.np))
        reduce.sum_atomic_launch(x, [1])
        reduce.sum_atomic_launch(x, [0, 2])


@case("reduce/softmax", ulps={**{f"{k}_f32": 4 for k in ("softmax", "softmax_rows")},
                              **{f"{k}_{t}": 1 for k in ("softmax", "softmax_rows") for t in ("f16", "bf16")}},
      why=SOFTMAX_WHY)
def _softmax(dev):
    gen = rng("reduce/softmax")
    for dtype in REDUCE_DTYPES:
        for cols in (7, 100, 1000, 3000, 9000):
            x = _rows(dev, dtype, 3, cols, gen)
            reduce.softmax_last_dim(x)
            reduce.softmax_last_dim(x, block=(1, 32, 1))  # candle's launch
            reduce.softmax_last_dim(x, block=(1, 256, 1))


@case("reduce/norms")
def _norms(dev):
    """The norm wrappers' GPU kernels: on a CPU device the wrappers would take the host kernels
    (``reduce_launch.HOST_KERNELS``), which no AMD code object holds."""
    host_kernels, reduce_launch.HOST_KERNELS = reduce_launch.HOST_KERNELS, False
    try:
        _norm_launches(dev)
    finally:
        reduce_launch.HOST_KERNELS = host_kernels


def _norm_launches(dev):
    gen = rng("reduce/norms")
    for dtype in REDUCE_DTYPES:
        for rows, cols in ((4, 7), (4, 100), (2, 400), (2, 600), (2, 1500), (1, 3000), (1, 5000), (1, 20000)):
            x = _rows(dev, dtype, rows, cols, gen)
            alpha = _rows(dev, dtype, 1, cols, gen, 0.5, 1.5).reshape(cols)
            beta = _rows(dev, dtype, 1, cols, gen).reshape(cols)
            reduce.rms_norm(x, alpha, 1e-5)
            reduce.layer_norm(x, alpha, beta, 1e-5)
            reduce.rms_norm(x, None, 1e-5)
            block = 32 if cols < 1024 else 1024  # candle's launch
            reduce.rms_norm(x, alpha, 1e-5, block_size=block)
            reduce.layer_norm(x, alpha, beta, 1e-5, block_size=block)


@case("reduce/rope")
def _rope(dev):
    gen = rng("reduce/rope")
    for dtype in REDUCE_DTYPES:
        b, h, t, d = 2, 3, 5, 8
        x = dev.to_device(gen.uniform(-2, 2, size=(b, h, t, d)).astype(dtype.np))
        xt = dev.to_device(gen.uniform(-2, 2, size=(b, t, h, d)).astype(dtype.np))
        for cs_shape in ((t, d // 2), (b, t, d // 2)):
            cos = dev.to_device(gen.uniform(-1, 1, size=cs_shape).astype(dtype.np))
            sin = dev.to_device(gen.uniform(-1, 1, size=cs_shape).astype(dtype.np))
            reduce.rope_i(x, cos, sin)
            reduce.rope(x, cos, sin)
            reduce.rope_thd(xt, cos, sin)


#: modules whose every kernel a case must launch (test_every_kernel_is_launched): these cases' families,
#: and those of ``_family_cases.py`` (conv, indexing, quantized, sort, and the GEMM of conv's wrappers)
COVERED_MODULES = (sk.AFFINE, sk.BINARY, sk.CAST, sk.FILL, sk.REDUCE, sk.TERNARY, sk.UNARY,
                   sk.CONV, sk.INDEXING, sk.QUANTIZED, sk.SORT, MATMUL)
