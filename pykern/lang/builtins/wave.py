"""The wave (warp): ``pk.wave_size``, the lane shuffles, the votes (``ballot``, ``any``, ``all``) and the
reductions (``sum``, ``min``, ``max``), with one semantics on every target and wave width: a lane
absent from a partial last wave (a block size that is not a multiple of the width) takes no part."""
from __future__ import annotations

import math

from llvmlite import ir

from ...ir import nodes as N
from ...ir import types as T
from ..values import CT
from .core import Namespace, WaveSize, lowering, typing_rule

wave = Namespace("wave", ["shuffle", "shuffle_xor", "shuffle_up", "shuffle_down", "ballot", "any", "all",
                          "sum", "min", "max"])
wave_size = WaveSize()

_SHUFFLES = {wave.shuffle: "idx", wave.shuffle_xor: "xor", wave.shuffle_up: "up", wave.shuffle_down: "down"}
_VOTES = {wave.ballot: "ballot", wave.any: "any", wave.all: "all"}
_REDUCTIONS = {wave.sum: "sum", wave.min: "min", wave.max: "max"}
_I1, _I32, _I64 = ir.IntType(1), ir.IntType(32), ir.IntType(64)


def _value(tp, arg) -> N.Expr:
    v = tp.materialize(tp.visit(arg), arg)
    if not isinstance(v.ty, T.DType):
        raise tp.error(arg, f"wave operations take numbers, got {v.ty!r}")
    return v


# ---- typing ---------------------------------------------------------------------------------------
@typing_rule(*_SHUFFLES)
def _type_shuffle(tp, node, fn):
    args = node.args
    if len(args) != 2:
        raise tp.error(node, f"{fn.name}() takes 2 arguments (value, lane)")
    v = _value(tp, args[0])
    lane = tp.visit(args[1])
    lane = tp.coerce(lane, T.u32, args[1]) if isinstance(lane, CT) \
        else tp.cast_to(tp.index_expr(lane, args[1]), T.u32)
    tp.uses_sync = True
    return tp.intrinsic(fn, v.ty, [v, lane], node, kind=_SHUFFLES[fn])


@typing_rule(*_VOTES)
def _type_vote(tp, node, fn):
    kind = _VOTES[fn]
    if len(node.args) != 1:
        raise tp.error(node, f"wave.{kind}() takes 1 argument")
    c = tp.condition(node.args[0])
    c = tp.materialize(c, node.args[0])
    tp.uses_sync = True
    return tp.intrinsic(fn, T.u64 if kind == "ballot" else T.bool_, [c], node, kind=kind)


@typing_rule(*_REDUCTIONS)
def _type_reduce(tp, node, fn):
    kind = _REDUCTIONS[fn]
    if len(node.args) != 1:
        raise tp.error(node, f"wave.{kind}() takes 1 argument")
    v = _value(tp, node.args[0])
    if v.ty.is_bool:
        raise tp.error(node, f"wave.{kind}() needs a number, got bool")
    tp.uses_sync = True
    return tp.intrinsic(fn, v.ty, [v], node, kind=kind)


# ---- lowering: values split into 32-bit words, one target shuffle each -----------------------------
def _to_words(lo, v: ir.Value, ty: T.DType) -> list[ir.Value]:
    b = lo.b
    bits = 1 if ty.is_bool else ty.bits
    raw = b.bitcast(v, ir.IntType(bits)) if not isinstance(v.type, ir.IntType) else v
    if bits <= 32:
        return [b.zext(raw, _I32) if bits < 32 else raw]
    return [b.trunc(raw, _I32), b.trunc(b.lshr(raw, ir.Constant(_I64, 32)), _I32)]


def _from_words(lo, words: list[ir.Value], ty: T.DType) -> ir.Value:
    b = lo.b
    bits = 1 if ty.is_bool else ty.bits
    if bits > 32:
        raw = b.or_(b.zext(words[0], _I64), b.shl(b.zext(words[1], _I64), ir.Constant(_I64, 32)))
    else:
        raw = b.trunc(words[0], ir.IntType(bits)) if bits < 32 else words[0]
    vt = lo.ltype(ty)
    return raw if raw.type == vt else b.bitcast(raw, vt)


