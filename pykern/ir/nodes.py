"""Typed IR: a small structured tree that the front end produces and the lowering consumes.

It is deliberately close to the source (structured control flow, no SSA): every expression node
carries its result type, every conversion is an explicit ``Cast``, every node carries the source
location of the construct it came from, so that target checks in the lowering can still point at the
user's line. Device-function calls stay as ``Call`` nodes and are inlined by the lowering.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .types import DType, PtrType, ArrayType, TupleType, Type


@dataclass(frozen=True)
class Loc:
    """A source position: file name, 1-based line, 0-based column, the source line itself."""

    file: str
    line: int
    col: int
    text: str = ""
    end_col: int | None = None


@dataclass(eq=False)
class Node:
    loc: Loc | None = field(default=None, kw_only=True)


# ---------------------------------------------------------------- expressions


@dataclass(eq=False)
class Expr(Node):
    ty: Type


@dataclass(eq=False)
class Const(Expr):
    value: Any


@dataclass(eq=False)
class Var(Expr):
    """A local variable or a parameter (parameters are variables bound on entry)."""

    name: str


@dataclass(eq=False)
class BinOp(Expr):
    """Arithmetic on operands of type ``ty``: add sub mul div floordiv mod pow and or xor shl shr."""

    op: str
    lhs: Expr
    rhs: Expr


@dataclass(eq=False)
class UnaryOp(Expr):
    op: str  # neg, invert, not
    operand: Expr


@dataclass(eq=False)
class Compare(Expr):
    """One comparison (``eq ne lt le gt ge``) of two operands of the same type; ``ty`` is bool."""

    op: str
    lhs: Expr
    rhs: Expr


@dataclass(eq=False)
class Logical(Expr):
    """Short-circuit ``and``/``or`` of bool operands."""

    op: str
    lhs: Expr
    rhs: Expr


@dataclass(eq=False)
class IfExp(Expr):
    cond: Expr
    then: Expr
    other: Expr


@dataclass(eq=False)
class Cast(Expr):
    """Value conversion to ``ty`` (float->int truncates toward zero and saturates, NaN -> 0)."""

    operand: Expr


@dataclass(eq=False)
class Bitcast(Expr):
    operand: Expr


#: ``pk.load`` / ``pk.store`` cache policies (Triton's names): a line read or written once leaves the
#: cache first; one that a later pass reads again stays longest
EVICTION_POLICIES = ("evict_first", "evict_last")


@dataclass(eq=False)
class Load(Expr):
    """``ptr[index]``; ``ptr`` is a pointer or a shared array. ``eviction``: ``pk.load``'s cache
    policy for the line ("evict_first", "evict_last"), "" for none."""

    ptr: Expr
    index: Expr
    eviction: str = ""
    #: ``pk.load(..., align=n)``: the address is a multiple of ``n`` bytes only (0: the element's size)
    align: int = 0


@dataclass(eq=False)
class PtrAdd(Expr):
    """``ptr + index`` in elements."""

    ptr: Expr
    index: Expr


@dataclass(eq=False)
class IsNull(Expr):
    ptr: Expr
    negate: bool = False


@dataclass(eq=False)
class Call(Expr):
    """A call of a device-function instance, inlined by the lowering."""

    func: Any  # pykern.lang.kernel.FuncInstance
    args: list[Expr]


@dataclass(eq=False)
class Intrinsic(Expr):
    """A call of a built-in (ids, barriers, math, atomics, wave operations).

    ``builtin`` is the built-in's registry entry (a ``pykern.lang.builtins.core.Definition``), whose
    ``lower`` the lowering calls with this node; ``attrs`` carries compile-time arguments.
    """

    builtin: Any
    args: list[Expr]
    attrs: dict = field(default_factory=dict)


@dataclass(eq=False)
class ArrayRef(Expr):
    """The address of a shared or local array (the dynamic shared one when ``ty.shape`` is None)."""

    ty: ArrayType
    name: str


@dataclass(eq=False)
class MakeTuple(Expr):
    """``(a, b, c)`` with run-time elements: ``ty`` is a ``TupleType``, ``items`` its values in order."""

    items: list[Expr]


@dataclass(eq=False)
class TupleItem(Expr):
    """Element ``index`` (a compile-time int) of the tuple-typed ``value``: what unpacking
    ``a, b = f(x)`` reads from the one evaluation of ``f(x)``."""

    value: Expr
    index: int


# ---------------------------------------------------------------- statements


@dataclass(eq=False)
class Stmt(Node):
    pass


@dataclass(eq=False)
class Assign(Stmt):
    name: str
    value: Expr


@dataclass(eq=False)
class Store(Stmt):
    ptr: Expr
    index: Expr
    value: Expr
    eviction: str = ""  # pk.store's cache policy, as Load's


@dataclass(eq=False)
class ExprStmt(Stmt):
    value: Expr


@dataclass(eq=False)
class If(Stmt):
    cond: Expr
    body: list[Stmt]
    orelse: list[Stmt]


@dataclass(eq=False)
class While(Stmt):
    cond: Expr
    body: list[Stmt]


@dataclass(eq=False)
class ForRange(Stmt):
    """``for var in range(start, stop, step)``; ``step_sign`` is +1/-1 when known, else 0.

    ``grid`` marks ``pk.grid_stride(stop)``: every index in [0, stop) is visited once by some
    thread, in no promised order, which leaves the lowering free to give each thread several
    independent elements (memory-level parallelism on GPUs)."""

    var: str
    start: Expr
    stop: Expr
    step: Expr
    step_sign: int
    body: list[Stmt]
    grid: bool = False
    offset: Expr | None = None  # parallel_range(lo, ...): the variable is lo + the counted index
    #: parallel_range(..., descending=True): each counted index i stands for stop - 1 - i, so every
    #: worker walks its part from the top down (a second pass over a row meets the elements the
    #: first pass read last, which the cache is likeliest to still hold)
    descending: bool = False


@dataclass(eq=False)
class Break(Stmt):
    pass


@dataclass(eq=False)
class Continue(Stmt):
    pass


@dataclass(eq=False)
class Return(Stmt):
    value: Expr | None


@dataclass(eq=False)
class Function:
    """A typed function body: a kernel instance or a device-function instance."""

    name: str
    params: list[tuple[str, Type]]
    ret: Type
    body: list[Stmt]
    locals: dict[str, Type]
    arrays: dict[str, ArrayType]
    loc: Loc
    uses_sync: bool = False  # barriers or wave operations anywhere (callees included)


def walk(stmts: list[Stmt]):
    """Yield every statement and expression under ``stmts`` (depth first)."""
    stack: list[Any] = list(reversed(stmts))
    while stack:
        node = stack.pop()
        yield node
        for name in getattr(node, "__dataclass_fields__", ()):
            if name in ("loc", "ty", "func"):
                continue
            child = getattr(node, name)
            if isinstance(child, Node):
                stack.append(child)
            elif isinstance(child, list):
                stack.extend(c for c in reversed(child) if isinstance(c, Node))


__all__ = [n for n in dir() if not n.startswith("_")] + ["DType", "PtrType", "ArrayType", "TupleType"]
