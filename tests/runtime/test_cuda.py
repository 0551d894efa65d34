"""The CUDA runtime. Pure parts (parameter buffers, stream handles) run anywhere; the rest runs
kernels built through the NVPTX frame API on a real GPU and is skipped without one."""
import ctypes
import statistics
import struct
import time

import numpy as np
import pytest
from llvmlite import ir

from pykern import config
from pykern.errors import DeviceError, LaunchError
from pykern.ir import types as T
from pykern.runtime import cuda as C
from pykern.targets.base import I32, I64, KernelSignature
from pykern.targets.nvptx import NvptxTarget

F32, F16, I16 = ir.FloatType(), ir.HalfType(), ir.IntType(16)
PTR = ir.PointerType()


def sig_of(name, params, block=256):
    """params: (name, struct format) with "P" for a device pointer."""
    return KernelSignature(name, tuple((n, struct.calcsize(f), struct.calcsize(f),
                                        "ptr" if f == "P" else "value") for n, f in params), block)


def pack(sig, fmts, values) -> bytearray:
    buf = bytearray(sig.kernarg_size)
    for off, f, v in zip(sig.offsets, fmts, values):
        struct.pack_into("<" + ("Q" if f == "P" else f), buf, off, v)
    return buf


SIX = [("x", "P"), ("out", "P"), ("total", "P"), ("counts", "P"), ("n", "i"), ("scale", "f")]


# ---- pure ------------------------------------------------------------------------------------------
def test_param_pointer_array_points_at_each_offset():
    arr = C.param_pointer_array(0x1000, (0, 8, 16, 20))
    assert [arr[i] for i in range(4)] == [0x1000, 0x1008, 0x1010, 0x1014]


class _FakeDriver:
    """Stands in for cuda.bindings.driver and the raw cuLaunchKernel entry point: records what the
    driver would read through kernelParams, and checks the raw calling convention (ints for the
    dimensions, c_void_p or None for every pointer: an int there would be cut to 32 bits)."""

    class CUresult(int):
        CUDA_SUCCESS = 0

    def __init__(self, sig, err=0):
        self.sig, self.err, self.seen = sig, err, None

    def cuLaunchKernel(self, f, gx, gy, gz, bx, by, bz, shm, stream, params, extra):
        assert all(type(v) is int for v in (gx, gy, gz, bx, by, bz, shm))
        assert all(v is None or type(v) is ctypes.c_void_p for v in (f, stream, params, extra))
        ptrs = (ctypes.c_void_p * len(self.sig.params)).from_address(params.value)
        self.seen = [ctypes.string_at(ptrs[i], p[1]) for i, p in enumerate(self.sig.params)], \
            (gx, gy, gz, bx, by, bz, shm, stream and stream.value), f.value, extra
        return self.err

    def cuGetErrorName(self, err):
        return (0, b"CUDA_ERROR_INVALID_VALUE")


def _fake_device(drv):
    dev = C.CudaDevice.__new__(C.CudaDevice)
    dev._drv, dev._ctx, dev._ok, dev._launch = drv, object(), 0, drv.cuLaunchKernel
    C._tls.ctx = dev._ctx
    return dev


def test_launch_packed_hands_the_driver_each_parameter():
    sig = sig_of("k", SIX)
    assert sig.offsets == (0, 8, 16, 24, 32, 36)
    fn = C.CudaFunction(0x7F00_1234_5678, "k", sig, None)
    drv = _FakeDriver(sig)
    args = pack(sig, [f for _, f in SIX], [0x10, 0x20, 0x30, 0x40, -7, 1.5])
    _fake_device(drv).launch_packed(fn, (3, 2, 1), (128, 1, 1), 64, None, args, sig)
    values, dims, handle, extra = drv.seen
    assert [struct.unpack("<" + ("Q" if f == "P" else f), v)[0] for v, (_, f) in zip(values, SIX)] == \
        [0x10, 0x20, 0x30, 0x40, -7, 1.5]
    assert dims == (3, 2, 1, 128, 1, 1, 64, None) and handle == 0x7F00_1234_5678 and extra is None
    # arguments packed in place (as launch.Function does) launch without a copy
    fn.param_buffer[:] = pack(sig, [f for _, f in SIX], [0x11, 0x21, 0x31, 0x41, 9, 2.5])
    _fake_device(drv).launch_packed(fn, (1, 1, 1), (1, 1, 1), 0, None, fn.param_buffer, sig)
    assert struct.unpack("<i", drv.seen[0][4]) == (9,)
    # a stream travels as a full 64-bit pointer
    _fake_device(drv).launch_packed(fn, (1, 1, 1), (1, 1, 1), 0, 0x7F00_0000_0042, args, sig)
    assert drv.seen[1][7] == 0x7F00_0000_0042
    # padding a packer leaves at the end is ignored; too few bytes is a LaunchError
    _fake_device(drv).launch_packed(fn, (1, 1, 1), (1, 1, 1), 0, None, args + bytes(4), sig)
    with pytest.raises(LaunchError, match="36"):
        _fake_device(drv).launch_packed(fn, (1, 1, 1), (1, 1, 1), 0, None, args[:-4], sig)


