"""The names kernels may use besides their own: GPU built-ins, as plain marker objects.

Importing this module does no work. Each marker only names a rule; the front end
(``pykern.lang.frontend``) owns the type rule and builds the IR for it in one method per built-in,
so a built-in's whole meaning is found by grepping for its name there.
"""
from __future__ import annotations


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


thread_idx, block_idx, block_dim, grid_dim = (Dim3(n) for n in ("thread_idx", "block_idx", "block_dim", "grid_dim"))

_FLAT = ["grid_stride", "parallel_range", "global_id", "lane_id", "syncthreads", "threadfence", "threadfence_block",
         "threadfence_system", "bitcast", "sqrt", "fma", "fabs", "floor", "ceil", "trunc", "rint",
         "copysign", "fmin", "fmax", "minimum", "maximum", "isnan", "isinf", "fast_exp2", "fast_rcp", "select",
         "static_range", "is_aligned", "load", "store", "dot4_i8", "dot4_u8i8"]
globals().update({n: Builtin(n) for n in _FLAT})

atomic = Namespace("atomic", ["add", "sub", "min", "max", "exchange", "cas"])
wave = Namespace("wave", ["shuffle", "shuffle_xor", "shuffle_up", "shuffle_down", "ballot", "any", "all",
                          "sum", "min", "max"])
shared = Namespace("shared", ["array", "dynamic"])
local = Namespace("local", ["array"])


class WaveSize:
    """``pk.wave_size``: an int fixed per target and arch, known at compile time."""

    def __repr__(self) -> str:
        return "<pykern wave_size (compile-time)>"


wave_size = WaveSize()


class TileBytes:
    """``pk.tile_bytes``: the bytes of each array a thread takes per step of a ``grid_stride`` /
    ``parallel_range`` loop on this target (16 on NVIDIA, 0 where such loops go one element at a
    time): an int known at compile time, for code that sizes its own work to the lowering's tiles."""

    def __repr__(self) -> str:
        return "<pykern tile_bytes (compile-time)>"


tile_bytes = TileBytes()

#: device functions that give Python operators their meaning where no instruction does, supplied by
#: the library written in the language (``pykern.math`` registers ``"float_mod"``: C's fmod for ``%``)
OPERATOR_FUNCS: dict[str, object] = {}

__all__ = _FLAT + ["thread_idx", "block_idx", "block_dim", "grid_dim", "atomic", "wave", "shared", "local",
                   "wave_size", "tile_bytes",
                   "Builtin", "Dim3", "Namespace", "WaveSize", "TileBytes", "OPERATOR_FUNCS"]
