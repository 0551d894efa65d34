"""The lowering: typed IR -> LLVM IR through ``llvmlite.ir``, written once for every target.

Target-specific spelling (ids, barriers, shuffles, atomics, shared memory, the kernel's own
declaration and return) goes through the ``KernelFrame`` the target hands out; nothing here asks
which target it is. Built-ins are lowered by their registry entries (``pykern.lang.builtins``), which
this lowering calls with itself as their context (``expr_Intrinsic``). Locals live in allocas (in
the target's private address space) and become SSA values in the optimiser's mem2reg. Device
functions are inlined at their call sites, so built-ins inside them work on every target, including
the host's coroutine threads.
"""
from __future__ import annotations

from llvmlite import ir
from llvmlite.ir import _utils

from ..errors import CompileError
from ..ir import nodes as N
from ..ir import types as T
from ..targets.base import KernelFrame, KernelSignature, Target
from . import convert as C
from .convert import F32, F64, I1, I64, storage_type, value_type
from ..targets.llvm_ext import BFLOAT
from .tiles import GridTiles

_FLOAT_OPS = {"add": "fadd", "sub": "fsub", "mul": "fmul", "div": "fdiv", "mod": "frem"}
_INT_OPS = {"add": "add", "sub": "sub", "mul": "mul", "and": "and_", "or": "or_", "xor": "xor"}
_ICMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}

class _Names(_utils.NameScope):
    """llvmlite's name scope, the same names in fewer calls: every instruction registers its name
    (an unnamed one gets the next ``.N``), 800,000 of them in unary's module."""

    def register(self, name, deduplicate=False):
        used = self._useset
        if name in used:  # always for an unnamed value ("" is taken): deduplicate's loop, inline
            if not deduplicate:
                raise _utils.DuplicatedNameError(name)
            counts, basename = self._basenamemap, name
            while name in used:
                ident = counts[basename] + 1
                counts[basename] = ident
                name = f"{basename}.{ident}"
        used.add(name)
        return name

    def deduplicate(self, name):
        used, counts = self._useset, self._basenamemap
        basename = name
        while name in used:
            ident = counts[basename] + 1
            counts[basename] = ident
            name = f"{basename}.{ident}"
        return name


def kernel_signature(fn: N.Function, max_block_size: int, min_blocks_per_sm: int = 0) -> KernelSignature:
    params = tuple((name, ty.nbytes, ty.align, "ptr" if isinstance(ty, T.PtrType) else "value")
                   for name, ty in fn.params)
    return KernelSignature(fn.name, params, max_block_size, min_blocks_per_sm)


def lower_kernel(target: Target, module: ir.Module, fn: N.Function, max_block_size: int = 1024,
                 min_blocks_per_sm: int = 0) -> KernelSignature:
    """Add kernel ``fn`` to ``module``; returns its launch signature."""
    sig = kernel_signature(fn, max_block_size, min_blocks_per_sm)
    param_types = [FunctionLowering.llvm_type(target, ty, memory=True) for _, ty in fn.params]
    frame = target.begin_kernel(module, sig, param_types, fn.uses_sync)
    scope = frame.builder.function.scope
    if type(scope) is _utils.NameScope:
        scope.__class__ = _Names  # the same state: the names given so far stay taken
    for arg, (_, ty) in zip(frame.args, fn.params):
        if isinstance(ty, T.PtrType) and ty.const:
            # ConstPtr is C's `const T* __restrict__`: nothing writes the data during the kernel, so
            # loads may be reordered past stores and use read-only caches (ld.global.nc on NVIDIA)
            for attr in ("noalias", "readonly", "captures(none)"):
                set.add(arg.attributes, attr)
    FunctionLowering(target, frame).lower_kernel_body(fn)
    frame.finish()
    return sig


