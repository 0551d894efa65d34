"""Flow checks over a typed function: every read of a variable follows an assignment on every path,
and a function with a result returns one on every path.

Both mistakes are silent on a GPU: LLVM reads an unassigned variable as whatever its register
holds (zero on the CPU target, by luck), and a function that falls off its end returns the same
garbage. Python would raise ``UnboundLocalError`` at run time; a kernel has no run time to raise
in, so the front end refuses them. The analysis runs on the typed IR, after compile-time ``if``
branches are chosen and ``pk.static_range`` bodies copied, so ``if T.is_float: x = ...`` counts only
the branch that exists. Loops may run zero times: what a loop body assigns is not assigned after
it, and a variable assigned late in one iteration cannot be read earlier in the next.
"""
from __future__ import annotations

from ..errors import CompileError
from ..ir import nodes as N
from ..ir import types as T

#: the assigned set of a path that does not fall through (return, break, continue)
_GONE = None


def check_flow(fn: N.Function) -> None:
    """Raise CompileError at the first read of a possibly unassigned variable, or at the function when
    a function with a result can reach its end."""
    checker = _Checker(fn)
    end = checker.block(fn.body, frozenset(name for name, _ in fn.params))
    if end is not _GONE and fn.ret != T.void:
        last = fn.body[-1].loc if fn.body else fn.loc
        raise CompileError(f"{fn.name}() must return a {fn.ret!r} on every path, but can reach its end "
                           f"without a return", last or fn.loc)


class _Checker:
    def __init__(self, fn: N.Function):
        self.fn = fn

    def reads(self, e: N.Node | None, assigned: frozenset) -> None:
        if e is None:
            return
        for node in N.walk([e]):
            if isinstance(node, N.Var) and node.name in self.fn.locals and node.name not in assigned:
                raise CompileError(f"'{node.name}' may be read before it is assigned: it is not assigned on "
                                   f"every path to here (assign it first, e.g. before the if or the loop)",
                                   node.loc)

    def block(self, stmts: list[N.Stmt], assigned: frozenset):
        """The variables assigned after ``stmts`` on every path that falls through, or ``_GONE``."""
        for s in stmts:
            assigned = self.stmt(s, assigned)
            if assigned is _GONE:
                return _GONE  # what follows is unreachable
        return assigned

    def stmt(self, s: N.Stmt, assigned: frozenset):
        if isinstance(s, N.Assign):
            self.reads(s.value, assigned)
            return assigned | {s.name}
        if isinstance(s, N.If):
            self.reads(s.cond, assigned)
            then, other = self.block(s.body, assigned), self.block(s.orelse, assigned)
            if then is _GONE:
                return other
            return then if other is _GONE else then & other
        if isinstance(s, N.While):
            self.reads(s.cond, assigned)
            self.block(s.body, assigned)
            forever = isinstance(s.cond, N.Const) and s.cond.value is True
            return _GONE if forever and not _breaks(s.body) else assigned
        if isinstance(s, N.ForRange):
            for e in (s.start, s.stop, s.step, s.offset):
                self.reads(e, assigned)
            self.block(s.body, assigned | {s.var})
            return assigned
        if isinstance(s, N.Return):
            self.reads(getattr(s, "value", None), assigned)
            return _GONE
        if isinstance(s, (N.Break, N.Continue)):
            return _GONE
        for name in getattr(s, "__dataclass_fields__", ()):  # Store, ExprStmt, anything else: its reads
            child = getattr(s, name)
            if name != "loc" and isinstance(child, N.Expr):
                self.reads(child, assigned)
        return assigned


def _breaks(stmts: list[N.Stmt]) -> bool:
    """A ``break`` of this loop (not of a loop inside it) somewhere in ``stmts``."""
    for s in stmts:
        if isinstance(s, N.Break):
            return True
        if isinstance(s, N.If) and (_breaks(s.body) or _breaks(s.orelse)):
            return True
    return False
