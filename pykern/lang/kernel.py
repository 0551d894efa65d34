"""``@kernel`` and ``@func``: capture a Python function's source once, instantiate it cheaply.

A definition parses and syntax-checks its source once. An *instance* binds the compile-time
parameters (keyword-only parameters: dtypes, device functions, ints) and is typed lazily, once
per target wave size; the typed IR is what the lowering consumes.
"""
from __future__ import annotations

import itertools
import threading
from collections.abc import Mapping
from typing import Any, Callable

from ..errors import close_matches
from ..ir import nodes as N
from ..ir import types as T
from .builtins.core import TARGET_NAMES, PerTarget
from .frontend import type_kernel
from .source import FuncDef, KernelObject, SourceFunction


_uids = itertools.count()


class _Launcher:
    """How an instance launches: the runtime's ``LaunchConfig`` and ``launch_instance``, which
    ``pykern.runtime.dispatch`` installs (the runtime is below the language: it calls up, not the
    reverse)."""

    def __init__(self):
        self.config = self.launch = self._missing

    @staticmethod
    def _missing(*_args, **_kwargs):
        raise RuntimeError("no pykern runtime is loaded: import pykern (it installs pykern.runtime.dispatch)")


_launcher = _Launcher()


def set_launcher(config: Callable, launch: Callable) -> None:
    """Install the runtime's launch path (``pykern.runtime.dispatch`` calls this on import)."""
    _launcher.config, _launcher.launch = config, launch


class KernelDef(KernelObject):
    """A kernel definition; instantiate it with ``.instance(name, **compile_time_params)``."""

    def __init__(self, pyfunc: Callable, max_block_size: int = 1024,
                 min_blocks_per_sm: int | Mapping[str, int] = 0,
                 loop_strength_reduction: bool | Mapping[str, bool] = True,
                 moves: tuple[str, ...] = ()):
        self.source = SourceFunction(pyfunc)
        self.name = self.source.name
        self.max_block_size = max_block_size
        self.min_blocks_per_sm = _checked_bound(min_blocks_per_sm)
        self.loop_strength_reduction = _checked_lsr(loop_strength_reduction)
        self.moves = _checked_moves(moves, self.source.compile_params, self.name)
        self.__doc__ = pyfunc.__doc__
        self.__wrapped__ = pyfunc
        self._default: KernelInstance | None = None

    def min_blocks_for(self, target_name: str) -> int:
        """The occupancy bound for one target: a register budget that pays on one target can spill on
        another (its registers are counted differently), so a kernel may ask per target."""
        bound = self.min_blocks_per_sm
        return bound.get(target_name, 0) if isinstance(bound, Mapping) else bound

    def lsr_for(self, target_name: str) -> bool:
        """Whether LLVM's loop strength reduction runs on this kernel's code for one target (a
        mapping names only the targets it turns off or on; the others keep LLVM's default, on)."""
        lsr = self.loop_strength_reduction
        return lsr.get(target_name, True) if isinstance(lsr, Mapping) else lsr

    def instance(self, name: str | None = None, **params: Any) -> "KernelInstance":
        missing = [p for p in self.source.compile_params if p not in params]
        extra = [p for p in params if p not in self.source.compile_params]
        if missing or extra:
            raise TypeError(f"{self.name}.instance: missing compile-time parameters {missing}, "
                            f"unknown {extra}; this kernel takes {self.source.compile_params}")
        return KernelInstance(self, name or self.name, params)

    # a kernel with no compile-time parameters is directly launchable
    def _only_instance(self) -> "KernelInstance":
        if self._default is None:
            if self.source.compile_params:
                raise TypeError(f"{self.name} is generic over {self.source.compile_params}: "
                                f"launch an instance from {self.name}.instance(...)")
            self._default = KernelInstance(self, self.name, {})
        return self._default

    def __getitem__(self, config):
        return self._only_instance()[config]

    def launch(self, grid, block, *args, **kwargs):
        return self._only_instance().launch(grid, block, *args, **kwargs)

    def __call__(self, *args, **kwargs):
        raise TypeError(f"launch a kernel with {self.name}[grid, block](...)")

    def __repr__(self) -> str:
        return f"<pykern kernel {self.name}>"