def ssa_locals(fn: N.Function) -> frozenset[str]:
    """The variables of ``fn`` that live as plain SSA values rather than in allocas: those assigned
    only by statements of the function's own top level (not inside a run-time ``if`` or loop; a
    parameter counts as assigned on entry), never a loop variable, never a global pointer (grid-stride
    tiles swap those for aligned copies in their slots). A read takes the value of the assignment
    lowered last.

    Sound because the flow check (``lang/flow.py``) has proved every reachable read follows an
    assignment on every path, and a top-level statement dominates everything lowered after it: the
    last one lowered before a read is the one that reaches it. (``pk.static_range`` copies and
    compile-time ``if`` branches are top-level statements by then.) The point is size: an inlined
    device function's parameters and locals were an alloca, a zeroing store, a store and loads
    each, which LLVM's mem2reg removed again; stdlib modules were megabytes of them, paid for in
    lowering, rendering, parsing and the first passes. Used for inlined device functions."""
    cached = getattr(fn, "_ssa_locals", None)
    if cached is not None:
        return cached
    nested: set[str] = set()
    for s in fn.body:
        if isinstance(s, (N.If, N.While, N.ForRange)):
            for node in N.walk([s]):
                if isinstance(node, N.Assign):
                    nested.add(node.name)
                elif isinstance(node, N.ForRange):
                    nested.add(node.var)  # rebound by the loop itself
    out = frozenset(name for name, ty in fn.locals.items() if name not in nested
                    and not (isinstance(ty, T.PtrType) and ty.space == "global"))
    fn._ssa_locals = out
    return out


