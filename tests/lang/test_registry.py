"""The built-in registry: every built-in a kernel can name has one definition, the typed IR carries
that definition, and a new built-in is defined in one place (its marker, typing rule and lowering)."""
from __future__ import annotations

import numpy as np
import pytest

import pykern as pk
from pykern import Ptr, f32, i64, usize
from pykern.ir import nodes as N
from pykern.ir import printer
from pykern.lang import builtins as B
from pykern.lang.builtins.core import REGISTRY, Builtin, Dim3, lowering, typing_rule
from pykern.lang.values import CT
from pykern.targets.registry import make_target


def _markers():
    """Every built-in marker pykern exports, namespaces' members included."""
    for name in B.__all__:
        obj = getattr(pk, name, None)
        if isinstance(obj, (Builtin, Dim3)):
            yield obj
        elif isinstance(obj, B.Namespace):
            yield from (v for v in vars(obj).values() if isinstance(v, Builtin))


def test_every_exported_builtin_has_a_definition():
    markers = list(_markers())
    for m in markers:
        d = B.definition(m)
        assert d is not None and d.marker is m, m
        assert d.typing is not None or d.attribute is not None, m
    # and nothing else is registered but Python's own names a kernel may call
    assert set(REGISTRY) == set(markers) | {min, max, abs}
    assert {B.definition(f).name for f in (min, max, abs)} == {"min", "max", "abs"}


@pk.kernel
def k_uses_many(x: Ptr[f32], out: Ptr[f32], flags: Ptr[i64]):
    i = pk.global_id()
    v = pk.sqrt(pk.fabs(x[i])) + abs(x[i]) + min(x[i], 1.0)
    out[i] = pk.wave.sum(v) + pk.select(pk.isnan(v), 0.0, v)
    pk.syncthreads()
    pk.atomic.add(flags, 0, i64(pk.lane_id()))


def test_typed_ir_refers_to_registry_entries():
    fn = k_uses_many._only_instance().typed(make_target("cpu", wave_size=32))
    used = {n.builtin for n in N.walk(fn.body) if isinstance(n, N.Intrinsic)}
    expected = {pk.sqrt, pk.fabs, pk.wave.sum, pk.select, pk.isnan, pk.syncthreads, pk.atomic.add, pk.lane_id,
                pk.minimum, pk.thread_idx, pk.block_idx, pk.block_dim}
    assert used == {REGISTRY[m] for m in expected}  # abs and min are typed as pk.fabs and pk.minimum
    assert all(d.lower is not None for d in used)


# ---- a built-in added from outside pykern: one marker, one typing rule, one lowering --------------
twice_plus = Builtin("twice_plus")


@pk.kernel
def k_twice_plus(n: usize, x: Ptr[f32], y: Ptr[f32]):
    for i in pk.grid_stride(n):
        y[i] = twice_plus(x[i], 0.5)


@pytest.fixture
def registered_twice_plus():
    @typing_rule(twice_plus)
    def _type(tp, node, fn):
        v, c = tp.args_exact(node, node.args, 2, fn.name)
        if not isinstance(c, CT):
            raise tp.error(node.args[1], "twice_plus()'s second argument is a compile-time number")
        v = tp.materialize(v, node.args[0])
        return tp.intrinsic(fn, v.ty, [v, tp.const(c.value, v.ty, node.args[1])], node)

    @lowering(twice_plus)
    def _lower(lo, e):
        v, c = (lo.expr(a) for a in e.args)
        return lo.arith("add", lo.arith("add", v, v, e.ty), c, e.ty)

    yield
    del REGISTRY[twice_plus]


def test_a_builtin_defined_in_one_place(device, registered_twice_plus):
    x = np.linspace(-3, 3, 1000, dtype=np.float32)
    dx, dy = device.to_device(x), device.to_device(np.zeros_like(x))
    k_twice_plus[4, 64](x.size, dx, dy)
    np.testing.assert_array_equal(dy.to_host(), 2 * x + np.float32(0.5))
    typed = k_twice_plus._only_instance().typed(make_target("cpu", wave_size=32))
    assert "pk.twice_plus(x[i], 0.5:f32):f32" in printer.function(typed)


@pk.kernel
def k_twice_plus_unregistered(n: usize, x: Ptr[f32], y: Ptr[f32]):
    for i in pk.grid_stride(n):
        y[i] = twice_plus(x[i], 0.5)


def test_an_unregistered_marker_is_refused():
    with pytest.raises(pk.CompileError, match="built-in twice_plus> cannot be called in a kernel"):
        k_twice_plus_unregistered._only_instance().typed(make_target("cpu", wave_size=64))
