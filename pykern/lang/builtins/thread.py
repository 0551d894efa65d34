"""Where a thread is: ``pk.thread_idx`` and its kind, ``pk.global_id``, ``pk.lane_id``, and the loops
that spread indices over threads (``pk.grid_stride``, ``pk.parallel_range``, whose per-thread tiles
``pk.tile_bytes`` tells) or copy a body at compile time (``pk.static_range``)."""
from __future__ import annotations

import ast

from ...ir import nodes as N
from ...ir import types as T
from ..values import CT
from .core import Builtin, Dim3, TileBytes, attribute_rule, lookup, loop_rule, lowering, typing_rule

thread_idx, block_idx, block_dim, grid_dim = (Dim3(n) for n in ("thread_idx", "block_idx", "block_dim", "grid_dim"))
global_id, lane_id = Builtin("global_id"), Builtin("lane_id")
grid_stride, parallel_range, static_range = Builtin("grid_stride"), Builtin("parallel_range"), Builtin("static_range")
tile_bytes = TileBytes()

#: pk.static_range copies its body once per value: a bound on the copies (of a loop, and of nested
#: loops' innermost body in all) keeps compile time sane
MAX_STATIC_UNROLL = 1024
_UNBOUND = object()


# ---- ids -----------------------------------------------------------------------------------------
def dim(which: Dim3, axis: int, loc: N.Loc | None = None) -> N.Intrinsic:
    """``which.x`` (axis 0), ``.y`` or ``.z``: a u32."""
    return N.Intrinsic(T.u32, lookup(which), [], {"axis": axis}, loc=loc)


@attribute_rule(thread_idx, block_idx, block_dim, grid_dim)
def _type_dim(tp, node: ast.Attribute, which: Dim3):
    axis = "xyz".find(node.attr)
    if axis < 0 or len(node.attr) != 1:
        raise tp.error(node, f"{which.name} has attributes x, y, z; not '{node.attr}'")
    return dim(which, axis, tp.loc(node))


@lowering(thread_idx, block_idx, block_dim, grid_dim)
def _lower_dim(lo, e):
    """Each of the four is the target frame's method of the same name (``KernelFrame.thread_idx`` ...)."""
    return getattr(lo.frame, e.builtin.name)(e.attrs["axis"])


def global_index(tp, node) -> N.Expr:
    """``block_idx.x * block_dim.x + thread_idx.x`` as a u64 (``pk.global_id()``, grid-stride starts)."""
    def idx(which):
        return N.Cast(T.u64, dim(which, 0, tp.loc(node)), loc=tp.loc(node))
    return N.BinOp(T.u64, "add", N.BinOp(T.u64, "mul", idx(block_idx), idx(block_dim)), idx(thread_idx),
                   loc=tp.loc(node))


@typing_rule(global_id)
def _type_global_id(tp, node, _):
    tp.args_exact(node, node.args, 0, "global_id")
    return global_index(tp, node)


@typing_rule(lane_id)
def _type_lane_id(tp, node, _):
    tp.args_exact(node, node.args, 0, "lane_id")
    return tp.intrinsic(lane_id, T.u32, [], node)


@lowering(lane_id)
def _lower_lane_id(lo, e):
    return lo.frame.lane_id()


# ---- loops ---------------------------------------------------------------------------------------
@typing_rule(grid_stride, parallel_range)
def _type_grid_stride_call(tp, node, _):
    raise tp.error(node, "pk.grid_stride() and pk.parallel_range() can only be the iterable of a for loop")


@typing_rule(static_range)
def _type_static_range_call(tp, node, _):
    raise tp.error(node, "pk.static_range() can only be the iterable of a for loop")


@loop_rule(grid_stride)
def _grid_stride_loop(tp, node: ast.For, _):
    """``for i in pk.grid_stride(n)``: every index in [0, n) once, from the global id in steps of the grid."""
    it = node.iter
    tp.pending = []
    if it.keywords:
        raise tp.error(it.keywords[0], "pk.grid_stride() takes no keyword arguments")
    if len(it.args) != 1:
        raise tp.error(it, "pk.grid_stride(n) takes 1 argument")
    stop = tp.coerce(tp.visit(it.args[0]), T.u64, it.args[0])
    start = global_index(tp, it)
    step = N.BinOp(T.u64, "mul", N.Cast(T.u64, dim(block_dim, 0)), N.Cast(T.u64, dim(grid_dim, 0)))
    return tp.counted_loop(node, start, stop, step, 1, grid=True)


