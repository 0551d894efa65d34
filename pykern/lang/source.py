"""What the front end reads: a Python function's source (``SourceFunction``), the device-function
definition (``FuncDef``), and the marker the kernel objects carry (``KernelObject``) — kept apart
from ``kernel.py`` so that the front end depends on these and ``kernel.py`` on the front end, never
both ways.
"""
from __future__ import annotations

import ast
import hashlib
import inspect
import textwrap
from typing import Callable

from ..errors import CompileError
from ..ir import nodes as N


class SourceFunction:
    """A Python function's AST plus what is needed to point errors at the user's file."""

    def __init__(self, pyfunc: Callable):
        self.pyfunc = pyfunc
        self.name = pyfunc.__name__
        try:
            lines, self.first_line = inspect.getsourcelines(pyfunc)
        except (OSError, TypeError) as exc:
            raise CompileError(f"cannot read the source of {self.name}: {exc}") from None
        self.file = inspect.getsourcefile(pyfunc) or "<unknown>"
        self.lines = [l.rstrip("\n") for l in lines]
        src = "".join(lines)
        dedented = textwrap.dedent(src)
        self.indent = len(lines[0]) - len(lines[0].lstrip()) if lines else 0
        module = ast.parse(dedented)
        self.tree: ast.FunctionDef = module.body[0]  # type: ignore[assignment]
        if self.first_line == 0:  # getsourcelines gives 0 for module-level code objects
            self.first_line = 1
        self.globals = pyfunc.__globals__
        closure = inspect.getclosurevars(pyfunc).nonlocals if pyfunc.__closure__ else {}
        self.closure = dict(closure)
        args = self.tree.args
        self.compile_params = [a.arg for a in args.kwonlyargs]
        self.source_hash = hashlib.sha256(dedented.encode()).hexdigest()
        self._check_signature()

    def loc(self, node: ast.AST) -> N.Loc:
        line = getattr(node, "lineno", 1)
        col = getattr(node, "col_offset", 0) + self.indent
        end = getattr(node, "end_col_offset", None)
        same_line = getattr(node, "end_lineno", line) == line
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        return N.Loc(self.file, self.first_line + line - 1, col, text,
                     end + self.indent if end is not None and same_line else None)

    def error(self, node: ast.AST, message: str) -> CompileError:
        return CompileError(message, self.loc(node))

    def _check_signature(self) -> None:
        if isinstance(self.tree, ast.AsyncFunctionDef):
            raise self.error(self.tree, f"'{self.name}' is an async def: kernels and device functions are plain "
                                        f"functions (remove 'async')")
        args = self.tree.args
        for bad, what in ((args.vararg, "*args"), (args.kwarg, "**kwargs")):
            if bad is not None:
                raise self.error(bad, f"{what} parameters are not supported in kernels")
        if args.posonlyargs:
            raise self.error(args.posonlyargs[0], "positional-only parameters are not supported")
        if args.defaults:
            raise self.error(args.defaults[0], "run-time parameters cannot have default values")
        for a in args.args:
            if a.annotation is None:
                raise self.error(a, f"parameter '{a.arg}' needs a type annotation (e.g. '{a.arg}: pk.f32')")
        for dec in self.tree.decorator_list[1:]:
            raise self.error(dec, "a kernel takes exactly one pykern decorator")


class FuncDef:
    """A device function (``@pykern.func``): inlined where it is called, typed per argument types."""

    def __init__(self, pyfunc: Callable):
        self.source = SourceFunction(pyfunc)
        self.name = self.source.name
        self._typed: dict[tuple, N.Function] = {}
        self.__doc__ = pyfunc.__doc__
        self.__wrapped__ = pyfunc

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"{self.name} is a pykern device function: call it from a kernel")

    def __repr__(self) -> str:
        return f"<pykern func {self.name}>"


class KernelObject:
    """A kernel definition or instance (``kernel.py``): launched from the host, never called from a
    kernel — the front end reports such a call."""
