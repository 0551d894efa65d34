"""Atomics: ``pk.atomic.add/sub/min/max/exchange(p, i, v)`` and ``pk.atomic.cas(p, i, expected, new)``
on global pointers and shared arrays; each returns the old value."""
from __future__ import annotations

from llvmlite import ir

from ...ir import nodes as N
from ...ir import types as T
from ..values import CT
from .core import Namespace, lowering, typing_rule

atomic = Namespace("atomic", ["add", "sub", "min", "max", "exchange", "cas"])
_OPS = (atomic.add, atomic.sub, atomic.min, atomic.max, atomic.exchange, atomic.cas)
#: the LLVM atomicrmw operation of each: (int signed, int unsigned, float)
_LLVM_OPS = {
    "add": ("add", "add", "fadd"), "sub": ("sub", "sub", "fsub"), "min": ("min", "umin", "fmin"),
    "max": ("max", "umax", "fmax"), "exchange": ("xchg", "xchg", "xchg")}


@typing_rule(*_OPS)
def _type_atomic(tp, node, fn):
    op = fn.name.partition(".")[2]
    args = node.args
    n = 4 if fn is atomic.cas else 3
    if len(args) != n:
        raise tp.error(node, f"atomic.{op}() takes {n} arguments (pointer, index, {'expected, new' if op == 'cas' else 'value'})")
    base = tp.visit(args[0])
    if isinstance(base, CT) or not isinstance(base.ty, (T.PtrType, T.ArrayType)):
        raise tp.error(args[0], "the first argument of an atomic must be a pointer or a shared array")
    if base.ty.space == "local":
        raise tp.error(args[0], "atomics on a local array: it is private to the thread, use plain updates")
    if isinstance(base.ty, T.PtrType) and base.ty.const:
        raise tp.error(args[0], "atomic on a ConstPtr: the data is read-only")
    elem = base.ty.elem
    if elem.is_bool:
        raise tp.error(args[0], "atomics on bool are not supported; use u32")
    idx = tp.index_expr(tp.visit(args[1]), args[1])
    vals = [tp.coerce(tp.visit(a), elem, a) for a in args[2:]]
    space = base.ty.space  # global or shared (local was refused above)
    return tp.intrinsic(fn, elem, [base, idx] + vals, node, op=op, space=space)


@lowering(*_OPS)
def _lower_atomic(lo, e: N.Intrinsic):
    op, space, elem = e.attrs["op"], e.attrs["space"], e.ty
    lo.target.check(f"atomic.{op}.{space}", elem, e.loc)
    ptr, _ = lo.address(e.args[0], e.args[1])
    vals = [lo.expr(a) for a in e.args[2:]]
    b, frame = lo.b, lo.frame
    if op == "cas":
        if elem.is_float:
            ity = ir.IntType(elem.bits)
            old = frame.cmpxchg(ptr, b.bitcast(vals[0], ity), b.bitcast(vals[1], ity), space)
            return b.bitcast(old, lo.ltype(elem))
        return frame.cmpxchg(ptr, vals[0], vals[1], space)
    llop = _LLVM_OPS[op][2 if elem.is_float else (0 if elem.is_signed else 1)]
    if elem is T.bf16 and llop != "xchg":
        # bf16 is i16 in registers; LLVM's bfloat atomics are native where the arch has them
        # (sm_90 atom.add.bf16) and a CAS loop that AtomicExpand writes elsewhere
        if not lo.target.bf16_atomics_in_llvm:
            return _bf16_loop(lo, llop, ptr, vals[0], space)
        old = frame.atomic_rmw(llop, ptr, b.bitcast(vals[0], lo.bfloat), space)
        return b.bitcast(old, lo.ltype(elem))
    return frame.atomic_rmw(llop, ptr, vals[0], space)


def _bf16_loop(lo, llop: str, ptr: ir.Value, value: ir.Value, space: str) -> ir.Value:
    """``p[i] = p[i] op value`` for bf16 (i16 bits) as a compare-and-swap loop: computed in f32
    and rounded like every other bf16 result; returns the old bits."""
    b = lo.b
    first, entry = b.load_atomic(ptr, "monotonic", 2, typ=value.type), b.block
    loop, done = b.append_basic_block("bf16.atomic"), b.append_basic_block("bf16.atomic.end")
    b.branch(loop)
    b.position_at_end(loop)
    old = b.phi(value.type)
    old.add_incoming(first, entry)
    x, y = lo.widen(old, T.bf16), lo.widen(value, T.bf16)
    new = lo.narrow(b.fadd(x, y) if llop == "fadd" else b.fsub(x, y), T.bf16)
    seen = lo.frame.cmpxchg(ptr, old, new, space)
    old.add_incoming(seen, loop)
    b.cbranch(b.icmp_unsigned("==", seen, old), done, loop)
    b.position_at_end(done)
    return seen
