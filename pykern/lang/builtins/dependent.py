"""Programmatic dependent launch: a kernel's two halves of a hand-over with the kernel before it.

``pk.grid_dependency_wait()`` and ``pk.launch_dependents()`` let two kernels on one stream overlap
where a launch asks for it (``Function.launch(..., programmatic=True)``, CUDA on sm_90+): the
dependent kernel's blocks may start while the kernel before it still runs, so their set-up (block
scheduling, index arithmetic, loads of data the first kernel does not write) hides behind its end
instead of following it. A kernel boundary costs ~1.2 us in a CUDA graph (docs/targets/cuda.md), a
tenth of a small mat-vec.

* ``grid_dependency_wait()``: the calling thread waits until the kernels it depends on have
  finished and their writes are visible (PTX ``griddepcontrol.wait``). Everything the dependent
  kernel reads from the kernel before it must come after it.
* ``launch_dependents()``: this block no longer holds back the dependent kernel's start (PTX
  ``griddepcontrol.launch_dependents``); the dependent starts once every block has called it or
  ended. It promises nothing about memory: the wait still waits for the whole kernel.

Both lower to the instructions on NVPTX sm_90+ and to nothing elsewhere (older NVPTX archs, AMDGPU,
the CPU), which is the same meaning: there a launch never overlaps its predecessor, so the wait has
nothing left to wait for. Each is an ordering point for the compiler (a memory clobber), so loads
written after the wait are never hoisted above it.
"""
from __future__ import annotations

from ...ir import types as T
from .core import Builtin, lowering, typing_rule

grid_dependency_wait = Builtin("grid_dependency_wait")
launch_dependents = Builtin("launch_dependents")
_OPS = {grid_dependency_wait: "wait", launch_dependents: "launch_dependents"}


@typing_rule(grid_dependency_wait, launch_dependents)
def _type_dependency(tp, node, marker):
    tp.args_exact(node, node.args, 0, marker.name)
    return tp.intrinsic(marker, T.void, [], node, op=_OPS[marker])


@lowering(grid_dependency_wait, launch_dependents)
def _lower_dependency(lo, e):
    lo.frame.grid_dependency(e.attrs["op"])
