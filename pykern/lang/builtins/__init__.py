"""The names kernels may use besides their own: GPU built-ins, each defined once in this package.

A built-in is a marker object (``pk.sqrt``) and a ``core.Definition`` in ``core.REGISTRY``: its
typing rule and its lowering, registered side by side by the decorators of ``core`` in one module
per group: ``thread`` (ids and the loops over threads), ``sync`` (barriers and fences), ``memory``
(``pk.load``/``pk.store``, bit casts, shared and local arrays), ``math``, ``atomics``, ``wave``, ``mma`` (matrix multiply-accumulate on a wave's tiles),
``dependent`` (programmatic dependent launch).
Adding a built-in is one function of each kind in its group's module, its marker exported here (and
from ``pykern/__init__.py``), its test and its row in ``docs/language.md``.

Importing this package registers every built-in; it compiles nothing.
"""
from __future__ import annotations

from .core import (OPERATOR_FUNCS, REGISTRY, Builtin, Definition, Dim3, Namespace, TargetConstant, TileBytes, WaveSize,
                   definition, lookup)
from .atomics import atomic
from .dependent import grid_dependency_wait, launch_dependents
from .math import (ceil, copysign, dot4_i8, dot4_u8i8, fabs, fast_exp2, fast_rcp, floor, fma, fmax, fmin, isinf,
                   isnan, maximum, minimum, rint, select, sqrt, trunc)
from .mma import mma
from .memory import assume_aligned, bitcast, is_aligned, load, local, shared, store
from .sync import syncthreads, threadfence, threadfence_block, threadfence_system
from .thread import (block_dim, block_idx, global_id, grid_dim, grid_stride, lane_id, parallel_range, static_range,
                     thread_idx, tile_bytes)
from .wave import wave, wave_size

__all__ = ["grid_stride", "parallel_range", "global_id", "lane_id", "syncthreads", "threadfence", "threadfence_block",
           "threadfence_system", "bitcast", "sqrt", "fma", "fabs", "floor", "ceil", "trunc", "rint",
           "copysign", "fmin", "fmax", "minimum", "maximum", "isnan", "isinf", "fast_exp2", "fast_rcp", "select",
           "static_range", "is_aligned", "assume_aligned", "load", "store", "dot4_i8", "dot4_u8i8",
           "thread_idx", "block_idx", "block_dim", "grid_dim", "atomic", "wave", "shared", "local", "wave_size",
           "tile_bytes", "mma", "grid_dependency_wait", "launch_dependents",
           "Builtin", "Dim3", "Namespace", "TargetConstant", "WaveSize", "TileBytes", "OPERATOR_FUNCS", "REGISTRY",
           "Definition", "definition", "lookup"]