def test_function_without_signature_is_prepared_at_first_launch():
    sig = sig_of("k", [("a", "i")])
    fn = C.CudaFunction(1, "k", None, None)
    drv = _FakeDriver(sig)
    _fake_device(drv).launch_packed(fn, (1, 1, 1), (1, 1, 1), 0, None, pack(sig, "i", [5]), sig)
    assert drv.seen[0] == [struct.pack("<i", 5)]


def test_kernel_without_parameters_passes_null():
    fn = C.CudaFunction(1, "k", KernelSignature("k", ()), None)
    assert fn.params == 0 and fn.c_params is None and fn.nbytes == 0


def test_launch_error_carries_cuda_error_name():
    sig = sig_of("k", [("a", "i")])
    dev = _fake_device(_FakeDriver(sig, err=1))
    with pytest.raises(DeviceError, match="CUDA_ERROR_INVALID_VALUE"):
        dev.launch_packed(C.CudaFunction(1, "k", sig, None), (1, 1, 1), (1, 1, 1), 0, None, pack(sig, "i", [1]), sig)


def test_stream_handles():
    class Torchish:
        cuda_stream = 77

    class Coreish:
        def __cuda_stream__(self):
            return (0, 88)
    assert C._stream_handle(None) is None and C._stream_handle(5) == 5
    assert C._stream_handle(Torchish()) == 77 and C._stream_handle(Coreish()) == 88


def test_cuda_available_is_a_bool():
    assert C.cuda_available() in (True, False)


# ---- on the GPU ------------------------------------------------------------------------------------
gpu = pytest.mark.skipif(not C.cuda_available(), reason="no CUDA GPU")


def at(b, ptr, i, ty=I32):
    return b.gep(ptr, [i if isinstance(i, ir.Value) else ir.Constant(I32, i)], source_etype=ty)


def when(b, cond, body):
    with b.if_then(cond):
        body()


def build_block_sum(fr):
    """out[block] = sum(x*scale) over 256 threads: a shared tree with barriers, a shuffle-down
    warp tail, an f32 atomic into total; counts[0] via a shared atomic counter, counts[1] via ballots."""
    b = fr.builder
    x, out, total, counts, n, scale = fr.args
    c = lambda v: ir.Constant(I32, v)
    tid, bid, ntid = fr.thread_idx(0), fr.block_idx(0), fr.block_dim(0)
    g = b.add(b.mul(bid, ntid), tid)
    inb = b.icmp_signed("<", g, n)
    v = b.fmul(b.load(at(b, x, b.select(inb, g, c(0)), F32), typ=F32), scale)
    v = b.select(inb, v, ir.Constant(F32, 0))
    tile, cnt = fr.shared_array("tile", F32, 256, 4), fr.shared_array("cnt", I32, 1, 4)
    b.store(v, at(b, tile, tid, F32))
    when(b, b.icmp_unsigned("==", tid, c(0)), lambda: b.store(c(0), cnt))
    fr.barrier(None)
    big = b.fcmp_ordered(">", v, ir.Constant(F32, 0.5))
    when(b, big, lambda: fr.atomic_rmw("add", cnt, c(1), "shared"))
    for s in (128, 64, 32):
        def add(s=s):
            p = at(b, tile, tid, F32)
            b.store(b.fadd(b.load(p, typ=F32), b.load(at(b, tile, b.add(tid, c(s)), F32), typ=F32)), p)
        when(b, b.icmp_unsigned("<", tid, c(s)), add)
        fr.barrier(None)

    def warp0():
        t = b.load(at(b, tile, tid, F32), typ=F32)
        for d in (16, 8, 4, 2, 1):
            t = b.fadd(t, b.bitcast(fr.shuffle("down", b.bitcast(t, I32), c(d), None), F32))

        def lane0():
            b.store(t, at(b, out, bid, F32))
            fr.atomic_rmw("fadd", total, t, "global")
            fr.atomic_rmw("add", counts, b.load(cnt, typ=I32), "global")
        when(b, b.icmp_unsigned("==", tid, c(0)), lane0)
    when(b, b.icmp_unsigned("<", tid, c(32)), warp0)
    pop = b.trunc(b.ctpop(fr.ballot(big, None)), I32)
    when(b, b.icmp_unsigned("==", fr.lane_id(), c(0)), lambda: fr.atomic_rmw("add", at(b, counts, 1), pop, "global"))


