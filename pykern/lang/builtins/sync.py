"""Ordering between threads: ``pk.syncthreads()`` (a block barrier) and the memory fences."""
from __future__ import annotations

from ...ir import types as T
from .core import Builtin, lowering, typing_rule

syncthreads = Builtin("syncthreads")
threadfence, threadfence_block, threadfence_system = (
    Builtin(n) for n in ("threadfence", "threadfence_block", "threadfence_system"))
_SCOPES = {threadfence: "device", threadfence_block: "block", threadfence_system: "system"}


@typing_rule(syncthreads)
def _type_syncthreads(tp, node, _):
    tp.args_exact(node, node.args, 0, "syncthreads")
    tp.uses_sync = True
    return tp.intrinsic(syncthreads, T.void, [], node)


@lowering(syncthreads)
def _lower_syncthreads(lo, e):
    lo.frame.barrier(e.loc)


@typing_rule(threadfence, threadfence_block, threadfence_system)
def _type_fence(tp, node, fence):
    tp.args_exact(node, node.args, 0, "threadfence")
    return tp.intrinsic(fence, T.void, [], node, scope=_SCOPES[fence])


@lowering(threadfence, threadfence_block, threadfence_system)
def _lower_fence(lo, e):
    lo.frame.fence(e.attrs["scope"])
