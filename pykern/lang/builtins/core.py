"""The registry of built-ins: one ``Definition`` per built-in, keyed by the object a kernel names.

A kernel names a built-in through a marker object (``pk.sqrt``, ``pk.atomic.add``, ``pk.thread_idx``,
and Python's own ``min``/``max``/``abs``); the marker does nothing by itself. Its ``Definition``
holds the built-in's whole meaning, registered side by side in one group module of this package:

* ``typing``: the typing rule, called by the front end as ``rule(typer, call, marker)`` with the
  ``ast.Call`` and the marker called (one rule may serve several markers: the three fences);
  it checks the arguments and returns typed IR (usually an ``ir.nodes.Intrinsic`` that refers back to
  this definition) or a compile-time value;
* ``lower``: the lowering, called by ``lower/llvm.py`` as ``lower(lowering, node)`` with the
  ``Intrinsic``; it emits LLVM IR through the lowering's builder and the target's ``KernelFrame``;
* ``loop``: for iterables (``pk.grid_stride``...), ``rule(typer, for_statement, marker)``, which types
  the whole ``for`` statement;
* ``declare``: for array declarations (``pk.shared.array``...), ``rule(typer, name, call, target,
  marker)``, which types ``name = call``;
* ``attribute``: for ``pk.thread_idx`` and its kind, ``rule(typer, attribute, marker)`` for ``marker.x``;
* ``keywords``: the keyword arguments the typing rule reads; any other is refused before it runs.

So the front end and the lowering never spell a built-in's name: they look its definition up here,
and the typed IR carries the definition itself. Importing this module does no work.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable


class Builtin:
    """A function usable only inside kernels (``pk.syncthreads()``, ``pk.atomic.add(...)``)."""

    def __init__(self, name: str, doc: str = ""):
        self.name = name
        self.__doc__ = doc

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"pykern.{self.name} can only be used inside a @pykern.kernel or @pykern.func")

    def __repr__(self) -> str:
        return f"<pykern built-in {self.name}>"


class Dim3:
    """``thread_idx``, ``block_idx``, ``block_dim``, ``grid_dim``: read ``.x``, ``.y`` or ``.z``."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"<pykern built-in {self.name}>"


class Namespace:
    """A group of built-ins (``pk.atomic``, ``pk.wave``, ``pk.shared``, ``pk.local``)."""

    def __init__(self, prefix: str, names: list[str]):
        for n in names:
            setattr(self, n, Builtin(f"{prefix}.{n}"))


class TargetConstant:
    """A name whose value the target fixes, known at compile time: the front end reads it as
    ``value(target)`` (``pk.wave_size``, ``pk.tile_bytes``)."""

    def value(self, target) -> int:
        raise NotImplementedError


class WaveSize(TargetConstant):
    """``pk.wave_size``: an int fixed per target and arch, known at compile time."""

    def value(self, target) -> int:
        return target.wave_size

    def __repr__(self) -> str:
        return "<pykern wave_size (compile-time)>"


class TileBytes(TargetConstant):
    """``pk.tile_bytes``: the bytes of each array a thread takes per step of a ``grid_stride`` /
    ``parallel_range`` loop on this target (16 on NVIDIA, 0 where such loops go one element at a
    time): an int known at compile time, for code that sizes its own work to the lowering's tiles."""

    def value(self, target) -> int:
        return target.tile_bytes

    def __repr__(self) -> str:
        return "<pykern tile_bytes (compile-time)>"


#: the targets a per-target choice names (``pk.per_target``, ``min_blocks_per_sm``'s mapping)
TARGET_NAMES = ("amdgpu", "cuda", "cpu")