def build_lanes(fr):
    """64 threads: the four shuffles of v = 10*tid, lane ids, and dynamic shared memory reversed."""
    b = fr.builder
    (out,) = fr.args
    c = lambda v: ir.Constant(I32, v)
    tid, lane = fr.thread_idx(0), fr.lane_id()
    v = b.mul(tid, c(10))
    args = {"idx": b.add(b.mul(lane, c(3)), c(1)), "xor": c(5), "up": c(3), "down": c(3)}
    for k, kind in enumerate(("idx", "xor", "up", "down")):
        b.store(fr.shuffle(kind, v, args[kind], None), at(b, out, b.add(b.mul(tid, c(4)), c(k))))
    b.store(lane, at(b, out, b.add(tid, c(256))))
    dyn = fr.dynamic_shared(16)
    b.store(b.mul(tid, c(7)), at(b, dyn, tid))
    fr.barrier(None)
    fr.fence("block")
    b.store(b.load(at(b, dyn, b.sub(c(63), tid)), typ=I32), at(b, out, b.add(tid, c(320))))


def build_small_atomics(fr):
    """i16 adds into both halves of one 32-bit word, an f16 add, a float CAS, an f32 max, i64 shared min."""
    b = fr.builder
    p16, ph, pf, p64 = fr.args
    tid, bid = fr.thread_idx(0), fr.block_idx(0)
    fr.atomic_rmw("add", p16, ir.Constant(I16, 1), "global")
    fr.atomic_rmw("add", at(b, p16, 1, I16), ir.Constant(I16, 2), "global")
    fr.atomic_rmw("fadd", ph, ir.Constant(F16, 1.0), "global")
    fr.cmpxchg(pf, ir.Constant(F32, 0), b.uitofp(b.add(bid, ir.Constant(I32, 1)), F32), "global")
    fr.atomic_rmw("fmax", at(b, pf, 1, F32), b.uitofp(tid, F32), "global")
    m = fr.shared_array("m", I64, 1, 8)
    when(b, b.icmp_unsigned("==", tid, ir.Constant(I32, 0)), lambda: b.store(ir.Constant(I64, 1 << 40), m))
    fr.barrier(None)
    fr.atomic_rmw("min", m, b.zext(b.add(tid, ir.Constant(I32, 100)), I64), "shared")
    fr.barrier(None)
    when(b, b.icmp_unsigned("==", tid, ir.Constant(I32, 0)),
         lambda: fr.atomic_rmw("add", p64, b.load(m, typ=I64), "global"))


KERNELS = [
    (sig_of("block_sum", SIX), [PTR] * 4 + [I32, F32], build_block_sum),
    (sig_of("lanes", [("out", "P")], 64), [PTR], build_lanes),
    (sig_of("small_atomics", [("p16", "P"), ("ph", "P"), ("pf", "P"), ("p64", "P")]), [PTR] * 4, build_small_atomics),
]


def build_module(arch="sm_90") -> bytes:
    target = NvptxTarget(arch)
    module = target.new_module("cuda_test")
    for sig, types, body in KERNELS:
        fr = target.begin_kernel(module, sig, types, True)
        body(fr)
        fr.ret()
    return target.finalize(module, [k[0] for k in KERNELS])


def test_test_kernels_compile():
    ptx = build_module().decode()
    assert all(f".entry {k[0].name}(" in ptx for k in KERNELS)


@pytest.fixture(scope="module")
def dev():
    return C.cuda_device(0)


@pytest.fixture(scope="module")
def fns(dev):
    handle = dev.load_artifact(build_module(dev.arch), [k[0] for k in KERNELS])
    return {k[0].name: (dev.get_function(handle, k[0].name), k[0]) for k in KERNELS}


