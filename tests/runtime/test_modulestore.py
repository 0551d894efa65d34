"""candle's ModuleStore: one slot per module per device, loaded once, function handles cached."""
from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import pykern as pk
from pykern import ConstPtr, Ptr, f32, usize
from pykern.runtime.cpu import CpuDevice

T = pk.TypeVar("T")


@pk.kernel
def k_scale(n: usize, a: f32, x: Ptr[f32]):
    for i in pk.grid_stride(n):
        x[i] = a * x[i]


@pk.kernel
def k_copy(n: usize, x: ConstPtr[T], y: Ptr[T], *, T):
    for i in pk.grid_stride(n):
        y[i] = x[i]


def make_module(name="store_test") -> pk.Module:
    return pk.Module(name).add(k_scale.instance("scale_f32"),
                               *(k_copy.instance(f"copy_{t.tag}", T=t) for t in (pk.f32, pk.f64, pk.u8, pk.bf16)))


_KEEP: list = []   # devices stay alive: collecting one with two loaded modules crashes (see the xfail below)


def fresh_device() -> CpuDevice:
    dev = CpuDevice(wave_size=64)   # not the shared pk.device("cpu"): its load count starts at 0
    _KEEP.append(dev)
    return dev


def test_module_loads_once_and_handles_are_cached():
    dev, mod = fresh_device(), make_module()
    assert dev.load_count == dev.kernel_load_count == 0
    fn = dev.get_or_load_func("scale_f32", mod)
    assert (dev.load_count, dev.kernel_load_count) == (0, 1), "a request compiles and loads that kernel only"
    assert dev.get_or_load_func("scale_f32", mod) is fn
    others = [dev.get_or_load_func(n, mod) for n in ("copy_f32", "copy_f64", "copy_u8", "copy_bf16")]
    assert (dev.load_count, dev.kernel_load_count) == (0, 5)
    assert len({id(f) for f in others + [fn]}) == 5
    assert [dev.get_or_load_func(n, mod) for n in ("copy_f32", "copy_f64", "copy_u8", "copy_bf16")] == others
    # and they run
    x = dev.to_device(np.arange(10, dtype=np.float32))
    fn[1, 32](10, 3.0, x)
    np.testing.assert_array_equal(x.to_host(), 3 * np.arange(10, dtype=np.float32))


def test_each_module_and_each_device_has_its_own_slot():
    dev1, dev2 = fresh_device(), fresh_device()
    m1, m2 = make_module("same_name"), make_module("same_name")
    dev1.get_or_load_func("copy_f32", m1)
    dev1.get_or_load_func("copy_f32", m2)
    assert dev1.kernel_load_count == 2   # user modules get slots of their own, even with equal names
    assert dev2.kernel_load_count == 0
    f2 = dev2.get_or_load_func("copy_f32", m1)
    assert dev2.kernel_load_count == 1 and f2 is not dev1.get_or_load_func("copy_f32", m1)
    dev1.load_module(m1)
    assert dev1.load_count == 1


def test_a_loaded_module_serves_its_kernels_without_compiling():
    dev, mod = fresh_device(), make_module()
    dev.load_module(mod)
    fns = [dev.get_or_load_func(n, mod) for n in mod.names()]
    assert (dev.load_count, dev.kernel_load_count) == (1, 0)
    x = dev.to_device(np.arange(5, dtype=np.float64)); y = dev.zeros(5, np.float64)
    fns[2][1, 32](5, x, y)
    np.testing.assert_array_equal(y.to_host(), np.arange(5, dtype=np.float64))


def test_get_or_load_func_takes_what_candle_names_a_module_by():
    import stdlib_kernels as sk
    dev = fresh_device()
    fn = dev.get_or_load_func("affine_f32", sk.AFFINE)
    assert dev.get_or_load_func("affine_f32", sk.Id.Affine) is fn
    assert dev.get_or_load_func("affine_f32", int(sk.Id.Affine)) is fn
    assert dev.get_or_load_func("affine_f32", "affine") is fn
    with pytest.raises(KeyError, match="no module 'afine'.*did you mean affine"):
        dev.get_or_load_func("affine_f32", "afine")
    with pytest.raises(TypeError, match="pykern.Module, a module name or an index"):
        dev.get_or_load_func("affine_f32", 1.5)


