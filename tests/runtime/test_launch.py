"""Launch-time argument checking: every bad launch raises a LaunchError naming what, expected and got."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import ml_dtypes
import numpy as np
import pytest

import pykern as pk
from pykern import ConstPtr, Ptr, bf16, bool_, f8e4m3, f16, f32, i8, i32, usize


@pk.kernel(max_block_size=256)
def k_args(n: usize, a: f32, flag: bool_, small: i8, h: f16, x: ConstPtr[f32], y: Ptr[i32]):
    i = pk.global_id()
    if i < n and flag:
        y[i] = i32(a * x[i]) + i32(small) + i32(h)


def good_args(dev):
    return [8, 2.0, True, -3, 1.5, dev.to_device(np.arange(8, dtype=np.float32)), dev.zeros(8, np.int32)]


def _set(k, v):
    def f(args, dev):
        args[k] = v(dev) if callable(v) else v
        return args
    return f


def _numpy_view(dev):
    return np.arange(16, dtype=np.float32)[::2]


BAD_ARGS = [
    ("too few", lambda a, d: a[:-1], [r"takes 7 arguments \(n, a, flag, small, h, x, y\), got 6"]),
    ("too many", lambda a, d: a + [1], [r"takes 7 arguments", "got 8"]),
    ("none at all", lambda a, d: [], [r"takes 7 arguments", "got 0"]),
    ("wrong dtype device array", _set(6, lambda d: d.zeros(8, np.float32)), ["'y'", "i32", "f32"]),
    ("wrong dtype numpy array", _set(5, np.zeros(8, np.float64)), ["'x'", "f32", "float64"]),
    ("numpy array of ints for floats", _set(5, np.zeros(8, np.int32)), ["'x'", "f32", "int32"]),
    ("non-contiguous numpy array", _set(5, _numpy_view), ["'x'", "C-contiguous"]),
    ("int above range", _set(3, 300), ["'small'", "i8", "300", r"-128..127"]),
    ("int below range", _set(3, -129), ["'small'", "i8", "-129"]),
    ("negative for unsigned", _set(0, -1), ["'n'", "u64", "-1", r"0..18446744073709551615"]),
    ("too big for u64", _set(0, 2 ** 64), ["'n'", "u64", str(2 ** 64)]),
    ("numpy int out of range", _set(3, np.int64(1000)), ["'small'", "i8", "1000"]),
    ("float for int", _set(0, 8.0), ["'n'", "u64", "float 8.0"]),
    ("None for scalar", _set(1, None), ["'a'", "f32", "NoneType None"]),
    ("None for int", _set(3, None), ["'small'", "i8", "NoneType"]),
    ("bool for int", _set(0, True), ["'n'", "u64", "bool True"]),
    ("numpy bool for int", _set(3, np.bool_(True)), ["'small'", "i8", "True"]),
    ("bool for float", _set(1, False), ["'a'", "f32", "bool False"]),
    ("int for bool", _set(2, 1), ["'flag'", "bool", "int 1"]),
    ("string for float", _set(1, "2.0"), ["'a'", "f32", "str '2.0'"]),
    ("string for f16", _set(4, "x"), ["'h'", "f16", "str 'x'"]),
    ("list for pointer", _set(5, [1.0, 2.0]), ["'x'", r"pointer to f32", "list"]),
    ("float for pointer", _set(6, 3.5), ["'y'", r"pointer to i32", "float"]),
    ("bool for pointer", _set(6, True), ["'y'", r"pointer to i32", "bool"]),
    ("negative address", _set(6, -8), ["'y'", "address -8", "out of range"]),
    ("address beyond 64 bits", _set(6, 2 ** 64), ["'y'", "out of range"]),
    ("array of another device", _set(5, lambda d: pk.device("cpu", wave_size=32 if d.target.wave_size == 64 else 64)
                                     .to_device(np.zeros(8, np.float32))), ["'x'", "lives on cpu", "runs on"]),
]


@pytest.mark.parametrize("case", BAD_ARGS, ids=[c[0] for c in BAD_ARGS])
def test_bad_arguments(case):
    _, mutate, needles = case
    dev = pk.device("cpu")
    args = mutate(good_args(dev), dev)
    with pytest.raises(pk.LaunchError) as info:
        k_args.launch(1, 8, *args, device=dev)
    msg = str(info.value)
    assert "k_args" in msg
    for needle in needles:
        assert __import__("re").search(needle, msg), f"{needle!r} not in {msg!r}"


BAD_CONFIGS = [
    ("grid zero", dict(grid=0), ["grid", r"at least 1", r"\(0, 1, 1\)"]),
    ("grid negative dim", dict(grid=(2, -1)), ["grid", r"\(2, -1, 1\)"]),
    ("grid beyond 32 bits", dict(grid=(2 ** 32 + 1,)), ["grid", r"below 2\*\*32", str(2 ** 32 + 1)]),
    ("grid four dims", dict(grid=(1, 1, 1, 1)), ["grid", "tuple of up to 3 ints", r"\(1, 1, 1, 1\)"]),
    ("grid float in a tuple", dict(grid=(2.0,)), ["grid", r"\(2.0,\)"]),
    ("grid string", dict(grid="4"), ["grid", "'4'"]),
    ("block zero", dict(block=(8, 0)), ["block", r"\(8, 0, 1\)"]),
    ("block float dims", dict(block=(8.0, 1)), ["block", r"\(8.0, 1\)"]),
    ("block empty", dict(block=()), ["block", r"\(\)"]),
    ("block over max_block_size", dict(block=(16, 32)), ["512 threads", "maximum block size 256"]),
    ("block over max 1-d", dict(block=257), ["257 threads", "256"]),
    ("negative shared_mem", dict(shared_mem=-1), ["shared_mem", r"non-negative|\[0, ", "-1"]),
    ("huge shared_mem", dict(shared_mem=2 ** 40), ["shared_mem", str(2 ** 40)]),
    ("float shared_mem", dict(shared_mem=16.0), ["shared_mem", "16.0"]),
]


@pytest.mark.parametrize("case", BAD_CONFIGS, ids=[c[0] for c in BAD_CONFIGS])
def test_bad_launch_configuration(case):
    _, cfg, needles = case
    dev = pk.device("cpu")
    grid, block = cfg.get("grid", 1), cfg.get("block", 8)
    with pytest.raises(pk.LaunchError) as info:
        k_args.launch(grid, block, *good_args(dev), shared_mem=cfg.get("shared_mem", 0), device=dev)
    msg = str(info.value)
    assert "k_args" in msg
    for needle in needles:
        assert __import__("re").search(needle, msg), f"{needle!r} not in {msg!r}"


# regression: a by-value cache lookup once let 2.0, True and np.float64(4.0) launch as ints
@pytest.mark.parametrize("grid", [2.0, True, np.float64(4.0)], ids=["float", "bool", "np.float64"])
def test_scalar_grid_must_be_an_int(grid):
    dev = pk.device("cpu")
    with pytest.raises(pk.LaunchError, match="grid"):
        k_args.launch(grid, 8, *good_args(dev), device=dev)


# regression: a list grid/block once raised TypeError (unhashable) from that cache lookup
def test_list_grid_and_block_are_accepted():
    dev = pk.device("cpu")
    args = good_args(dev)
    k_args.launch([1, 1], [8], *args, device=dev)
    assert args[6].to_host().tolist() == [2 * k - 3 + 1 for k in range(8)]


def test_tuple_grid_and_block_are_accepted():
    dev = pk.device("cpu")
    args = good_args(dev)
    k_args.launch((1, 1), (8,), *args, device=dev)
    assert args[6].to_host().tolist() == [2 * k - 3 + 1 for k in range(8)]


@pytest.mark.parametrize("config", [(1,), (1, 8, None, 0, 5), 3], ids=["one", "five", "not a tuple"])
def test_bad_subscript_config(config):
    with pytest.raises(pk.LaunchError, match=r"k_args: launch as kernel\[grid, block\]"):
        k_args.instance()[config]


def test_host_array_on_gpu_device(device):
    if device.kind == "cpu":
        pytest.skip("NumPy arrays are device memory on the CPU device")
    args = good_args(device)
    args[5] = np.zeros(8, np.float32)
    with pytest.raises(pk.LaunchError, match=r"'x' is a host NumPy array; copy it with device.to_device\(\)"):
        k_args.launch(1, 8, *args, device=device)


def test_function_handle_checks_too():
    dev = pk.device("cpu")
    fn = dev.get_or_load_func("k_args", k_args.instance().module)
    with pytest.raises(pk.LaunchError, match=r"argument 'small' expects i8, got int 128 \(out of range -128..127\)"):
        fn[1, 8](8, 2.0, True, 128, 1.0, None, None)


# regression: shared_mem once had no upper bound; the CPU runtime's 32-bit field truncated 2**40 to 0 and the
# kernel corrupted the heap (the process aborted). Run in a subprocess so a regression cannot kill the tests.
def test_oversized_shared_mem_is_a_launch_error(tmp_path):
    script = tmp_path / "dyn.py"
    script.write_text(textwrap.dedent('''
        import numpy as np
        import pykern as pk
        from pykern import Ptr, f32

        @pk.kernel
        def dyn(p: Ptr[f32]):
            d = pk.shared.dynamic(f32)
            t = pk.thread_idx.x
            d[t] = 1.0
            pk.syncthreads()
            p[t] = d[t]

        try:
            dyn[1, 1024, None, 2 ** 40](np.zeros(1024, np.float32))
            print("ran")
        except pk.LaunchError as exc:
            print("LaunchError", exc)
    '''))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert proc.stdout.startswith("LaunchError") and "shared_mem" in proc.stdout, proc.stdout


# ---------------------------------------------------------------------------- what good launches accept
@pk.kernel
def k_scalars(out: Ptr[f32], h: f16, b: bf16, e: f8e4m3, x: f32, i: i8, p: ConstPtr[f32]):
    out[0] = f32(h)
    out[1] = f32(b)
    out[2] = f32(e)
    out[3] = x
    out[4] = f32(i)
    out[5] = 1.0 if p is None else p[0]


def test_scalar_conversions_round_like_ml_dtypes():
    dev = pk.device("cpu")
    out = np.zeros(6, np.float32)
    v = 1.0 + 2 ** -9 + 2 ** -12
    k_scalars[1, 1](out, v, v, 3.3, np.float64(0.1), np.int8(-5), None)
    assert out.tolist() == [float(np.float16(v)), float(ml_dtypes.bfloat16(v)), float(ml_dtypes.float8_e4m3fn(3.3)),
                            float(np.float32(0.1)), -5.0, 1.0]
    # an int address and a device array for a pointer; every launch spelling
    src = dev.to_device(np.array([42.0], np.float32))
    dout = dev.zeros(6, np.float32)
    k_scalars.launch(1, 1, dout, 1, 1, 1, 1.0, 1, src.ptr, device=dev)
    assert dout.to_host()[5] == 42.0
    k_scalars[1, 1, None, 0](dout, 2, 2, 2, 2, 2, src)
    assert dout.to_host().tolist() == [2, 2, 2, 2, 2, 42]
    fn = dev.get_or_load_func("k_scalars", k_scalars.instance().module)
    fn[(1, 1, 1), (1,), None, 64](dout, 3, 3, 3, 3, 3, None)
    assert dout.to_host().tolist() == [3, 3, 3, 3, 3, 1]


class _BoundLauncherDevice:
    """A stand-in for a device with a bound launcher (CUDA's ``fast_launcher``), recording launches,
    so the generated hot path of ``launch.Function`` runs without a GPU."""

    kind = "cpu"
    check_bounds = False

    def __init__(self, target, size):
        self.target, self.launches, self.bound = target, [], 0
        self.buffer = memoryview(bytearray(size))
        self.handle = type("Handle", (), {"param_buffer": self.buffer})()

    def fast_launcher(self, handle, sig):
        def go(grid, block, shared, stream):
            self.launches.append((grid, block, shared, stream, bytes(self.buffer)))

        def bind(grid, block):  # CUDA: cuLaunchKernelEx with a config built once for the pair
            def launch_default():
                self.bound += 1
                go(grid, block, 0, None)
            return launch_default
        go.bind = bind
        return go

    def launch_packed(self, *args, **kwargs):
        raise AssertionError("a device with a bound launcher is launched through it")


def test_bound_launcher_hot_path_packs_like_the_checked_path():
    from pykern.runtime.base import DeviceArray
    from pykern.runtime.launch import Function
    cpu = pk.device("cpu")
    inst = k_args._only_instance()
    sig = cpu.get_or_load_func(inst.name, inst.module).sig
    dev = _BoundLauncherDevice(cpu.target, sig.kernarg_size)
    fn = Function(dev, inst, sig, dev.handle)
    x, y = DeviceArray(dev, 4096, (8,), f32), DeviceArray(dev, 8192, (8,), i32)
    args = (8, 2.0, True, -3, 1.5, x, y)
    fn.launch(3, 64, *args)                 # checked, then remembered
    fn.launch(3, 64, *args)                 # hot
    fn.launch((3, 2), (64, 2), *args)
    fn.launch((3, 2), (64, 2), *args)
    fn[3, 64](*args)
    first, *rest = dev.launches
    assert first[:4] == ((3, 1, 1), (64, 1, 1), 0, None)
    assert all(r[4] == first[4] for r in rest)  # the same bytes packed either way
    assert [r[:2] for r in rest] == [((3, 1, 1), (64, 1, 1)), ((3, 2, 1), (64, 2, 1)), ((3, 2, 1), (64, 2, 1)),
                                     ((3, 1, 1), (64, 1, 1))]
    assert dev.bound == 3  # the repeated pairs on the default stream went through their bound launchers
    fn.launch(3, 64, *args, shared_mem=128)  # not the default: the checked path, still launched
    assert dev.launches[-1][2] == 128
    fn.launch(3, 64, *args, stream=7)        # a stream stays on the hot path and reaches the launcher
    fn[3, 64, 9](*args)
    assert [r[:4] for r in dev.launches[-2:]] == [((3, 1, 1), (64, 1, 1), 0, 7), ((3, 1, 1), (64, 1, 1), 0, 9)]
    assert dev.launches[-1][4] == first[4]
    for bad, message in (((3, 512), "exceeds its maximum block size 256"), ((3, True), "must be an int")):
        with pytest.raises(pk.LaunchError, match=message):
            fn.launch(*bad, *args)
    with pytest.raises(pk.LaunchError, match="takes 7 arguments"):
        fn.launch(3, 64, *args[:3])
    with pytest.raises(pk.LaunchError, match="'a'"):
        fn.launch(3, 64, 8, "two", *args[2:])


def test_default_device_is_chosen_once(monkeypatch):
    """kernel[grid, block](...) with plain pointers asks for the default device on every launch:
    probing the GPU runtimes each time (a failed hip-python import is retried) cost ~100 us a launch."""
    from pykern.runtime import devices
    first = devices.device()
    probes = []
    monkeypatch.setattr(devices, "_available", lambda kind: probes.append(kind) or False)
    assert devices.device() is first and devices.device() is first
    assert probes == []