@gpu
def test_device_properties(dev):
    assert dev.kind == "cuda" and dev.arch in ("sm_80", "sm_86", "sm_89", "sm_90")
    assert dev.target.arch == dev.arch and dev.multiprocessors > 0 and dev.name
    assert C.cuda_device(0) is dev


@gpu
def test_arrays_round_trip(dev):
    host = np.arange(1000, dtype=np.float32)
    arr = dev.to_device(host)
    np.testing.assert_array_equal(arr.to_host(), host)
    assert arr.__cuda_array_interface__["data"][0] == arr.ptr
    np.testing.assert_array_equal(dev.zeros((3, 4), np.int64).to_host(), np.zeros((3, 4), np.int64))


@gpu
def test_pooled_memory_is_reused_in_stream_order(dev):
    """Arrays come from the stream-ordered pool: a freed block comes back for the next allocation of
    its size, and what a kernel queued before the free still reads the old contents correctly."""
    assert dev._pooled  # every GPU pykern supports (sm_80+) has memory pools
    import stdlib_kernels.unary as U
    x = dev.to_device(np.arange(1 << 20, dtype=np.float32))
    first = U.neg(x)
    ptr = first.ptr
    del first  # cuMemFreeAsync after the launch queued on the default stream
    again = U.neg(x)
    assert again.ptr == ptr  # the same block, no driver allocation
    np.testing.assert_array_equal(again.to_host(), -np.arange(1 << 20, dtype=np.float32))
    with config.override(cuda_pool=False):
        plain = C.CudaDevice(0)
    assert not plain._pooled
    np.testing.assert_array_equal(plain.to_device(np.ones(7, np.int32)).to_host(), np.ones(7, np.int32))


@gpu
def test_block_sum(dev, fns):
    fn, sig = fns["block_sum"]
    nb, n = 64, 64 * 256 - 100
    x = np.random.default_rng(0).random(nb * 256, dtype=np.float32)
    dx, dout, dtot, dcnt = dev.to_device(x), dev.zeros(nb, np.float32), dev.zeros(1, np.float32), dev.zeros(2, np.int32)
    args = pack(sig, [f for _, f in SIX], [dx.ptr, dout.ptr, dtot.ptr, dcnt.ptr, n, 2.0])
    dev.launch_packed(fn, (nb, 1, 1), (256, 1, 1), 0, None, args, sig)
    dev.synchronize()
    xs = np.where(np.arange(nb * 256) < n, x.astype(np.float64) * 2, 0)
    ref = xs.reshape(nb, 256).sum(1)
    np.testing.assert_allclose(dout.to_host(), ref, rtol=1e-5)
    np.testing.assert_allclose(dtot.to_host()[0], ref.sum(), rtol=1e-5)
    assert list(dcnt.to_host()) == [int((xs > 0.5).sum())] * 2


@gpu
def test_shuffles_lanes_and_dynamic_shared(dev, fns):
    fn, sig = fns["lanes"]
    out = dev.zeros(384, np.int32)
    stream = dev.stream()
    dev.launch_packed(fn, (1, 1, 1), (64, 1, 1), 64 * 4, stream, pack(sig, "P", [out.ptr]), sig)
    stream.synchronize()
    got = out.to_host()
    tid = np.arange(64)
    lane, base = tid % 32, tid - tid % 32
    v = lambda l: (base + l) * 10
    want = np.stack([v((3 * lane + 1) % 32), v(lane ^ 5), v(np.where(lane >= 3, lane - 3, lane)),
                     v(np.where(lane + 3 <= 31, lane + 3, lane))], 1).ravel()
    np.testing.assert_array_equal(got[:256], want)
    np.testing.assert_array_equal(got[256:320], lane)
    np.testing.assert_array_equal(got[320:384], (63 - tid) * 7)


@gpu
def test_small_and_float_atomics(dev, fns):
    fn, sig = fns["small_atomics"]
    p16, ph, pf, p64 = dev.zeros(2, np.int16), dev.zeros(1, np.float16), dev.zeros(2, np.float32), dev.zeros(1, np.int64)
    dev.launch_packed(fn, (4, 1, 1), (256, 1, 1), 0, None, pack(sig, "PPPP", [p16.ptr, ph.ptr, pf.ptr, p64.ptr]), sig)
    dev.synchronize()
    assert list(p16.to_host()) == [1024, 2048]
    assert ph.to_host()[0] == 1024.0
    first, biggest = pf.to_host()
    assert first in (1.0, 2.0, 3.0, 4.0) and biggest == 255.0
    assert p64.to_host()[0] == 4 * 100