def test_sixteen_threads_load_once():
    dev, mod = fresh_device(), make_module()
    names = mod.names()
    start = threading.Barrier(16)
    results: dict[int, object] = {}
    errors = []

    def worker(k):
        try:
            start.wait()
            results[k] = dev.get_or_load_func(names[k % len(names)], mod)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert dev.kernel_load_count == len(names), "each kernel is loaded once, whatever the threads"
    for k, fn in results.items():
        assert fn is dev.get_or_load_func(names[k % len(names)], mod)


def test_unknown_kernel_lists_close_matches():
    dev, mod = fresh_device(), make_module()
    with pytest.raises(KeyError) as info:
        dev.get_or_load_func("copy_f63", mod)
    msg = str(info.value)
    assert "copy_f63" in msg and "did you mean" in msg and "copy_f64" in msg and "copy_f32" in msg
    assert dev.load_count == 0, "an unknown name loads nothing"
    with pytest.raises(KeyError) as info:
        mod.get("zzz_nothing_like_it")
    assert "did you mean" not in str(info.value)


def test_module_api():
    mod = make_module()
    assert len(mod) == 5 and "copy_bf16" in mod and "copy_f16" not in mod
    assert mod.names() == ["scale_f32", "copy_f32", "copy_f64", "copy_u8", "copy_bf16"]
    assert [k.name for k in mod] == mod.names() == [k.name for k in mod.kernels]
    assert mod.index is None
    with pytest.raises(ValueError, match="already has a kernel named copy_f32"):
        mod.add(k_copy.instance("copy_f32", T=pk.f32))
    inst = mod.get("copy_u8")
    with pytest.raises(ValueError, match="already belongs to module"):
        pk.Module("other").add(inst)


def test_standalone_kernel_gets_a_private_module():
    inst = k_scale.instance()
    assert inst.module.name == "k_scale" and inst.module.kernels == [inst]
    assert inst.module is inst.module


def test_stdlib_registry():
    import stdlib_kernels as sk
    expected = ["Affine", "Binary", "Cast", "Conv", "Fill", "Indexing", "Quantized", "Reduce", "Sort", "Ternary", "Unary"]
    assert [i.name for i in sk.ALL_IDS] == expected
    modules = [sk.AFFINE, sk.BINARY, sk.CAST, sk.CONV, sk.FILL, sk.INDEXING, sk.QUANTIZED, sk.REDUCE, sk.SORT,
               sk.TERNARY, sk.UNARY]
    for pos, (ident, mod) in enumerate(zip(sk.ALL_IDS, modules)):
        assert isinstance(mod, pk.Module)
        assert mod.index == pos == sk.ALL_IDS.index(ident) == int(ident)
        assert mod.name == ident.name.lower() == mod.name.lower()
        assert sk.module(mod.name) is mod and sk.module(pos) is mod
        assert isinstance(mod.kernels, list)
    assert len({m.uid for m in modules}) == 11
    with pytest.raises(KeyError, match="no stdlib module"):
        sk.module("nope")


def test_stdlib_kernels_load_one_at_a_time_and_the_slot_once():
    import stdlib_kernels as sk
    mod = next((m for m in sk.MODULES if len(m)), None)
    if mod is None:
        pytest.skip("no stdlib family has kernels yet")
    dev = fresh_device()
    names = mod.names()[:3]
    fns = [dev.get_or_load_func(n, mod) for n in names]
    assert dev.kernel_load_count == 3 and dev.load_count == 0
    dev.load_module(mod)
    dev.load_module(mod)
    assert dev.load_count == 1
    assert [dev.get_or_load_func(n, mod) for n in names] == fns


def test_dropping_a_device_with_two_modules_does_not_crash(tmp_path):
    script = tmp_path / "drop.py"
    script.write_text(textwrap.dedent('''
        import gc
        import pykern as pk
        from pykern import Ptr, f32
        from pykern.runtime.cpu import CpuDevice

        @pk.kernel
        def k(p: Ptr[f32]):
            p[0] = 1.0

        dev = CpuDevice()
        for name in ("a", "b"):
            dev.get_or_load_func(name, pk.Module(name).add(k.instance(name)))
        del dev
        gc.collect()
        print("survived")
    '''))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "survived" in proc.stdout, (proc.returncode, proc.stderr[-1500:])


def test_a_whole_module_compile_says_so_on_a_terminal_only():
    import io

    from pykern.runtime.base import _announce

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    tty, pipe = Terminal(), io.StringIO()
    for stream in (tty, pipe):
        with _announce("compiling module unary (149 kernels) for cuda", stream):
            pass
    assert pipe.getvalue() == ""
    assert tty.getvalue().startswith("pykern: compiling module unary (149 kernels) for cuda...") and tty.getvalue().endswith("s\n")
