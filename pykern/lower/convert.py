"""Numeric conversions between pykern dtypes, spelled in target-neutral LLVM IR.

bf16 and fp8 (OCP e4m3fn) have no portable LLVM representation (llvmlite has no ``bfloat``; fp8
instructions differ per GPU and mean FNUZ on gfx942), so both are integer storage here and are
converted with integer arithmetic: round to nearest even, NaN kept quiet, fp8 saturating to ±448
(CUDA's ``__nv_fp8_e4m3`` and candle's behaviour). Every target therefore produces the same bits.

Conversions from f64 to the 16- and 8-bit floats go through f32 with *round-to-odd*, which makes the
second rounding exact (f32 keeps more than 2p+2 bits of every narrower format), so the result is the
correctly rounded one without a libcall the host JIT may not have; a target with a single
instruction for f64 -> f16/bf16 (``Target.round_f64_to_half``) gives the same value in one step.
"""
from __future__ import annotations

from llvmlite import ir

from ..ir import types as T

I1, I8, I16, I32, I64 = (ir.IntType(n) for n in (1, 8, 16, 32, 64))
F16, F32, F64 = ir.HalfType(), ir.FloatType(), ir.DoubleType()


def storage_type(ty: T.DType) -> ir.Type:
    """How a dtype is laid out in memory and in kernel arguments."""
    if ty.is_float:
        return {16: F16 if ty is T.f16 else I16, 32: F32, 64: F64, 8: I8}[ty.bits]
    return ir.IntType(ty.bits)


def value_type(ty: T.DType) -> ir.Type:
    """How a dtype is held in registers (bool is i1, everything else as stored)."""
    return I1 if ty.is_bool else storage_type(ty)


def _intrinsic(b: ir.IRBuilder, name: str, ty: ir.Type, args):
    fn = b.module.globals.get(name) or ir.Function(b.module, ir.FunctionType(ty, [a.type for a in args]), name)
    return b.call(fn, args)


def to_f32(b: ir.IRBuilder, v: ir.Value, ty: T.DType) -> ir.Value:
    """A storage float (f16, bf16, f8e4m3) or f32 as f32, exactly."""
    if ty is T.f32:
        return v
    if ty is T.f16:
        return b.fpext(v, F32)
    if ty is T.bf16:
        # the high half of a 32-bit word whose low half is zero: on NVPTX one byte permute (a pack
        # ``mov.b32 {0, h}``), where zext + shl took two for a bf16 from the high half of a vector word
        pair = b.insert_element(ir.Constant(ir.VectorType(I16, 2), None), v, ir.Constant(I32, 1))
        pair = b.insert_element(pair, ir.Constant(I16, 0), ir.Constant(I32, 0))
        return b.bitcast(pair, F32)
    if ty is T.f8e4m3:
        return _e4m3_to_f32(b, v)
    raise TypeError(ty)


def from_f32(b: ir.IRBuilder, v: ir.Value, ty: T.DType, target=None) -> ir.Value:
    """Round an f32 to a storage float (round to nearest even). A ``target`` with a bf16 rounding
    instruction (``Target.round_f32_to_bf16``) gives the same value, one instruction instead of
    eight; only NaN payloads may differ."""
    if ty is T.f32:
        return v
    if ty is T.f16:
        return b.fptrunc(v, F16)
    if ty is T.bf16:
        native = target.round_f32_to_bf16(b, v) if target is not None else None
        return _f32_to_bf16(b, v) if native is None else native
    if ty is T.f8e4m3:
        return _f32_to_e4m3(b, v)
    raise TypeError(ty)


def _f32_to_bf16(b, v):
    bits = b.bitcast(v, I32)
    lsb = b.and_(b.lshr(bits, ir.Constant(I32, 16)), ir.Constant(I32, 1))
    rounded = b.lshr(b.add(bits, b.add(lsb, ir.Constant(I32, 0x7FFF))), ir.Constant(I32, 16))
    quiet = b.or_(b.lshr(bits, ir.Constant(I32, 16)), ir.Constant(I32, 0x40))
    isnan = b.fcmp_unordered("uno", v, v)
    return b.trunc(b.select(isnan, quiet, rounded), I16)


def _e4m3_to_f32(b, v):
    code = b.zext(v, I32)
    sign = b.shl(b.and_(code, ir.Constant(I32, 0x80)), ir.Constant(I32, 24))
    mag = b.and_(code, ir.Constant(I32, 0x7F))
    exp = b.lshr(mag, ir.Constant(I32, 3))
    mant = b.and_(mag, ir.Constant(I32, 7))
    normal = b.or_(b.shl(b.add(exp, ir.Constant(I32, 120)), ir.Constant(I32, 23)),
                   b.shl(mant, ir.Constant(I32, 20)))
    sub = b.bitcast(b.fmul(b.uitofp(mant, F32), ir.Constant(F32, 2.0 ** -9)), I32)
    bits = b.select(b.icmp_unsigned("==", exp, ir.Constant(I32, 0)), sub, normal)
    bits = b.select(b.icmp_unsigned("==", mag, ir.Constant(I32, 0x7F)), ir.Constant(I32, 0x7FC00000), bits)
    return b.bitcast(b.or_(bits, sign), F32)