class KernelInstance(KernelObject):
    """One kernel with its compile-time parameters bound: what a module holds and a device loads."""

    def __init__(self, kdef: KernelDef, name: str, params: dict[str, Any]):
        self.kdef, self.name, self.params = kdef, name, params
        self.max_block_size = kdef.max_block_size
        self._typed: dict[tuple, N.Function] = {}
        self._storage: KernelInstance | None = None  # ``body``'s instance (the moved types as integers)
        self._lock = threading.Lock()
        self._module: Module | None = None

    def params_for(self, target) -> dict[str, Any]:
        """The compile-time parameters as ``target`` (a target or its name) compiles them: each
        ``pk.per_target`` value resolved. A host wrapper sizes its launch from these, so the grid
        agrees with the tile the kernel was compiled with."""
        name = getattr(target, "name", target)
        return {k: v.value(name) if isinstance(v, PerTarget) else v for k, v in self.params.items()}

    def typed(self, target) -> N.Function:
        """The typed IR for ``target`` (cached: it depends only on the wave size, ``pk.tile_bytes``
        and the per-target parameters' values there, so targets that agree on them share it)."""
        name = target.name
        key = (target.wave_size, target.tile_bytes,
               *(v.value(name) for v in self.params.values() if isinstance(v, PerTarget)))
        fn = self._typed.get(key)
        if fn is None:
            with self._lock:
                fn = self._typed.get(key) or type_kernel(self, target)
                self._typed[key] = fn
        return fn

    def body(self, target) -> N.Function:
        """The typed IR the compiler lowers: ``typed``, except that each type parameter the definition
        only ``moves`` is the unsigned integer of its size. The launch still checks arguments against
        ``typed`` (the declared element types); the code is the same bytes moved, so the instances of
        one size lower to the same IR and ``compiler.identical_kernels`` compiles them once."""
        if not self.kdef.moves:
            return self.typed(target)
        with self._lock:
            if self._storage is None:
                params = dict(self.params)
                for p in self.kdef.moves:
                    params[p] = storage_type(params[p], self.kdef.name, p)
                self._storage = KernelInstance(self.kdef, self.name, params)
        return self._storage.typed(target)

    @property
    def module(self) -> "Module":
        """The module this instance belongs to (a private one for a stand-alone user kernel)."""
        if self._module is None:
            Module(self.name).add(self)
        return self._module  # type: ignore[return-value]

    def __getitem__(self, config):
        return _launcher.config(self, config)

    def launch(self, grid, block, *args, shared_mem: int = 0, stream=None, device=None, **kwargs):
        return _launcher.launch(self, grid, block, args, shared_mem, stream, device, kwargs)

    def __repr__(self) -> str:
        return f"<pykern kernel instance {self.name}>"


class Module:
    """A group of kernels compiled and loaded together (candle's ``Module``: name and index).

    Devices keep one slot per module (``Device.load_module``); the stdlib's eleven families carry
    the index of their position in ``stdlib_kernels.ALL_IDS``. User modules get a private slot.
    """

    #: modules with an index (the stdlib's families), by name and by index: what candle's API names
    #: a module by (``get_or_load_func(name, Id::Unary)``)
    indexed: dict[str | int, "Module"] = {}

    def __init__(self, name: str, index: int | None = None):
        self.name, self.index = name, index
        self.uid = next(_uids)
        self._kernels: dict[str, KernelInstance] = {}
        if index is not None:
            Module.indexed[name] = Module.indexed[index] = self

    @staticmethod
    def lookup(key: "Module | str | int") -> "Module":
        """A module from a ``Module``, an indexed module's name, or its index (an ``Id`` is an int)."""
        if isinstance(key, Module):
            return key
        if not isinstance(key, (str, int)):
            raise TypeError(f"a module is a pykern.Module, a module name or an index, not {type(key).__name__}")
        found = Module.indexed.get(key)
        if found is None:
            names = [k for k in Module.indexed if isinstance(k, str)]
            raise KeyError(f"no module {key!r} (is stdlib_kernels imported?){close_matches(str(key), names)}")
        return found

    def add(self, *instances: KernelInstance) -> "Module":
        for inst in instances:
            if inst.name in self._kernels:
                raise ValueError(f"module {self.name} already has a kernel named {inst.name}")
            if inst._module is not None and inst._module is not self:
                raise ValueError(f"{inst.name} already belongs to module {inst._module.name}")
            inst._module = self
            self._kernels[inst.name] = inst
        return self

    def get(self, name: str) -> KernelInstance:
        try:
            return self._kernels[name]
        except KeyError:
            raise KeyError(f"module {self.name} has no kernel {name!r}{close_matches(name, self._kernels)}") from None

    @property
    def kernels(self) -> list[KernelInstance]:
        return list(self._kernels.values())

    def names(self) -> list[str]:
        return list(self._kernels)

    def __iter__(self):
        return iter(self._kernels.values())

    def __len__(self) -> int:
        return len(self._kernels)

    def __contains__(self, name: str) -> bool:
        return name in self._kernels

    def __repr__(self) -> str:
        return f"<pykern module {self.name} index={self.index} kernels={len(self)}>"


