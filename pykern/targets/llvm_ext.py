"""Small extensions of ``llvmlite.ir`` for what its builder cannot spell.

llvmlite 0.50's builder has no address space on ``alloca`` (AMDGPU needs addrspace(5)) and no
``syncscope`` on atomics (GPUs need workgroup/agent scopes). These subclasses print the right text;
the verifier checks them like any other instruction.
"""
from __future__ import annotations

from llvmlite import ir
from llvmlite.ir import instructions as ins


class _AllocaAS(ins.AllocaInstr):
    def __init__(self, parent, typ, count, name, addrspace):
        super().__init__(parent, typ, count, name)
        self.type = ir.PointerType(addrspace=addrspace)
        self._as = addrspace

    def descr(self, buf):
        super().descr(buf)
        if self._as:
            buf[-1] = buf[-1].rstrip("\n") + f", addrspace({self._as})\n"


def alloca(builder: ir.IRBuilder, ty: ir.Type, addrspace: int, name: str = "") -> ir.Value:
    instr = _AllocaAS(builder.block, ty, None, name, addrspace)
    builder._insert(instr)
    return instr


class _AtomicRMW(ins.AtomicRMW):
    def __init__(self, parent, op, ptr, val, ordering, name, scope):
        super().__init__(parent, op, ptr, val, ordering, name)
        self.scope = scope

    def descr(self, buf):
        scope = f' syncscope("{self.scope}")' if self.scope else ""
        buf.append(f"atomicrmw {self.operation} {self.operands[0].type} {self.operands[0].get_reference()}, "
                   f"{self.operands[1].type} {self.operands[1].get_reference()}{scope} {self.ordering}"
                   f"{self._stringify_metadata(leading_comma=True)}\n")


class _CmpXchg(ins.CmpXchg):
    def __init__(self, parent, ptr, cmp, val, ordering, failordering, name, scope):
        super().__init__(parent, ptr, cmp, val, ordering, failordering, name)
        self.scope = scope

    def descr(self, buf):
        ptr, cmpval, val = self.operands
        scope = f' syncscope("{self.scope}")' if self.scope else ""
        buf.append(f"cmpxchg {ptr.type} {ptr.get_reference()}, {cmpval.type} {cmpval.get_reference()}, "
                   f"{val.type} {val.get_reference()}{scope} {self.ordering} {self.failordering}"
                   f"{self._stringify_metadata(leading_comma=True)}\n")


def atomic_rmw(builder, op, ptr, val, ordering, scope=None, metadata=None):
    instr = _AtomicRMW(builder.block, op, ptr, val, ordering, "", scope)
    builder._insert(instr)
    for k, v in (metadata or {}).items():
        instr.set_metadata(k, v)
    return instr


def cmpxchg(builder, ptr, cmp, val, ordering, scope=None, metadata=None):
    instr = _CmpXchg(builder.block, ptr, cmp, val, ordering, ordering, "", scope)
    builder._insert(instr)
    for k, v in (metadata or {}).items():
        instr.set_metadata(k, v)
    return instr


def intrinsic(module: ir.Module, name: str, ret: ir.Type, args: list[ir.Type], attrs=()) -> ir.Function:
    """Declare (once) and return the function ``name`` in ``module``."""
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(ret, args), name)
        for a in attrs:
            fn.attributes.add(a)
    return fn


def _named_type(spelling: str, doc: str, **attrs) -> type:
    """An ``ir.Type`` that prints as ``spelling``: a type llvmlite 0.50 lacks (equal to any other of it)."""
    return type(f"{spelling.capitalize()}Type", (ir.Type,), {
        "__doc__": doc, "_to_string": lambda self: spelling, "__eq__": lambda self, other: type(other) is type(self),
        "__hash__": lambda self: hash(spelling), **attrs})


TokenType = _named_type("token", "LLVM's ``token`` type (coroutine intrinsics use it).")


class _TokenNone(ir.Constant):
    def __init__(self):
        super().__init__(TokenType(), None)

    def _to_string(self):
        return "none"

    def get_reference(self):
        return "none"

    def __str__(self):
        return "token none"


TOKEN = TokenType()
TOKEN_NONE = _TokenNone()


BFloatType = _named_type("bfloat", """LLVM's ``bfloat``, only for targets that convert to it natively
(``Target.round_f32_to_bf16``): pykern's own bf16 is i16 storage (lower/convert.py).""",
                         null="0.0", intrinsic_name="bf16")
BFLOAT = BFloatType()


def fn_attr(fn: ir.Function, attr: str) -> None:
    """Add any function attribute, e.g. ``presplitcoroutine`` or ``"amdgpu-flat-work-group-size"="1,256"``.

    llvmlite only accepts a fixed list of attribute names; the set prints its members verbatim.
    """
    set.add(fn.attributes, attr)