class FunctionLowering(GridTiles):
    def __init__(self, target: Target, frame: KernelFrame):
        self.target, self.frame = target, frame
        self.scope: dict[str, tuple[ir.Value, T.Type]] = {}
        #: variables assigned at the top level only (``ssa_locals``): their value itself, no alloca
        self.values: dict[str, tuple[ir.Value | None, T.Type]] = {}
        self.loops: list[tuple[ir.Block, ir.Block]] = []
        self.ret_target: tuple[ir.Block, ir.Value | None] | None = None
        self.shared: dict[str, ir.Value] = {}
        self.shared_types: dict[str, T.ArrayType] = {}
        self.dynamic_shared: ir.Value | None = None
        self.loc: N.Loc | None = None

    @property
    def b(self) -> ir.IRBuilder:
        return self.frame.builder

    @staticmethod
    def llvm_type(target: Target, ty: T.Type, memory: bool = False) -> ir.Type:
        if isinstance(ty, T.PtrType):
            return ir.PointerType(addrspace={"shared": target.shared_as, "local": target.private_as}.get(
                ty.space, target.global_as))
        if isinstance(ty, T.DType):
            return storage_type(ty) if memory else value_type(ty)
        if isinstance(ty, T.TupleType):  # a device function's several results (never in memory)
            return ir.LiteralStructType([FunctionLowering.llvm_type(target, t) for t in ty.items])
        if isinstance(ty, T.FragmentType):  # pk.mma's per-lane share of a tile: the target's layout
            return target.fragment_type(ty)
        raise TypeError(ty)

    def ltype(self, ty: T.Type) -> ir.Type:
        return self.llvm_type(self.target, ty)

    def error(self, msg: str, loc: N.Loc | None = None) -> CompileError:
        return CompileError(msg, loc or self.loc)

    # ------------------------------------------------------------------ functions
    def lower_kernel_body(self, fn: N.Function) -> None:
        # the kernel's own variables keep their allocas: as SSA values they changed LLVM's early
        # SimplifyCFG (which runs before SROA) enough to cost sm_90 spills in the gather_* kernels
        # for a few kilobytes of IR (docs/cli.md)
        self.bind_locals(fn, [self.from_memory(a, ty) for a, (_, ty) in zip(self.frame.args, fn.params)], ssa=False)
        self.stmts(fn.body)
        if not self.b.block.is_terminated:
            self.frame.ret()

    def bind_locals(self, fn: N.Function, args: list[ir.Value], ssa: bool = True) -> None:
        """Slots (or, with ``ssa``, SSA values: ``ssa_locals``) for ``fn``'s variables, the parameters
        bound to ``args``."""
        ssa = ssa_locals(fn) if ssa else frozenset()
        for name, ty in fn.locals.items():
            if name in ssa:
                self.values[name] = (None, ty)
                continue
            slot = self.frame.alloca(self.ltype(ty), name)
            self.frame.entry_builder.store(self.zero(ty), slot)
            self.scope[name] = (slot, ty)
        for name, ty in fn.arrays.items():  # a local array per function instance: inlined calls don't share
            if ty.space == "local":
                self.scope[name] = (self.frame.alloca(ir.ArrayType(storage_type(ty.elem), ty.count), name), ty)
        for (name, ty), value in zip(fn.params, args):
            if name in self.values:
                self.values[name] = (value, ty)
            else:
                self.b.store(value, self.scope[name][0])

    def zero(self, ty: T.Type) -> ir.Constant:
        lt = self.ltype(ty)
        if isinstance(ty, (T.PtrType, T.TupleType, T.FragmentType)):
            return ir.Constant(lt, None)  # null, zeroinitializer
        return ir.Constant(lt, 0.0 if isinstance(lt, (ir.HalfType, ir.FloatType, ir.DoubleType)) else 0)

    def from_memory(self, v: ir.Value, ty: T.Type) -> ir.Value:
        return self.b.icmp_unsigned("!=", v, ir.Constant(v.type, 0)) if ty == T.bool_ else v

    def to_memory(self, v: ir.Value, ty: T.Type) -> ir.Value:
        return self.b.zext(v, ir.IntType(8)) if ty == T.bool_ else v

    def inline_call(self, call: N.Call) -> ir.Value | None:
        fn = call.func
        args = [self.expr(a) for a in call.args]
        saved = (self.scope, self.values, self.loops, self.ret_target)
        exit_block = self.b.append_basic_block(f"{fn.name}.exit")
        ret_slot = self.frame.alloca(self.ltype(fn.ret), f"{fn.name}.ret") if fn.ret != T.void else None
        if ret_slot is not None:
            self.frame.entry_builder.store(self.zero(fn.ret), ret_slot)
        self.scope, self.values, self.loops, self.ret_target = {}, {}, [], (exit_block, ret_slot)
        self.bind_locals(fn, args)
        self.stmts(fn.body)
        if not self.b.block.is_terminated:
            self.b.branch(exit_block)
        self.scope, self.values, self.loops, self.ret_target = saved
        self.b.position_at_end(exit_block)
        return self.b.load(ret_slot) if ret_slot is not None else None

    # ------------------------------------------------------------------ statements
    def stmts(self, body: list[N.Stmt]) -> None:
        for s in body:
            if self.b.block.is_terminated:  # code after break/continue/return is unreachable
                self.b.position_at_end(self.b.append_basic_block("dead"))
            self.loc = s.loc or self.loc
            getattr(self, "stmt_" + type(s).__name__)(s)

    def stmt_Assign(self, s: N.Assign):
        if s.name in self.values:
            self.values[s.name] = (self.expr(s.value), self.values[s.name][1])
            return
        self.b.store(self.expr(s.value), self.scope[s.name][0])

    def stmt_ExprStmt(self, s: N.ExprStmt):
        self.expr(s.value)

    def stmt_Store(self, s: N.Store):
        ptr, elem = self.address(s.ptr, s.index)
        value = self.to_memory(self.expr(s.value), elem)
        if not self.defer_store(s, ptr, value, elem):
            self.store_element(s, ptr, value, elem)

    def store_element(self, s: N.Store, ptr: ir.Value, value: ir.Value, elem) -> None:
        """``s``'s store of ``value`` at ``ptr`` (now, or after a tile's copies: ``defer_store``)."""
        self.guarded(ptr, elem, lambda: self.memory_store(value, ptr, s.eviction), s.ptr.ty.space)

    def stmt_If(self, s: N.If):
        cond = self.expr(s.cond)
        then_bb = self.b.append_basic_block("then")
        else_bb = self.b.append_basic_block("else") if s.orelse else None
        merge = self.b.append_basic_block("endif")
        self.b.cbranch(cond, then_bb, else_bb or merge)
        for bb, body in ((then_bb, s.body), (else_bb, s.orelse)):
            if bb is None:
                continue
            self.b.position_at_end(bb)
            self.stmts(body)
            if not self.b.block.is_terminated:
                self.b.branch(merge)
        self.b.position_at_end(merge)

    def stmt_While(self, s: N.While):
        head, body, done = (self.b.append_basic_block(n) for n in ("while.cond", "while.body", "while.end"))
        self.b.branch(head)
        self.b.position_at_end(head)
        self.b.cbranch(self.expr(s.cond), body, done)
        self.loop_body(body, head, done, s.body)
        self.b.position_at_end(done)

    def loop_body(self, body: ir.Block, cont: ir.Block, done: ir.Block, stmts: list[N.Stmt]) -> None:
        self.b.position_at_end(body)
        self.loops.append((cont, done))
        self.stmts(stmts)
        self.loops.pop()
        if not self.b.block.is_terminated:
            self.b.branch(cont)

    def stmt_ForRange(self, s: N.ForRange):
        ilp = self.tile_width(s) if s.grid else 1
        offset = self.expr(s.offset) if s.offset is not None else None
        if ilp > 1:
            return self.grid_tiles(s, ilp, offset)
        ty = s.start.ty
        start, stop, step = self.expr(s.start), self.expr(s.stop), self.expr(s.step)
        counter = self.frame.alloca(self.ltype(ty), s.var + ".iter")  # Python: rebinding the variable
        self.b.store(start, counter)                                   # does not change the iteration
        head, body, step_bb, done = (self.b.append_basic_block(n) for n in ("for.cond", "for.body", "for.step", "for.end"))
        self.b.branch(head)
        self.b.position_at_end(head)
        i = self.b.load(counter)
        cmp = self.b.icmp_signed if ty.is_signed else self.b.icmp_unsigned
        if s.step_sign > 0:
            more = cmp("<", i, stop)
        elif s.step_sign < 0:
            more = cmp(">", i, stop)
        else:
            up = self.b.icmp_signed(">", step, ir.Constant(step.type, 0))
            more = self.b.select(up, cmp("<", i, stop), cmp(">", i, stop))
        self.b.cbranch(more, body, done)
        self.b.position_at_end(body)
        if s.descending:  # counted i stands for stop - 1 - i
            i = self.b.sub(self.b.sub(stop, ir.Constant(stop.type, 1)), i)
        self.b.store(i if offset is None else self.b.add(offset, i), self.scope[s.var][0])
        self.loop_body(body, step_bb, done, s.body)
        self.b.position_at_end(step_bb)
        self.b.store(self.b.add(self.b.load(counter), step), counter)
        self.b.branch(head)
        self.b.position_at_end(done)

    def stmt_Break(self, s):
        self.b.branch(self.loops[-1][1])

    def stmt_Continue(self, s):
        self.b.branch(self.loops[-1][0])

    def stmt_Return(self, s: N.Return):
        if self.ret_target is None:
            self.frame.ret()
            return
        exit_block, slot = self.ret_target
        if s.value is not None:
            self.b.store(self.expr(s.value), slot)
        self.b.branch(exit_block)

    # ------------------------------------------------------------------ expressions
    def expr(self, e: N.Expr) -> ir.Value:
        if e.loc is not None:
            self.loc = e.loc
        return getattr(self, "expr_" + type(e).__name__)(e)

    def expr_Const(self, e: N.Const):
        if isinstance(e.ty, T.PtrType):
            return ir.Constant(self.ltype(e.ty), None)
        ty = e.ty
        if ty.is_bool:
            return ir.Constant(I1, int(e.value))
        if ty.is_int:
            return ir.Constant(value_type(ty), e.value & ((1 << ty.bits) - 1))
        if ty in (T.f32, T.f64):
            return ir.Constant(value_type(ty), e.value)
        bits = int(ty.np.type(e.value).view(f"u{ty.nbytes}"))  # exact host rounding (ml_dtypes)
        if ty is T.f16:
            return ir.Constant(C.F16, float(ty.np.type(e.value)))
        return ir.Constant(value_type(ty), bits)

    def expr_Var(self, e: N.Var):
        held = self.values.get(e.name)
        if held is not None:
            # None: a read the flow check let through because no path reaches it (code after a
            # return); any value will do there
            return held[0] if held[0] is not None else self.zero(held[1])
        return self.b.load(self.scope[e.name][0])

    def expr_ArrayRef(self, e: N.ArrayRef):
        if e.ty.space == "local":
            return self.scope[e.name][0]
        if e.ty.shape is None:
            if self.dynamic_shared is None:
                self.dynamic_shared = self.frame.dynamic_shared(16)
            return self.dynamic_shared
        ptr = self.shared.get(e.name)
        if ptr is None:
            total = e.ty.count * e.ty.elem.nbytes + sum(t.count * t.elem.nbytes for t in self.shared_types.values())
            if total > self.target.max_shared_bytes:
                raise self.error(f"shared arrays need {total} bytes; {self.target.name} {self.target.arch} "
                                 f"allows {self.target.max_shared_bytes}", e.loc)
            self.shared_types[e.name] = e.ty
            align = max(16, e.ty.elem.nbytes)
            ptr = self.frame.shared_array(e.name, storage_type(e.ty.elem), e.ty.count, align)
            self.shared[e.name] = ptr
        return ptr

    def address(self, base: N.Expr, index: N.Expr) -> tuple[ir.Value, T.DType]:
        ptr = self.expr(base)
        elem = base.ty.elem
        return self.b.gep(ptr, [self.index64(index)], source_etype=storage_type(elem)), elem

    def index64(self, index: N.Expr) -> ir.Value:
        v = self.expr(index)
        if v.type.width < 64:
            v = (self.b.sext if index.ty.is_signed else self.b.zext)(v, I64)
        return v

    def guarded(self, ptr: ir.Value, elem: T.DType, access, space: str = "global"):
        if space == "local":  # the thread's own array: no launch buffer to check it against
            return access()
        return self.guarded_bytes(ptr, elem.nbytes, access)

    def guarded_bytes(self, ptr: ir.Value, nbytes: int, access):
        """``access()`` when the bounds check of ``nbytes`` at ``ptr`` passes (always, unchecked); a
        load that is skipped reads as zero."""
        ok = self.frame.guard(ptr, nbytes, self.loc)
        if ok is None:
            return access()
        go, join = self.b.append_basic_block("access"), self.b.append_basic_block("access.end")
        pre = self.b.block
        self.b.cbranch(ok, go, join)
        self.b.position_at_end(go)
        value = access()
        go_end = self.b.block
        self.b.branch(join)
        self.b.position_at_end(join)
        if value is None or isinstance(value, ir.instructions.StoreInstr):
            return None
        phi = self.b.phi(value.type)
        phi.add_incoming(value, go_end)
        phi.add_incoming(ir.Constant(value.type, None), pre)
        return phi

    def expr_Load(self, e: N.Load):
        staged = self.staged_load(e)
        if staged is not None:
            return staged
        ptr, elem = self.address(e.ptr, e.index)
        return self.from_memory(self.guarded(ptr, elem, lambda: self.memory_load(ptr, elem, e.eviction, e.align),
                                             e.ptr.ty.space), elem)

    def memory_load(self, ptr: ir.Value, elem: T.DType, eviction: str, align: int = 0) -> ir.Value:
        """A load; under ``pk.load``'s cache policy, the target's (``Target.policy_load``); under its
        ``align=``, one LLVM splits where the target needs aligned words (NVPTX: halves or bytes)."""
        ty = storage_type(elem)
        if eviction:
            return self.target.policy_load(self.b, ptr, ty, eviction)
        return self.b.load(ptr, typ=ty, align=align or None)

    def memory_store(self, value: ir.Value, ptr: ir.Value, eviction: str) -> None:
        if eviction:
            self.target.policy_store(self.b, value, ptr, eviction)
        else:
            self.b.store(value, ptr)

    def expr_PtrAdd(self, e: N.PtrAdd):
        return self.b.gep(self.expr(e.ptr), [self.index64(e.index)], source_etype=storage_type(e.ty.elem))

    def expr_IsNull(self, e: N.IsNull):
        p = self.expr(e.ptr)
        return self.b.icmp_unsigned("!=" if e.negate else "==", p, ir.Constant(p.type, None))

    def expr_Cast(self, e: N.Cast):
        v = self.expr(e.operand)
        if isinstance(e.ty, T.PtrType):  # shared array used as a pointer: same address
            return v
        return C.convert(self.b, v, e.operand.ty, e.ty, self.target)

    def expr_Bitcast(self, e: N.Bitcast):
        if isinstance(e.ty, T.PtrType):  # opaque pointers: the element type lives in the loads
            return self.expr(e.operand)
        return self.b.bitcast(self.expr(e.operand), value_type(e.ty))

    def expr_BinOp(self, e: N.BinOp):
        return self.arith(e.op, self.expr(e.lhs), self.expr(e.rhs), e.ty)

    def arith(self, op: str, a: ir.Value, b: ir.Value, ty: T.DType) -> ir.Value:
        bld = self.b
        if ty.is_float:
            if ty.is_storage_float:
                wide = self.arith(op, C.to_f32(bld, a, ty), C.to_f32(bld, b, ty), T.f32)
                return C.from_f32(bld, wide, ty, self.target)
            if op == "floordiv":
                return self.call_intrinsic("floor", [bld.fdiv(a, b)])
            if op in ("minimum", "maximum"):
                return self.call_intrinsic(op, [a, b])
            return getattr(bld, _FLOAT_OPS[op])(a, b)
        if op in _INT_OPS:
            return getattr(bld, _INT_OPS[op])(a, b)
        if op in ("minimum", "maximum"):
            cmp = bld.icmp_signed if ty.is_signed else bld.icmp_unsigned
            return bld.select(cmp("<" if op == "minimum" else ">", a, b), a, b)
        if op in ("shl", "shr"):
            amount = bld.and_(b, ir.Constant(b.type, ty.bits - 1))  # no poison for large shifts
            if op == "shl":
                return bld.shl(a, amount)
            return (bld.ashr if ty.is_signed else bld.lshr)(a, amount)
        if op in ("floordiv", "mod"):
            return self.int_division(op, a, b, ty)
        raise self.error(f"operator {op} is not defined for {ty!r}")

    def int_division(self, op, a, b, ty: T.DType):
        """C division with no trap: x // 0 is all ones, x % 0 is x, MIN // -1 wraps to MIN."""
        bld = self.b
        t = a.type
        zero = bld.icmp_unsigned("==", b, ir.Constant(t, 0))
        bad = zero
        if ty.is_signed:
            lo = ir.Constant(t, -(1 << (ty.bits - 1)))
            ovf = bld.and_(bld.icmp_signed("==", a, lo), bld.icmp_signed("==", b, ir.Constant(t, -1)))
            bad = bld.or_(zero, ovf)
        safe = bld.select(bad, ir.Constant(t, 1), b)
        if op == "floordiv":
            q = (bld.sdiv if ty.is_signed else bld.udiv)(a, safe)
            return bld.select(zero, ir.Constant(t, -1 & ((1 << ty.bits) - 1)), q)
        r = (bld.srem if ty.is_signed else bld.urem)(a, safe)
        return bld.select(zero, a, r)

    def expr_UnaryOp(self, e: N.UnaryOp):
        v = self.expr(e.operand)
        ty = e.ty
        if e.op == "not":
            return self.b.xor(v, ir.Constant(I1, 1))
        if e.op == "invert":
            return self.b.xor(v, ir.Constant(v.type, -1))
        if ty.is_int:
            return self.b.sub(ir.Constant(v.type, 0), v)
        if ty in (T.bf16, T.f8e4m3):  # flip the sign bit: exact, NaN-preserving
            return self.b.xor(v, ir.Constant(v.type, 1 << (ty.bits - 1)))
        # fneg: the sign flip everywhere but NVIDIA, whose neg.f32/f64 returns the canonical NaN for a
        # NaN (an integer xor would not help: LLVM folds it back into fneg)
        return self.b.fneg(v)

    def expr_Compare(self, e: N.Compare):
        a, b, ty = self.expr(e.lhs), self.expr(e.rhs), e.lhs.ty
        if ty.is_float:
            if ty.is_storage_float:
                a, b = C.to_f32(self.b, a, ty), C.to_f32(self.b, b, ty)
            if e.op == "ne":
                return self.b.fcmp_unordered("!=", a, b)
            return self.b.fcmp_ordered(_ICMP[e.op], a, b)
        cmp = self.b.icmp_signed if ty.is_signed else self.b.icmp_unsigned
        return cmp(_ICMP[e.op], a, b)

    def lazy_select(self, cond: ir.Value, then, other, name: str) -> ir.Value:
        """``then()`` or ``other()`` evaluated only on the path taken; a phi joins them."""
        t_bb, o_bb, join = (self.b.append_basic_block(f"{name}.{n}") for n in ("then", "else", "end"))
        self.b.cbranch(cond, t_bb, o_bb)
        values = []
        for bb, fn in ((t_bb, then), (o_bb, other)):
            self.b.position_at_end(bb)
            values.append((fn(), self.b.block))
            self.b.branch(join)
        self.b.position_at_end(join)
        phi = self.b.phi(values[0][0].type)
        for v, bb in values:
            phi.add_incoming(v, bb)
        return phi

    def expr_Logical(self, e: N.Logical):
        a = self.expr(e.lhs)
        if e.op == "and":
            return self.lazy_select(a, lambda: self.expr(e.rhs), lambda: ir.Constant(I1, 0), "and")
        return self.lazy_select(a, lambda: ir.Constant(I1, 1), lambda: self.expr(e.rhs), "or")

    def expr_IfExp(self, e: N.IfExp):
        return self.lazy_select(self.expr(e.cond), lambda: self.expr(e.then), lambda: self.expr(e.other), "ifexp")

    def expr_Call(self, e: N.Call):
        return self.inline_call(e)

    def expr_MakeTuple(self, e: N.MakeTuple):
        out = ir.Constant(self.ltype(e.ty), ir.Undefined)
        for k, item in enumerate(e.items):
            out = self.b.insert_value(out, self.expr(item), k)
        return out

    def expr_TupleItem(self, e: N.TupleItem):
        return self.b.extract_value(self.expr(e.value), e.index)

    # ------------------------------------------------------------------ built-ins
    def expr_Intrinsic(self, e: N.Intrinsic):
        """A built-in: its registry entry's lowering (``pykern.lang.builtins``) emits it."""
        return e.builtin.lower(self, e)

    # helpers the built-ins' lowerings share with the operators
    #: LLVM's bfloat, for the built-ins that hand bf16 to LLVM natively (atomics where the arch has them)
    bfloat = BFLOAT

    def call_intrinsic(self, name: str, args: list[ir.Value]) -> ir.Value:
        """``llvm.<name>.<type of the first argument>`` on ``args`` (declared on first use)."""
        suffix = {F32: "f32", F64: "f64"}[args[0].type] if args[0].type in (F32, F64) else str(args[0].type)
        full = f"llvm.{name}.{suffix}"
        fn = self.b.module.globals.get(full)
        if fn is None:
            fn = ir.Function(self.b.module, ir.FunctionType(args[0].type, [a.type for a in args]), full)
        return self.b.call(fn, args)

    def widen(self, v: ir.Value, ty: T.DType) -> ir.Value:
        """A value of ``ty`` as an f32 where ``ty`` is a storage float (f16, bf16, f8), else as it is."""
        return C.to_f32(self.b, v, ty) if ty.is_storage_float else v

    def narrow(self, v: ir.Value, ty: T.DType) -> ir.Value:
        """An f32 rounded to the storage float ``ty``, as every arithmetic result of ``ty`` is."""
        return C.from_f32(self.b, v, ty, self.target)

    def float_op(self, e: N.Intrinsic, fn) -> ir.Value:
        """Apply ``fn`` to the operands computed in f32/f64 and round back to the storage type."""
        ty = e.args[0].ty
        args = [self.expr(a) for a in e.args]
        if ty.is_storage_float:
            return self.narrow(fn([self.widen(a, ty) for a in args]), ty)
        return fn(args)