class PerTarget:
    """``pk.per_target(cuda=16, default=8)``: a compile-time parameter's value chosen per target.

    A tile size that pays on one target can spill on another (registers are counted and sized
    differently), yet the kernel's text and its host wrapper should stay one. An instance takes
    such a value for any compile-time parameter; typing for a target sees that target's value (as
    if the instance had been made with it), and ``KernelInstance.params_for(target)`` gives the host
    the same value for the launch shape. Keys are target names (``amdgpu``, ``cuda``, ``cpu``) and
    ``default``, which serves the targets not named; without it every target must be named.
    """

    __slots__ = ("choices",)

    def __init__(self, **choices: Any):
        unknown = [k for k in choices if k not in TARGET_NAMES and k != "default"]
        missing = [] if "default" in choices else [t for t in TARGET_NAMES if t not in choices]
        if unknown or missing or len(choices) < 2:
            raise ValueError(f"per_target takes values for targets {TARGET_NAMES} and 'default' (the "
                             f"targets not named), at least two of them and every target without 'default'; "
                             f"got {sorted(choices)}")
        if any(isinstance(v, PerTarget) for v in choices.values()):
            raise ValueError("per_target values cannot themselves be per_target")
        self.choices = dict(sorted(choices.items()))

    def value(self, target) -> Any:
        """The value for ``target`` (a target object or its name)."""
        name = getattr(target, "name", target)
        return self.choices[name] if name in self.choices else self.choices["default"]

    def __eq__(self, other) -> bool:
        return isinstance(other, PerTarget) and other.choices == self.choices

    def __hash__(self) -> int:
        return hash(tuple(self.choices.items()))

    def __repr__(self) -> str:
        return f"per_target({', '.join(f'{k}={v!r}' for k, v in self.choices.items())})"


@dataclass(eq=False)
class Definition:
    """One built-in: what the front end and the lowering need, found by its marker (module doc)."""

    #: the object kernels name (``pk.sqrt``; ``min`` for Python's)
    marker: Any
    #: as a kernel writes it after ``pk.`` (error messages, the typed IR's text)
    name: str
    typing: Callable[[Any, Any, Any], Any] | None = None
    lower: Callable[[Any, Any], Any] | None = None
    loop: Callable[[Any, Any, Any], Any] | None = None
    declare: Callable[[Any, str, Any, Any, Any], None] | None = None
    attribute: Callable[[Any, Any, Any], Any] | None = None
    keywords: tuple[str, ...] = ()

    def __repr__(self) -> str:
        return f"<definition of pk.{self.name}>"


#: marker object -> its definition (every group module of this package registers into it)
REGISTRY: dict[Any, Definition] = {}


def definition(marker: Any) -> Definition | None:
    """The definition of ``marker``, or None for any other object (unhashable ones included)."""
    try:
        return REGISTRY.get(marker)
    except TypeError:
        return None


def _entry(marker: Any) -> Definition:
    d = REGISTRY.get(marker)
    if d is None:
        d = REGISTRY[marker] = Definition(marker, getattr(marker, "name", getattr(marker, "__name__", repr(marker))))
    return d


def _registrar(field: str, doc: str):
    """A decorator factory filling ``field`` of each marker's definition with the decorated function."""
    def decorator(*markers: Any):
        def register(fn):
            for m in markers:
                setattr(_entry(m), field, fn)
            return fn
        return register
    decorator.__doc__ = doc
    return decorator


def typing_rule(*markers: Any, keywords: tuple[str, ...] = ()):
    """Register the decorated ``rule(typer, call, marker)`` as the typing rule of each of ``markers``."""
    def register(rule):
        for m in markers:
            d = _entry(m)
            d.typing, d.keywords = rule, keywords
        return rule
    return register


lowering = _registrar("lower", "Register the decorated ``lower(lowering, node)`` as the lowering of each "
                               "of ``markers``.")
loop_rule = _registrar("loop", "Register the decorated ``rule(typer, for_statement, marker)`` for "
                               "``for ... in marker(...)``.")
declaration_rule = _registrar("declare", "Register the decorated ``rule(typer, name, call, target, marker)`` "
                                         "for ``name = marker(...)``.")
attribute_rule = _registrar("attribute", "Register the decorated ``rule(typer, attribute, marker)`` for "
                                         "``marker.name`` (``pk.thread_idx.x``).")


def lookup(marker: Any) -> Definition:
    """The definition of a marker that has one (what typing rules name their IR with)."""
    return REGISTRY[marker]


#: device functions that give Python operators their meaning where no instruction does, supplied by
#: the library written in the language (``pykern.math`` registers ``"float_mod"``: C's fmod for ``%``)
OPERATOR_FUNCS: dict[str, object] = {}