def _f32_to_e4m3(b, v):
    bits = b.bitcast(v, I32)
    sign = b.trunc(b.lshr(b.and_(bits, ir.Constant(I32, 0x80000000)), ir.Constant(I32, 24)), I8)
    absf = _intrinsic(b, "llvm.fabs.f32", F32, [v])
    abits = b.bitcast(absf, I32)
    # normal range: round the f32 mantissa to 3 bits, re-bias the exponent (127 -> 7)
    lsb = b.and_(b.lshr(abits, ir.Constant(I32, 20)), ir.Constant(I32, 1))
    rounded = b.lshr(b.add(abits, b.add(lsb, ir.Constant(I32, 0x7FFFF))), ir.Constant(I32, 20))
    normal = b.sub(rounded, ir.Constant(I32, 120 << 3))
    # subnormal range (|x| < 2^-6): multiples of 2^-9, rounded to nearest even
    scaled = _intrinsic(b, "llvm.roundeven.f32", F32, [b.fmul(absf, ir.Constant(F32, 512.0))])
    sub = b.fptoui(scaled, I32)
    code = b.select(b.fcmp_ordered("<", absf, ir.Constant(F32, 2.0 ** -6)), sub, normal)
    code = b.select(b.fcmp_ordered(">=", absf, ir.Constant(F32, 448.0)), ir.Constant(I32, 0x7E), code)
    code = b.select(b.fcmp_unordered("uno", v, v), ir.Constant(I32, 0x7F), code)
    return b.or_(b.trunc(code, I8), sign)


def f64_to_f32_odd(b, v):
    """f64 -> f32 rounded to odd: exact second roundings to any narrower float."""
    r = b.fptrunc(v, F32)
    back = b.fpext(r, F64)
    inexact = b.fcmp_ordered("!=", back, v)
    rbits = b.bitcast(r, I32)
    # step toward zero if RNE rounded away from zero, then set the sticky lowest bit
    away = b.fcmp_ordered(">", _intrinsic(b, "llvm.fabs.f64", F64, [back]), _intrinsic(b, "llvm.fabs.f64", F64, [v]))
    rbits = b.select(b.and_(inexact, away), b.sub(rbits, ir.Constant(I32, 1)), rbits)
    rbits = b.select(inexact, b.or_(rbits, ir.Constant(I32, 1)), rbits)
    return b.bitcast(rbits, F32)


def convert(b: ir.IRBuilder, v: ir.Value, src: T.DType, dst: T.DType, target=None) -> ir.Value:
    """``v`` (a value of ``src``) as ``dst``: ints wrap, float->int truncates and saturates (NaN -> 0)."""
    if src is dst:
        return v
    if dst.is_bool:
        if src.is_float:
            return b.fcmp_unordered("!=", _widen(b, v, src), ir.Constant(_wide_type(src), 0.0))
        return b.icmp_unsigned("!=", v, ir.Constant(v.type, 0))
    if src.is_bool or src.is_int:
        if dst.is_int:
            if dst.bits < src.bits:
                return b.trunc(v, value_type(dst))
            if dst.bits > src.bits or src.is_bool:
                return (b.sext if src.is_signed else b.zext)(v, value_type(dst))
            return v
        # int -> f32/f64: one rounding. int -> f16/bf16/fp8: through f32, as candle's CPU backend
        # (`bf16::from_f32(v as f32)`) and CUDA's fp8 constructor do
        if dst is T.f64:
            return (b.sitofp if src.is_signed else b.uitofp)(v, F64)
        return from_f32(b, (b.sitofp if src.is_signed else b.uitofp)(v, F32), dst, target)
    # src is a float
    if dst.is_int:
        wide = _widen(b, v, src)
        name = f"llvm.fpto{'s' if dst.is_signed else 'u'}i.sat.i{dst.bits}.{'f64' if wide.type is F64 else 'f32'}"
        return _intrinsic(b, name, value_type(dst), [wide])
    wide = _widen(b, v, src)
    wide_ty = T.f64 if wide.type is F64 else T.f32
    if dst is T.f64:
        return wide if wide_ty is T.f64 else b.fpext(wide, F64)
    return _narrow(b, wide, wide_ty, dst, target)


def _wide_type(ty: T.DType) -> ir.Type:
    return F64 if ty is T.f64 else F32


def _widen(b, v, ty: T.DType) -> ir.Value:
    return v if ty is T.f64 else to_f32(b, v, ty)


def _narrow(b, v, src: T.DType, dst: T.DType, target=None) -> ir.Value:
    """An f32 or f64 value rounded once to ``dst``."""
    if src is T.f64:
        if dst is T.f64:
            return v
        if dst is T.f32:
            return b.fptrunc(v, F32)
        if dst.bits == 16 and target is not None:
            native = target.round_f64_to_half(b, v, bf16=dst is T.bf16)
            if native is not None:
                return native
        return from_f32(b, f64_to_f32_odd(b, v), dst, target)
    return from_f32(b, v, dst, target)
