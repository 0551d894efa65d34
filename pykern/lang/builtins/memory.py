"""Memory: ``pk.load``/``pk.store`` with a cache policy, ``pk.is_aligned``, ``pk.assume_aligned``,
``pk.bitcast``, and the
shared and local arrays (``pk.shared.array``, ``pk.shared.dynamic``, ``pk.local.array``)."""
from __future__ import annotations

import ast

from llvmlite import ir

from ...ir import nodes as N
from ...ir import types as T
from ..values import CT, describe
from .core import Builtin, Namespace, declaration_rule, lowering, typing_rule

load, store, is_aligned, assume_aligned, bitcast = (Builtin(n) for n in ("load", "store", "is_aligned",
                                                                         "assume_aligned", "bitcast"))
shared = Namespace("shared", ["array", "dynamic"])
local = Namespace("local", ["array"])

#: a local array lives in registers only when every index is a compile-time constant (pk.static_range);
#: otherwise in the thread's stack (scratch on AMDGPU, local memory on NVIDIA): keep it small either way
MAX_LOCAL_ARRAY_BYTES = 4096
_I64 = ir.IntType(64)


# ---- global memory with a cache policy ------------------------------------------------------------
def _access(tp, node, n: int, name: str):
    """``pk.load(p, i, eviction=...)`` / ``pk.store(p, i, v, eviction=...)``: ``p[i]`` of a
    global pointer, and the cache policy (a compile-time string)."""
    args = node.args
    if len(args) != n:
        raise tp.error(node, f"pk.{name}() takes {n} arguments and eviction=")
    base, idx = tp.subscript(ast.copy_location(ast.Subscript(value=args[0], slice=args[1], ctx=ast.Load()), node))
    if idx is None or not isinstance(base.ty, T.PtrType) or base.ty.space != "global":
        raise tp.error(args[0], f"pk.{name}() takes a pointer to global memory")
    eviction = ""
    for k in node.keywords:
        if k.arg == "align" and name == "load":
            continue
        if k.arg != "eviction":
            raise tp.error(k, f"pk.{name}() takes the keyword eviction=" + (" or align=" if name == "load" else ""))
        literal = isinstance(k.value, ast.Constant) and isinstance(k.value.value, str)
        eviction = k.value.value if literal else tp.ct_eval(k.value, "eviction=")
        if eviction not in N.EVICTION_POLICIES:
            raise tp.error(k.value, f"eviction= is one of {', '.join(map(repr, N.EVICTION_POLICIES))}, "
                                    f"got {eviction!r}")
    return base, idx, eviction


@typing_rule(load, keywords=("eviction", "align"))
def _type_load(tp, node, _):
    base, idx, eviction = _access(tp, node, 2, "load")
    align = 0
    for k in node.keywords:
        if k.arg == "align":  # the address is only known to be a multiple of align bytes
            align = tp.ct_eval(k.value, "align=")
            elem = base.ty.elem.nbytes
            if not (isinstance(align, int) and 0 < align <= elem and align & (align - 1) == 0):
                raise tp.error(k.value, f"align= is a power of two from 1 to the element's {elem} bytes, "
                                        f"got {align!r}")
            if eviction:
                raise tp.error(k, "pk.load() takes eviction= or align=, not both")
    return N.Load(base.ty.elem, base, idx, eviction, align if align and align < base.ty.elem.nbytes else 0,
                  loc=tp.loc(node))


@typing_rule(store, keywords=("eviction",))
def _type_store(tp, node, _):
    base, idx, eviction = _access(tp, node, 3, "store")
    if base.ty.const:
        raise tp.error(node.args[0], "cannot write through a ConstPtr: the data is read-only")
    val = tp.coerce_assign(tp.visit(node.args[2]), base.ty.elem, node.args[2], "element")
    tp.pending.append(N.Store(base, idx, val, eviction, loc=tp.loc(node)))
    return CT(None)


# ---- addresses and bits ---------------------------------------------------------------------------
@typing_rule(is_aligned)
def _type_is_aligned(tp, node, _):
    args = node.args
    if len(args) != 2:
        raise tp.error(node, "is_aligned(p, nbytes) takes 2 arguments")
    p = tp.visit(args[0])
    if isinstance(p, CT) or not isinstance(p.ty, (T.PtrType, T.ArrayType)):
        raise tp.error(args[0], "is_aligned() takes a pointer")
    nbytes = tp.ct_eval(args[1], "is_aligned()'s byte count")
    if not (isinstance(nbytes, int) and nbytes > 0 and nbytes & (nbytes - 1) == 0):
        raise tp.error(args[1], f"is_aligned() needs a power of two, got {nbytes!r}")
    return tp.intrinsic(is_aligned, T.bool_, [tp.array_as_ptr(p)], node, nbytes=nbytes)


def _aligned(b, p, nbytes: int):
    """``(ptrtoint p & (nbytes - 1)) == 0``: is_aligned's test and assume_aligned's promise."""
    low = b.and_(b.ptrtoint(p, _I64), ir.Constant(_I64, nbytes - 1))
    return b.icmp_unsigned("==", low, ir.Constant(_I64, 0))


@lowering(is_aligned)
def _lower_is_aligned(lo, e):
    return _aligned(lo.b, lo.expr(e.args[0]), e.attrs["nbytes"])