def per_target(**choices: Any) -> PerTarget:
    """A compile-time parameter's value per target: ``BK=pk.per_target(cuda=16, default=8)``."""
    return PerTarget(**choices)


def _checked_bound(bound: int | Mapping[str, int]) -> int | Mapping[str, int]:
    values = bound.values() if isinstance(bound, Mapping) else [bound]
    unknown = [t for t in bound if t not in TARGET_NAMES] if isinstance(bound, Mapping) else []
    if unknown or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values):
        raise ValueError(f"min_blocks_per_sm must be an int >= 0 or a mapping of {TARGET_NAMES} to "
                         f"such ints, got {bound!r}")
    return dict(bound) if isinstance(bound, Mapping) else bound


def _checked_lsr(lsr: bool | Mapping[str, bool]) -> bool | Mapping[str, bool]:
    values = lsr.values() if isinstance(lsr, Mapping) else [lsr]
    unknown = [t for t in lsr if t not in TARGET_NAMES] if isinstance(lsr, Mapping) else []
    if unknown or not all(isinstance(v, bool) for v in values):
        raise ValueError(f"loop_strength_reduction must be a bool or a mapping of {TARGET_NAMES} to "
                         f"bools, got {lsr!r}")
    return dict(lsr) if isinstance(lsr, Mapping) else lsr


def _checked_moves(moves: tuple[str, ...], compile_params, kernel: str) -> tuple[str, ...]:
    moves = (moves,) if isinstance(moves, str) else tuple(moves)
    unknown = [m for m in moves if m not in compile_params]
    if unknown:
        raise ValueError(f"{kernel}: moves names {unknown}, not compile-time parameters of the kernel "
                         f"({', '.join(compile_params) or 'none'})")
    return moves


def storage_type(ty, kernel: str, param: str) -> T.DType:
    """The unsigned integer of ``ty``'s size (``moves``); an error for anything but a scalar dtype."""
    if not isinstance(ty, T.DType) or ty.is_bool or ty.nbytes not in T.UINT_OF_SIZE:
        raise TypeError(f"{kernel}: moves names {param}, which must be bound to a scalar dtype of 1, 2, 4 "
                        f"or 8 bytes, not {ty!r}")
    return T.UINT_OF_SIZE[ty.nbytes]


def kernel(fn: Callable | None = None, *, max_block_size: int = 1024,
           min_blocks_per_sm: int | Mapping[str, int] = 0,
           loop_strength_reduction: bool | Mapping[str, bool] = True,
           moves: tuple[str, ...] = ()):
    """Declare a kernel: ``@pykern.kernel`` or ``@pykern.kernel(max_block_size=256)``.

    ``min_blocks_per_sm`` asks the compiler to fit that many blocks of ``max_block_size`` threads on
    one SM (CU) at once, limiting registers per thread: occupancy for kernels that wait at barriers.
    A mapping (``{"cuda": 2}``) bounds only the targets it names.

    ``loop_strength_reduction={"cuda": False}`` turns LLVM's loop strength reduction off for the
    targets named (or all, with ``False``): on simple element-wise loops it costs compile time (28% of
    sm_90 code generation over the stdlib) and can leave code no faster. LLVM's switch is per module, so
    a module's code is generated without it only when every kernel in it opts out.

    ``moves=("T",)`` names compile-time type parameters whose values the kernel only moves (loads,
    stores, selects, zeros): its code is compiled for the unsigned integer of the type's size, so
    ``gather`` of f32, u32 and i32 is one compiled kernel under three names, each launch still checked
    against its declared types. A kernel that computes on such a value (arithmetic, comparisons,
    conversions) must not name it: it would compute on the integer.
    """
    if not 1 <= max_block_size <= 1024:
        raise ValueError(f"max_block_size must be in 1..1024, got {max_block_size}")
    if fn is None:
        return lambda f: KernelDef(f, max_block_size, min_blocks_per_sm, loop_strength_reduction, moves)
    return KernelDef(fn, max_block_size, min_blocks_per_sm, loop_strength_reduction, moves)


def func(fn: Callable) -> FuncDef:
    """Declare a device function, callable from kernels and other device functions."""
    return FuncDef(fn)
