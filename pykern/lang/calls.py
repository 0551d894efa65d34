"""Typing calls: built-ins (through their registry entries), conversions (``pk.f32(x)``), device
functions (typed once per argument types and compile-time arguments, inlined by the lowering) and
the few Python built-ins a kernel may call."""
from __future__ import annotations

import ast
from typing import Any

from ..errors import CompileError
from ..ir import nodes as N
from ..ir import types as T
from .builtins import Builtin, definition, lookup
from .source import FuncDef, KernelObject
from .values import CT, describe


class CallTyper:
    """The call half of ``frontend.Typer`` (a mixin); sub-typers for device functions are made with
    ``type(self)``, the full typer."""

    # ------------------------------------------------------------------ calls
    def visit_Call(self, node: ast.Call):
        callee = self.visit(node.func)
        if not isinstance(callee, CT):
            raise self.error(node.func, f"a {callee.ty!r} value is not callable")
        fn = callee.value
        if node.keywords and not isinstance(fn, (Builtin, FuncDef)):
            raise self.error(node.keywords[0], "keyword arguments are not supported here")
        d = definition(fn)  # pk's built-ins, and Python's min, max and abs
        if d is not None and d.typing is not None:
            unknown = [k for k in node.keywords if k.arg not in d.keywords]
            if unknown:  # never ignored: order=, rounding= ... would silently do nothing
                raise self.error(unknown[0], f"pk.{d.name}() has no keyword argument '{unknown[0].arg}'" +
                                 (f"; it takes {', '.join(k + '=' for k in d.keywords)}" if d.keywords else ""))
            return d.typing(self, node, fn)
        if isinstance(fn, T.DType):
            return self.explicit_cast(fn, node)
        if isinstance(fn, FuncDef):
            return self.call_func(fn, node)
        if fn is range:
            raise self.error(node, "range() can only be used as the iterable of a for loop")
        if fn is len and len(node.args) == 1 and not node.keywords:
            return CT(len(self.ct_eval(node.args[0], "len()'s argument (a compile-time tuple)")))
        if fn is bool:
            return self.explicit_cast(T.bool_, node)
        if fn in (int, float):
            raise self.error(node.func, f"{fn.__name__}() is ambiguous in a kernel: use pk.i32(...), pk.f32(...), ...")
        if isinstance(fn, KernelObject):
            raise self.error(node.func, "kernels cannot be called from kernels; make it a @pykern.func")
        raise self.error(node.func, f"{describe(fn)} cannot be called in a kernel")

    def args_exact(self, node, args, n: int, name: str) -> list:
        if len(args) != n:
            raise self.error(node, f"{name}() takes {n} argument{'s' if n != 1 else ''}, got {len(args)}")
        return [self.visit(a) for a in args]

    def explicit_cast(self, ty: T.DType, node: ast.Call):
        (v,) = self.args_exact(node, node.args, 1, ty.name)
        if isinstance(v, CT):
            val = v.value
            if isinstance(val, (int, float, bool)):
                if ty.is_int and isinstance(val, float):
                    val = int(val)
                if ty.is_int and not isinstance(val, bool):
                    lo, hi = ty.int_range
                    val = ((val - lo) % (hi - lo + 1)) + lo  # wraps, as the run-time cast does
                if ty.is_bool:
                    val = bool(val)
                return self.const(val, ty, node)
            raise self.error(node.args[0], f"cannot convert {describe(val)} to {ty!r}")
        if not isinstance(v.ty, T.DType):
            raise self.error(node.args[0], f"cannot convert a {v.ty!r} value to {ty!r}")
        return self.cast_to(v, ty)

    def call_func(self, fdef: FuncDef, node: ast.Call):
        src = fdef.source
        for kw in node.keywords:
            if kw.arg in {a.arg for a in src.tree.args.args}:
                raise self.error(kw, f"pass '{kw.arg}' by position: keyword arguments are for {fdef.name}()'s "
                                     f"compile-time (keyword-only) parameters")
        if len(node.args) != len(src.tree.args.args):
            raise self.error(node, f"{fdef.name}() takes {len(src.tree.args.args)} arguments, got {len(node.args)}")
        if fdef in self.stack or (not self.is_kernel and fdef.source is self.src):
            raise self.error(node, f"recursive call of {fdef.name}: device functions cannot recurse")
        compile_time = self.compile_time_args(fdef, node)
        # an array passes as a pointer into its memory (the callee is typed for that space)
        args = [self.array_as_ptr(self.visit(a)) for a in node.args]
        # literal arguments adopt the parameter's type where it is concrete, else a typed sibling's
        typed = [a for a in args if not isinstance(a, CT)]
        arg_types = []
        for a, p, an in zip(args, src.tree.args.args, node.args):
            if isinstance(a, CT):
                ann = self._peek_annotation(fdef, p.annotation)
                ty = ann if isinstance(ann, T.DType) else (typed[0].ty if typed else None)
                a = self.materialize(a, an, ty)
            arg_types.append(a.ty)
        args = [self.materialize(a, an, t) for a, an, t in zip(args, node.args, arg_types)]
        key = (tuple(arg_types), self.target.wave_size, self.target.tile_bytes, tuple(compile_time.items()))
        fn = fdef._typed.get(key)
        if fn is None:
            sub = type(self)(src, dict(compile_time), self.target, self.stack + [fdef])
            fn = sub.type_function(arg_types)
            fdef._typed[key] = fn
        self.uses_sync |= fn.uses_sync
        return N.Call(fn.ret, fn, args, loc=self.loc(node))

    def compile_time_args(self, fdef: FuncDef, node: ast.Call) -> dict[str, Any]:
        """A device function's keyword-only parameters, passed by keyword: compile-time values (as a
        kernel instance's), one typed copy of the function per set of values."""
        params = fdef.source.compile_params
        values = {}
        for kw in node.keywords:
            if kw.arg not in params:
                raise self.error(kw, f"{fdef.name}() has no compile-time parameter '{kw.arg}'"
                                     + (f"; it takes {', '.join(params)}" if params else ""))
            values[kw.arg] = self.ct_eval(kw.value, f"{fdef.name}()'s compile-time argument '{kw.arg}'")
        missing = [p for p in params if p not in values]
        if missing:
            raise self.error(node, f"{fdef.name}() needs its compile-time argument(s) {', '.join(missing)} "
                                   f"by keyword")
        return {p: values[p] for p in params}

    def call_typed(self, fdef: FuncDef, args: list[N.Expr], node) -> N.Call:
        """A call of a library device function on already typed arguments."""
        arg_types = [a.ty for a in args]
        key = (tuple(arg_types), self.target.wave_size, self.target.tile_bytes)
        fn = fdef._typed.get(key)
        if fn is None:
            fn = fdef._typed[key] = type(self)(fdef.source, {}, self.target, self.stack + [fdef]).type_function(arg_types)
        self.uses_sync |= fn.uses_sync
        return N.Call(fn.ret, fn, args, loc=self.loc(node))

    def _peek_annotation(self, fdef: FuncDef, ann: ast.AST):
        try:
            return type(self)(fdef.source, {}, self.target, []).ct_eval(ann, "")
        except CompileError:
            return None


    def intrinsic(self, marker, ty, args, node, **attrs) -> N.Intrinsic:
        """A call of the built-in ``marker`` in the typed IR, referring to its registry entry."""
        return N.Intrinsic(ty, lookup(marker), args, attrs, loc=self.loc(node))