@typing_rule(assume_aligned)
def _type_assume_aligned(tp, node, _):
    """``pk.assume_aligned(p, nbytes)``: ``p``, which the caller guarantees is a multiple of ``nbytes``
    (a compile-time power of two), as a promise to the optimiser: accesses through it at offsets it can
    see are multiples of ``nbytes`` may then merge into wider ones (two adjacent 8-byte stores into one
    16-byte store). Where the promise is false the behaviour is undefined: test with ``pk.is_aligned``."""
    args = node.args
    if len(args) != 2:
        raise tp.error(node, "assume_aligned(p, nbytes) takes 2 arguments")
    p = tp.visit(args[0])
    if isinstance(p, CT) or not isinstance(p.ty, T.PtrType):
        raise tp.error(args[0], "assume_aligned() takes a pointer")
    nbytes = tp.ct_eval(args[1], "assume_aligned()'s byte count")
    if not (isinstance(nbytes, int) and nbytes > 0 and nbytes & (nbytes - 1) == 0):
        raise tp.error(args[1], f"assume_aligned() needs a power of two, got {nbytes!r}")
    return tp.intrinsic(assume_aligned, p.ty, [p], node, nbytes=nbytes)


@lowering(assume_aligned)
def _lower_assume_aligned(lo, e):
    """``llvm.assume((ptrtoint p & (nbytes - 1)) == 0)``: LLVM's known bits read the pointer's low bits
    from it (the compare is ephemeral and emits no code)."""
    b = lo.b
    p = lo.expr(e.args[0])
    holds = _aligned(b, p, e.attrs["nbytes"])
    fn = b.module.globals.get("llvm.assume")
    if fn is None:
        fn = ir.Function(b.module, ir.FunctionType(ir.VoidType(), [ir.IntType(1)]), "llvm.assume")
    b.call(fn, [holds])
    return p


@typing_rule(bitcast)
def _type_bitcast(tp, node, _):
    """The same bits as another type of the same size; a pointer as a pointer to other elements."""
    args = node.args
    if len(args) != 2:
        raise tp.error(node, "bitcast(x, T) takes 2 arguments")
    v, ty = tp.visit(args[0]), tp.ct_eval(args[1], "the target type of bitcast")
    v = tp.array_as_ptr(tp.materialize(v, node))
    if isinstance(v.ty, T.PtrType) and isinstance(ty, T.PtrType):  # the same address, other elements
        return N.Bitcast(T.PtrType(ty.elem, v.ty.space, v.ty.const or ty.const), v, loc=tp.loc(node))
    if not (isinstance(ty, T.DType) and isinstance(v.ty, T.DType) and ty.bits == v.ty.bits):
        raise tp.error(node, f"bitcast needs types of the same size, got {v.ty!r} and {ty!r}")
    return N.Bitcast(ty, v, loc=tp.loc(node))


# ---- shared and local arrays ----------------------------------------------------------------------
@typing_rule(shared.array, shared.dynamic, local.array)
def _type_array_call(tp, node, fn):
    space = "local" if fn is local.array else "shared"
    raise tp.error(node, f"declare {space} arrays as 'name = pk.{space}.array(shape, dtype)'")


@declaration_rule(shared.array, shared.dynamic, local.array)
def _declare_array(tp, name: str, call: ast.Call, target_node, fn) -> None:
    """``name = pk.shared.array(shape, dtype)`` and its kind: an array of the function, not a value."""
    space = fn.name.split(".")[0]
    if call.keywords:
        raise tp.error(call.keywords[0], f"pk.{fn.name}() takes no keyword arguments")
    redeclared = name in tp.array_names  # allowed once per copy of a pk.static_range body (below)
    if name in tp.locals or redeclared and not tp.in_static_loop:
        raise tp.error(target_node, f"'{name}' is already defined; {space} arrays need their own name")
    if fn is not shared.dynamic:
        if len(call.args) != 2:
            raise tp.error(call, f"pk.{fn.name}(shape, dtype) takes 2 arguments")
        shape = tp.ct_eval(call.args[0], f"the shape of a {space} array")
        shape = (shape,) if isinstance(shape, int) else shape
        if not (isinstance(shape, tuple) and shape and all(isinstance(s, int) and s > 0 for s in shape)):
            raise tp.error(call.args[0], f"a {space} array's shape must be positive ints, got {shape!r}")
        dtype = tp.ct_eval(call.args[1], f"the dtype of a {space} array")
    else:
        if len(call.args) != 1:
            raise tp.error(call, "pk.shared.dynamic(dtype) takes 1 argument")
        if any(t.shape is None for t in tp.arrays.values()):
            raise tp.error(call, "a kernel has one dynamic shared array")
        shape, dtype = None, tp.ct_eval(call.args[0], "the dtype of a shared array")
    if not isinstance(dtype, T.DType):
        raise tp.error(call, f"a {space} array's element type must be a dtype, got {describe(dtype)}")
    ty = T.ArrayType(dtype, shape, space)
    if redeclared:  # the same declaration in the next copy of a static_range body: the same array
        if tp.arrays[name] != ty:
            raise tp.error(target_node, f"'{name}' is already a {tp.arrays[name]!r} array")
        return
    if space == "local" and ty.count * dtype.nbytes > MAX_LOCAL_ARRAY_BYTES:
        raise tp.error(call, f"a local array takes at most {MAX_LOCAL_ARRAY_BYTES} bytes per thread, "
                             f"this one {ty.count * dtype.nbytes}")
    tp.arrays[name] = ty
    tp.array_names[name] = N.ArrayRef(ty, name, loc=tp.loc(call))