@loop_rule(parallel_range)
def _parallel_range_loop(tp, node: ast.For, _):
    """``for i in pk.parallel_range(lo, hi, worker, workers, descending=False)``: [lo, hi) shared out
    among ``workers``, this one starting at ``worker``."""
    it = node.iter
    tp.pending = []
    if len(it.args) != 4 or any(k.arg != "descending" for k in it.keywords):
        raise tp.error(it, "pk.parallel_range(lo, hi, worker, workers, descending=False) takes 4 "
                           "arguments and one keyword")
    descending = False
    for k in it.keywords:
        descending = tp.ct_eval(k.value, "parallel_range()'s descending")
        if not isinstance(descending, bool):
            raise tp.error(k.value, f"descending= takes a compile-time bool, got {descending!r}")
    lo, hi, worker, workers = (tp.visit(a) for a in it.args)
    typed = [v for v in (lo, hi, worker, workers) if not isinstance(v, CT)]
    ty = typed[0].ty if typed else T.u32
    for v in typed[1:]:
        ty = tp.promote(N.Const(ty, 0), v, it, "parallel_range()")
    if not (isinstance(ty, T.DType) and ty.is_int and not ty.is_signed):
        raise tp.error(it, f"parallel_range() takes unsigned integers, got {ty!r}")
    lo, hi, start, step = (tp.coerce(v, ty, a) for v, a in zip((lo, hi, worker, workers), it.args))
    stop = N.BinOp(ty, "sub", hi, lo, loc=tp.loc(it))
    return tp.counted_loop(node, start, stop, step, 1, grid=True, offset=lo, descending=descending)


@loop_rule(static_range)
def _static_loop(tp, node: ast.For, _) -> list[N.Stmt]:
    """``for k in pk.static_range(...)``: the body once per value, with ``k`` a compile-time int
    (so ``a[k]`` of a local array has a constant index, and the array can live in registers)."""
    it, name = node.iter, node.target.id
    if it.keywords or not 1 <= len(it.args) <= 3:
        raise tp.error(it, "pk.static_range() takes 1 to 3 positional arguments")
    bounds = [tp.ct_eval(a, "a pk.static_range() bound") for a in it.args]
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in bounds):
        raise tp.error(it, f"pk.static_range() takes ints, got {tuple(bounds)!r}")
    if len(bounds) == 3 and bounds[2] == 0:
        raise tp.error(it.args[2], "pk.static_range() step must not be zero")
    values = range(*bounds)
    if len(values) > MAX_STATIC_UNROLL:
        raise tp.error(it, f"pk.static_range() unrolls at most {MAX_STATIC_UNROLL} copies, got {len(values)}")
    copies = tp.static_copies * max(1, len(values))  # nested loops multiply
    if copies > MAX_STATIC_UNROLL:
        raise tp.error(it, f"nested pk.static_range() loops unroll at most {MAX_STATIC_UNROLL} copies of "
                           f"the innermost body in all, these give {copies}")
    if name in tp.locals or name in tp.array_names:
        raise tp.error(node.target, f"'{name}' is a run-time variable; a pk.static_range() loop needs "
                                    f"a fresh name")
    saved = (tp.bindings.get(name, _UNBOUND), tp.loop_depth, tp.in_static_loop, set(tp.static_vars),
             tp.static_copies)
    tp.loop_depth, tp.in_static_loop, tp.static_copies = 0, True, copies
    tp.static_vars.add(name)
    out: list[N.Stmt] = []
    try:
        for v in values:
            tp.bindings[name] = v
            out.extend(tp.block(node.body))
    finally:
        old, tp.loop_depth, tp.in_static_loop, tp.static_vars, tp.static_copies = saved
        if old is _UNBOUND:
            tp.bindings.pop(name, None)
        else:
            tp.bindings[name] = old
    return out