@gpu
def test_errors_carry_cuda_names(dev, fns):
    fn, sig = fns["lanes"]
    with pytest.raises(DeviceError, match="CUDA_ERROR_INVALID_VALUE"):  # above .maxntid 64
        dev.launch_packed(fn, (1, 1, 1), (1024, 1, 1), 0, None, pack(sig, "P", [0]), sig)
    with pytest.raises(DeviceError, match="CUDA_ERROR_INVALID_PTX|CUDA_ERROR_INVALID_IMAGE"):
        dev.load_artifact(b".version 7.8\n.target sm_90\n.address_size 64\n.visible .entry k() { bogus; }\n", [])
    with pytest.raises(DeviceError, match="CUDA_ERROR_OUT_OF_MEMORY"):
        dev.alloc(1 << 50)


@gpu
def test_host_launch_overhead(dev, fns, capsys):
    """Host time of one launch of the six-argument kernel (issue 4 asks for at most 5 µs)."""
    fn, sig = fns["block_sum"]
    bufs = [dev.zeros(256, np.float32) for _ in range(4)]
    args = pack(sig, [f for _, f in SIX], [a.ptr for a in bufs] + [0, 1.0])
    grid, block = (1, 1, 1), (32, 1, 1)
    for _ in range(200):
        dev.launch_packed(fn, grid, block, 0, None, args, sig)
    dev.synchronize()
    per = []
    for _ in range(50):
        t = time.perf_counter()
        for _ in range(100):
            dev.launch_packed(fn, grid, block, 0, None, args, sig)
        per.append((time.perf_counter() - t) / 100 * 1e6)
        dev.synchronize()
    drv, h, params = dev._drv, fn.handle, fn.params  # the binding + driver floor, for comparison
    floor = []
    for _ in range(50):
        t = time.perf_counter()
        for _ in range(100):
            drv.cuLaunchKernel(h, 1, 1, 1, 32, 1, 1, 0, None, params, 0)
        floor.append((time.perf_counter() - t) / 100 * 1e6)
        dev.synchronize()
    med, fl = statistics.median(per), statistics.median(floor)
    with capsys.disabled():
        print(f"\nlaunch_packed: median {med:.2f} us/launch (min {min(per):.2f}); "
              f"raw cuLaunchKernel: {fl:.2f} us (min {min(floor):.2f})")
    assert med < 20  # generous: shared CI-less machines vary; the figure above is what counts


# ---- a front-end kernel through pykern.device("cuda") ------------------------------------------------
def _pk_block_sum():
    import importlib.util
    import pathlib
    path = pathlib.Path(__file__).parents[1] / "targets" / "test_nvptx.py"
    spec = importlib.util.spec_from_file_location("_nvptx_tests", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.pk_block_sum()


@gpu
def test_front_end_kernel_on_gpu(capsys):
    import pykern as pk
    dev = pk.device("cuda")
    assert isinstance(dev, C.CudaDevice)
    kern = _pk_block_sum()
    nb, n = 40, 40 * 256 - 77
    x = np.random.default_rng(1).random(nb * 256, dtype=np.float32)
    dx, out, total, hits = dev.to_device(x), dev.zeros(nb, np.float32), dev.zeros(1, np.float32), dev.zeros(1, np.uint32)
    loads = dev.load_count  # the device is shared with earlier tests: count this kernel's loads only
    kern[nb, 256](n, dx, out, total, hits)
    xs = np.where(np.arange(nb * 256) < n, x.astype(np.float64), 0)
    np.testing.assert_allclose(out.to_host(), xs.reshape(nb, 256).sum(1), rtol=1e-5)
    np.testing.assert_allclose(total.to_host()[0], xs.sum(), rtol=1e-5)
    assert hits.to_host()[0] == int((xs.reshape(-1, 32) > 0.5).any(1).sum())
    assert dev.load_count == loads + 1
    kern[nb, 256](n, dx, out, total, hits)  # second launch: no reload
    assert dev.load_count == loads + 1
    fn = dev.get_or_load_func("block_sum", kern._only_instance().module)
    args = (n, dx, out, total, hits)
    per = []
    for _ in range(30):
        t = time.perf_counter()
        for _ in range(100):
            fn.launch((1, 1, 1), (32, 1, 1), *args)
        per.append((time.perf_counter() - t) / 100 * 1e6)
        dev.synchronize()
    with capsys.disabled():
        print(f"\nFunction.launch (5 args, checks and packing included): median {statistics.median(per):.2f} us")
