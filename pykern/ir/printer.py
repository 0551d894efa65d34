"""The typed IR as text: what ``PYKERN_DUMP`` writes as a kernel's first stage and ``pykern show
--stage typed`` prints, so a surprise in the LLVM IR can be traced to the front end's decisions
(every cast explicit, every expression with its type, device functions still as calls).

The form is Python-like: statements as Python statements, expressions infix where Python has an
operator and ``name(args)`` otherwise, each expression's type after a colon where it is not obvious.
"""
from __future__ import annotations

from . import nodes as N

_BINARY = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "//", "mod": "%", "pow": "**",
           "and": "&", "or": "|", "xor": "^", "shl": "<<", "shr": ">>",
           "eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_UNARY = {"neg": "-", "invert": "~", "not": "not "}


def expr(e) -> str:
    """One expression, types shown on constants, casts and calls."""
    if not isinstance(e, N.Node):
        return repr(e)
    if isinstance(e, N.Const):
        return f"{e.value!r}:{e.ty}"
    if isinstance(e, N.Var):
        return e.name
    if isinstance(e, (N.BinOp, N.Compare)):
        return f"({expr(e.lhs)} {_BINARY.get(e.op, e.op)} {expr(e.rhs)})"
    if isinstance(e, N.Logical):
        return f"({f' {e.op} '.join(expr(v) for v in _fields(e) if isinstance(v, N.Node))})"
    if isinstance(e, N.UnaryOp):
        return f"({_UNARY.get(e.op, e.op)}{expr(e.operand)})"
    if isinstance(e, N.Cast):
        return f"{e.ty}({expr(_fields(e)[0])})"
    if isinstance(e, N.Load):
        return f"{expr(e.ptr)}[{expr(e.index)}]"
    if isinstance(e, N.Intrinsic):
        if e.attrs.keys() == {"axis"} and not e.args:  # thread_idx.x and its kind
            return f"pk.{e.builtin.name}.{'xyz'[e.attrs['axis']]}"
        attrs = [f"{k}={v!r}" for k, v in e.attrs.items()]
        return f"pk.{e.builtin.name}({', '.join([expr(a) for a in e.args] + attrs)}):{e.ty}"
    if isinstance(e, N.MakeTuple):
        return f"({', '.join(expr(v) for v in e.items)}{',' if len(e.items) == 1 else ''})"
    if isinstance(e, N.TupleItem):
        return f"{expr(e.value)}[{e.index}]"
    if isinstance(e, N.Call):
        name = getattr(e.func, "name", e.func)
        return f"{name}({', '.join(expr(a) for a in e.args)}):{e.ty}"
    args = ", ".join(_arg(v) for v in _fields(e))
    return f"{type(e).__name__.lower()}({args}):{e.ty}" if isinstance(e, N.Expr) else f"{type(e).__name__}({args})"


def _fields(node) -> list:
    return [getattr(node, f) for f in node.__dataclass_fields__ if f not in ("loc", "ty")]


def _arg(v) -> str:
    if isinstance(v, list):
        return "[" + ", ".join(_arg(x) for x in v) + "]"
    return expr(v) if isinstance(v, N.Node) else repr(v)


def stmts(body: list, indent: str = "    ") -> list[str]:
    lines: list[str] = []
    for s in body:
        if isinstance(s, N.Assign):
            lines.append(f"{indent}{s.name} = {expr(s.value)}")
        elif isinstance(s, N.Store):
            policy = f"  # eviction={s.eviction}" if s.eviction else ""
            lines.append(f"{indent}{expr(s.ptr)}[{expr(s.index)}] = {expr(s.value)}{policy}")
        elif isinstance(s, N.ExprStmt):
            lines.append(f"{indent}{expr(s.value)}")
        elif isinstance(s, N.If):
            lines.append(f"{indent}if {expr(s.cond)}:")
            lines += stmts(s.body, indent + "    ") or [indent + "    pass"]
            if s.orelse:
                lines.append(f"{indent}else:")
                lines += stmts(s.orelse, indent + "    ")
        elif isinstance(s, N.While):
            lines.append(f"{indent}while {expr(s.cond)}:")
            lines += stmts(s.body, indent + "    ") or [indent + "    pass"]
        elif isinstance(s, N.ForRange):
            how = "grid_stride" if s.grid else "parallel_range" if s.offset is not None else "range"
            extra = (f", offset={expr(s.offset)}" if s.offset is not None else "") + \
                (", descending" if s.descending else "")
            lines.append(f"{indent}for {s.var} in {how}({expr(s.start)}, {expr(s.stop)}, {expr(s.step)}{extra}):")
            lines += stmts(s.body, indent + "    ") or [indent + "    pass"]
        elif isinstance(s, N.Return):
            lines.append(f"{indent}return" + (f" {expr(s.value)}" if s.value is not None else ""))
        elif isinstance(s, (N.Break, N.Continue)):
            lines.append(f"{indent}{type(s).__name__.lower()}")
        else:
            lines.append(f"{indent}{type(s).__name__}({', '.join(_arg(v) for v in _fields(s))})")
    return lines


def function(fn: N.Function) -> str:
    """A typed function: its signature, locals and arrays, then its body; the device functions it
    calls follow, each once."""
    out: list[str] = []
    seen: set[int] = set()
    todo = [fn]
    while todo:
        f = todo.pop(0)
        if id(f) in seen:
            continue
        seen.add(id(f))
        params = ", ".join(f"{n}: {t}" for n, t in f.params)
        out.append(f"def {f.name}({params}) -> {f.ret}:")
        if f.locals:
            out.append("    # locals: " + ", ".join(f"{n}: {t}" for n, t in f.locals.items()))
        if f.arrays:
            out.append("    # arrays: " + ", ".join(f"{n}: {t}" for n, t in f.arrays.items()))
        out += stmts(f.body) or ["    pass"]
        out.append("")
        todo += [n.func for n in N.walk(f.body) if isinstance(n, N.Call) and isinstance(n.func, N.Function)]
    return "\n".join(out)
