"""What typing computes besides typed IR: compile-time values, and how error messages name values.

Expressions evaluate either to a typed ``ir.nodes.Expr`` or to a ``CT``: a Python value known while
compiling (a literal, a dtype, a device function, a module attribute, a compile-time parameter).
The front end and the built-ins' typing rules both produce and test them, so they live apart from
either.
"""
from __future__ import annotations

import types as pytypes
from dataclasses import dataclass
from typing import Any

from ..ir import types as T
from .builtins.core import Builtin
from .source import FuncDef, KernelObject


@dataclass
class CT:
    """A compile-time value during typing."""

    value: Any


@dataclass
class TupleVal:
    """A tuple written in a kernel, ``(a, b)``, with a run-time element: its elements (typed
    expressions or ``CT``s) stay apart until the context says what they become. Unpacking assigns
    them one by one (a literal keeps the type of the variable it meets, as in ``a = 0``); a
    ``return`` converts each to the declared result type; only a name bound to the whole tuple makes
    it a typed ``MakeTuple`` (literals at their default types). An all-compile-time tuple is a
    ``CT`` instead, as before."""

    items: list


def is_tuple(v: Any) -> bool:
    """A tuple of run-time values: a literal one or a typed expression of a ``TupleType``."""
    return isinstance(v, TupleVal) or (not isinstance(v, CT) and isinstance(getattr(v, "ty", None), T.TupleType))


def describe(obj: Any) -> str:
    """``obj`` as an error message names it (a module, a pykern object, a Python function or value)."""
    if isinstance(obj, pytypes.ModuleType):
        return f"module {obj.__name__}"
    if isinstance(obj, (FuncDef, KernelObject, Builtin, T.DType)):
        return repr(obj)
    if callable(obj):
        return f"Python function {getattr(obj, '__name__', obj)!r}"
    return f"{type(obj).__name__} {obj!r}"


def type_name(ty) -> str:
    """A type as ``pk.<name>(...)`` spells its conversion."""
    return ty.name if isinstance(ty, T.DType) else repr(ty)
