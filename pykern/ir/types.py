"""The type system of pykern's typed IR.

Every value in a kernel has exactly one of these types. Scalar dtypes are singletons (compare with
``is``); pointer and shared-array types are interned value objects. Half-precision floats, bf16 and
fp8 are *storage* types: arithmetic on them is carried out in f32 and rounded back by the lowering.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np


class Type:
    """Base of all IR types."""

    nbytes: int = 0
    align: int = 1


class DType(Type):
    """A scalar element type.

    ``kind`` is one of ``"bool" "int" "uint" "float"``; ``tag`` is the spelling used in kernel
    names (candle's). Calling a dtype inside a kernel is an explicit cast; calling it from Python
    builds a NumPy scalar of that type.
    """

    def __init__(self, name: str, kind: str, bits: int, np_dtype: Any, tag: str | None = None):
        self.name, self.kind, self.bits = name, kind, bits
        self.nbytes = self.align = max(1, bits // 8)
        self.np = np.dtype(np_dtype)
        self.tag = tag or name

    is_float = property(lambda self: self.kind == "float")
    is_int = property(lambda self: self.kind in ("int", "uint"))
    is_signed = property(lambda self: self.kind == "int")
    is_bool = property(lambda self: self.kind == "bool")
    #: True for the types stored in fewer bits than they are computed in.
    is_storage_float = property(lambda self: self.kind == "float" and self.bits < 32)

    @property
    def int_range(self) -> tuple[int, int]:
        if self.kind == "uint":
            return 0, (1 << self.bits) - 1
        if self.kind == "bool":
            return 0, 1
        return -(1 << (self.bits - 1)), (1 << (self.bits - 1)) - 1

    def __repr__(self) -> str:
        return self.name

    def __call__(self, value):  # host-side construction, e.g. pykern.f16(1.5)
        return self.np.type(value)

    def __reduce__(self):
        return (dtype_by_name, (self.name,))


bool_ = DType("bool", "bool", 8, np.bool_)
i8 = DType("i8", "int", 8, np.int8)
i16 = DType("i16", "int", 16, np.int16)
i32 = DType("i32", "int", 32, np.int32)
i64 = DType("i64", "int", 64, np.int64)
u8 = DType("u8", "uint", 8, np.uint8)
u16 = DType("u16", "uint", 16, np.uint16)
u32 = DType("u32", "uint", 32, np.uint32)
u64 = DType("u64", "uint", 64, np.uint64)
usize = u64
f16 = DType("f16", "float", 16, np.float16)
bf16 = DType("bf16", "float", 16, ml_dtypes.bfloat16)
f32 = DType("f32", "float", 32, np.float32)
f64 = DType("f64", "float", 64, np.float64)
f8e4m3 = DType("f8e4m3", "float", 8, ml_dtypes.float8_e4m3fn, tag="f8_e4m3")

ALL_DTYPES = (bool_, i8, i16, i32, i64, u8, u16, u32, u64, f16, bf16, f32, f64, f8e4m3)
INT_DTYPES = tuple(t for t in ALL_DTYPES if t.is_int)
FLOAT_DTYPES = (f16, bf16, f32, f64, f8e4m3)
#: the unsigned integer of each size in bytes: an element's bits (``pk.kernel(moves=...)``), a word of several
UINT_OF_SIZE = {1: u8, 2: u16, 4: u32, 8: u64}
_BY_NAME = {t.name: t for t in ALL_DTYPES} | {"usize": u64, "bool_": bool_}
_BY_NP = {t.np: t for t in ALL_DTYPES}


def dtype_by_name(name: str) -> DType:
    return _BY_NAME[name]


class UnsupportedDType(TypeError, KeyError):
    """A NumPy dtype pykern has no kernels' type for (complex, strings, objects...). A TypeError that
    names the dtypes there are; still a KeyError for code written against the old lookup."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def dtype_of_numpy(np_dtype) -> DType:
    """The pykern dtype of a NumPy dtype; ``UnsupportedDType`` (a TypeError) when there is none."""
    try:
        return _BY_NP[np.dtype(np_dtype)]
    except (KeyError, TypeError):
        names = ", ".join(sorted({str(d) for d in _BY_NP}))
        raise UnsupportedDType(f"pykern has no dtype for NumPy's {np_dtype!r}; it supports {names}") from None


@dataclass(frozen=True)
class PtrType(Type):
    """A pointer to ``elem`` in global memory (``space="global"``) or shared memory.

    ``const`` pointers may not be written through; the check happens in the front end.
    """

    elem: DType
    space: str = "global"
    const: bool = False
    nbytes = 8
    align = 8

    def __repr__(self) -> str:
        kind = "ConstPtr" if self.const else "Ptr"
        return f"{kind}[{self.elem!r}]" + ("" if self.space == "global" else f"@{self.space}")


@dataclass(frozen=True)
class ArrayType(Type):
    """A statically sized array of ``shape`` in shared memory (``None``: the dynamic one) or in the
    thread's private memory (``space="local"``: registers once LLVM's SROA sees constant indices)."""

    elem: DType
    shape: tuple[int, ...] | None
    space: str = "shared"

    @property
    def count(self) -> int:
        return int(np.prod(self.shape)) if self.shape else 0

    def __repr__(self) -> str:
        return f"{self.space}[{self.elem!r}, {self.shape if self.shape else 'dynamic'}]"


@dataclass(frozen=True)
class TupleType(Type):
    """Several scalars as one value: a device function's ``-> tuple[u32, u32]`` result and the
    variables that hold one until it is unpacked. Never in memory and never a parameter, so a
    tuple is always a handful of registers (LLVM's SROA splits its slot into scalars)."""

    items: tuple[Type, ...]

    def __repr__(self) -> str:
        return f"tuple[{', '.join(repr(t) for t in self.items)}]"


@dataclass(frozen=True)
class FragmentType(Type):
    """A wave's share of a 16x16 tile for ``pk.mma``: ``role`` "a" (M x K), "b" (K x N, ``layout`` "row"
    or "col" as it was loaded) or "acc" (M x N), of ``elem`` values. Each lane holds some elements
    in the target's layout (``targets/matrix.py``); kernels pass fragments to ``pk.mma`` only, so
    the layout never shows. Never in memory and never a kernel parameter."""

    role: str
    elem: DType
    layout: str = "row"

    def __repr__(self) -> str:
        extra = f", {self.layout}" if self.role == "b" else ""
        return f"mma.fragment[{self.role}, {self.elem!r}{extra}]"


class VoidType(Type):
    def __repr__(self) -> str:
        return "None"


void = VoidType()


class _PtrFactory:
    """``Ptr[T]`` / ``ConstPtr[T]`` in annotations; resolved by the front end."""

    def __init__(self, const: bool):
        self.const = const

    def __getitem__(self, elem):
        if isinstance(elem, DType):
            return PtrType(elem, const=self.const)
        return GenericPtr(elem, self.const)  # a type variable, bound per instance

    def __repr__(self) -> str:
        return "ConstPtr" if self.const else "Ptr"


@dataclass(frozen=True)
class GenericPtr:
    """``Ptr[T]`` written with a type variable (only seen when annotations are evaluated)."""

    var: Any
    const: bool


Ptr = _PtrFactory(const=False)
ConstPtr = _PtrFactory(const=True)


class TypeVar:
    """A dtype variable for generic kernels and device functions: ``T = pykern.TypeVar("T")``.

    It only has to exist so that Python can evaluate annotations such as ``Ptr[T]``; the front end
    reads annotations from the source and binds ``T`` per instance.
    """

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name