def _lanes_present(lo) -> tuple[ir.Value, ir.Value]:
    """(this thread's lane, the number of lanes in its wave): the last wave of a block whose size
    is not a multiple of the width has fewer lanes than ``wave_size``."""
    b, f, ws = lo.b, lo.frame, lo.target.wave_size
    lane = f.lane_id()
    bx, by, bz = (f.block_dim(i) for i in range(3))
    lin = b.add(b.mul(b.add(b.mul(f.thread_idx(2), by), f.thread_idx(1)), bx), f.thread_idx(0))
    left = b.sub(b.mul(b.mul(bx, by), bz), b.sub(lin, lane))
    return lane, b.select(b.icmp_unsigned("<", left, ir.Constant(_I32, ws)), left, ir.Constant(_I32, ws))


def _shuffle(lo, kind: str, v: ir.Value, ty: T.DType, arg: ir.Value, loc) -> ir.Value:
    """One semantics on every target: a source lane outside the wave, or absent from a partial
    wave, yields the caller's own value; ``idx`` wraps modulo the width."""
    words = [lo.frame.shuffle(kind, w, arg, loc) for w in _to_words(lo, v, ty)]
    got = _from_words(lo, words, ty)
    b, ws = lo.b, lo.target.wave_size
    lane, count = _lanes_present(lo)
    src = {"idx": lambda: b.and_(arg, ir.Constant(_I32, ws - 1)), "xor": lambda: b.xor(lane, arg),
           "up": lambda: b.sub(lane, arg), "down": lambda: b.add(lane, arg)}[kind]()
    present = b.icmp_unsigned("<", src, count)
    if kind == "up":
        present = b.and_(present, b.icmp_unsigned("<=", arg, lane))
    return b.select(present, got, v)


@lowering(*_SHUFFLES)
def _lower_shuffle(lo, e: N.Intrinsic):
    v, lane = lo.expr(e.args[0]), lo.expr(e.args[1])
    return _shuffle(lo, e.attrs["kind"], v, e.ty, lane, e.loc)


@lowering(*_VOTES)
def _lower_vote(lo, e: N.Intrinsic):
    mask = lo.frame.ballot(lo.expr(e.args[0]), e.loc)
    kind = e.attrs["kind"]
    if kind == "ballot":
        return mask
    if kind == "any":
        return lo.b.icmp_unsigned("!=", mask, ir.Constant(_I64, 0))
    return lo.b.icmp_unsigned("==", mask, lo.frame.ballot(ir.Constant(_I1, 1), e.loc))


def _identity(kind: str, ty: T.DType):
    if kind == "sum":
        return 0.0 if ty.is_float else 0
    if ty.is_float:
        return math.inf if kind == "min" else -math.inf
    lo, hi = ty.int_range
    return hi if kind == "min" else lo


def _combine(lo, op: str, a: ir.Value, b: ir.Value, ty: T.DType) -> ir.Value:
    if op in ("minimum", "maximum") and ty.is_storage_float:
        return lo.narrow(lo.call_intrinsic(op, [lo.widen(a, ty), lo.widen(b, ty)]), ty)
    return lo.arith(op, a, b, ty)


@lowering(*_REDUCTIONS)
def _lower_reduce(lo, e: N.Intrinsic):
    ty, kind = e.ty, e.attrs["kind"]
    op = {"sum": "add", "min": "minimum", "max": "maximum"}[kind]
    v = lo.expr(e.args[0])
    ws = lo.target.wave_size
    # lanes missing from a partial wave (block size not a multiple of the width) contribute the
    # identity; lane 0's butterfly then covers the whole wave, and its result is broadcast
    b = lo.b
    lane, count = _lanes_present(lo)
    identity = lo.expr(N.Const(ty, _identity(kind, ty)))
    offset = ws // 2
    while offset >= 1:
        other = _shuffle(lo, "xor", v, ty, ir.Constant(_I32, offset), e.loc)
        present = b.icmp_unsigned("<", b.xor(lane, ir.Constant(_I32, offset)), count)
        v = _combine(lo, op, v, b.select(present, other, identity), ty)
        offset //= 2
    return _shuffle(lo, "idx", v, ty, ir.Constant(_I32, 0), e.loc)
