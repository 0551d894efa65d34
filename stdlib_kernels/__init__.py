"""candle-kernels in pykern: the eleven families, with candle's registry (``Id``, ``ALL_IDS``, modules).

Each family file adds its kernel instances to its module below; the modules' ``index`` is their
position in ``ALL_IDS``, which a Rust candle backend and ``Device.get_or_load_func`` rely on.
"""
from __future__ import annotations

import enum

from pykern import Module
from pykern.ir.types import DType


class Id(enum.IntEnum):
    Affine = 0
    Binary = 1
    Cast = 2
    Conv = 3
    Fill = 4
    Indexing = 5
    Quantized = 6
    Reduce = 7
    Sort = 8
    Ternary = 9
    Unary = 10


ALL_IDS = list(Id)
AFFINE, BINARY, CAST, CONV, FILL, INDEXING, QUANTIZED, REDUCE, SORT, TERNARY, UNARY = (
    Module(i.name.lower(), int(i)) for i in ALL_IDS)
MODULES = (AFFINE, BINARY, CAST, CONV, FILL, INDEXING, QUANTIZED, REDUCE, SORT, TERNARY, UNARY)


def kernel_name(op: str, *dtypes: DType | str) -> str:
    """The one place kernel names are formed: ``{op}_{tag}[_{tag}]`` with candle's dtype tags."""
    return "_".join([op] + [d if isinstance(d, str) else d.tag for d in dtypes])


def module(name_or_index: str | int) -> Module:
    for m in MODULES:
        if m.name == name_or_index or m.index == name_or_index:
            return m
    raise KeyError(f"no stdlib module {name_or_index!r}; modules: {', '.join(m.name for m in MODULES)}")


def _load_families() -> None:
    import importlib
    import pkgutil
    for info in pkgutil.iter_modules(__path__):
        if not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")


_load_families()
