"""The HIP runtime. Without an AMD GPU, hip-python is replaced by a fake that keeps device memory in
a dict and records launches: arch selection, the kernel-argument buffer and ``extra`` array, error
naming and the launch checks are all pure Python. The tests that need a real GPU are skipped for that
one reason."""
from __future__ import annotations

import ctypes
import enum
import gc
import struct
import subprocess
import sys

import numpy as np
import pytest
from llvmlite import ir

from pykern.errors import DeviceError, LaunchError
from pykern.runtime import hip as rt
from pykern.targets.amdgpu import AmdgpuTarget
from pykern.targets.base import I32, KernelSignature

F32, PTR = ir.FloatType(), ir.PointerType()
SAXPY = KernelSignature("saxpy", (("n", 4, 4, "value"), ("a", 4, 4, "value"), ("x", 8, 8, "ptr"),
                                  ("y", 8, 8, "ptr")), max_block_size=256)
NEEDS_GPU = "needs a real AMD GPU with ROCm"


def build_saxpy(arch: str) -> bytes:
    t = AmdgpuTarget(arch)
    m = t.new_module("saxpy")
    f = t.begin_kernel(m, SAXPY, [I32, F32, PTR, PTR], False)
    b = f.builder
    i = b.add(b.mul(f.block_idx(0), f.block_dim(0)), f.thread_idx(0))
    n, a, x, y = f.args
    with b.if_then(b.icmp_signed("<", i, n)):
        py = b.gep(y, [i], source_etype=F32)
        b.store(b.fadd(b.fmul(a, b.load(b.gep(x, [i], source_etype=F32), typ=F32)), b.load(py, typ=F32)), py)
    f.ret()
    return t.finalize(m, [SAXPY])


def pack(sig: KernelSignature, *values) -> bytearray:
    """What the launch layer does: each explicit argument at its signature offset."""
    buf = bytearray(sig.kernarg_size)
    for (name, size, _, kind), off, v in zip(sig.params, sig.offsets, values):
        fmt = {("ptr", 8): "<Q", ("value", 4): "<i" if isinstance(v, int) else "<f", ("value", 8): "<q"}[kind, size]
        struct.pack_into(fmt, buf, off, v)
    return buf


class FakeHip:
    """The slice of hip-python's ``hip.hip`` that HipDevice uses, with hip-python's conventions:
    every call returns ``(hipError_t, *results)``."""

    class hipError_t(enum.IntEnum):
        hipSuccess = 0
        hipErrorInvalidValue = 1
        hipErrorOutOfMemory = 2
        hipErrorNoDevice = 100
        hipErrorInvalidImage = 200

    class hipMemcpyKind(enum.IntEnum):
        hipMemcpyHostToDevice = 1
        hipMemcpyDeviceToHost = 2

    HIP_LAUNCH_PARAM_BUFFER_POINTER, HIP_LAUNCH_PARAM_BUFFER_SIZE, HIP_LAUNCH_PARAM_END = 1, 2, 3

    class hipDeviceProp_t:
        gcnArchName = b""
        name = b""

    class hipDeviceAttribute_t(enum.IntEnum):
        hipDeviceAttributeMaxSharedMemoryPerBlock = 74  # hip_runtime_api.h's value

    #: what ROCm reports a block may take on each arch (bytes of LDS)
    SHARED_PER_BLOCK = {"gfx950": 160 * 1024}

    def __init__(self, archs=("gfx90a:sramecc+:xnack-",)):
        self.archs = list(archs)
        self.mem: dict[int, bytearray] = {}
        self.next_ptr = 0x7F0000000000
        self.launches, self.freed, self.loaded = [], [], []
        self.fail: dict[str, FakeHip.hipError_t] = {}
        self.current = None
        ok = self.hipError_t.hipSuccess
        self.ok = ok

    def _r(self, name, *rest):
        return (self.fail.get(name, self.ok), *rest)

    def hipGetDeviceCount(self):
        return self._r("hipGetDeviceCount", len(self.archs)) if self.archs else (self.hipError_t.hipErrorNoDevice, 0)

    def hipGetDeviceProperties(self, props, index):
        props.gcnArchName, props.name = self.archs[index].encode() + b"\0\0", b"Fake Instinct\0"
        return self._r("hipGetDeviceProperties")

    def hipDeviceGetAttribute(self, attr, index):
        assert attr == self.hipDeviceAttribute_t.hipDeviceAttributeMaxSharedMemoryPerBlock
        arch = self.archs[index].split(":")[0]
        return self._r("hipDeviceGetAttribute", self.SHARED_PER_BLOCK.get(arch, 64 * 1024))

    def hipSetDevice(self, index):
        self.current = index
        return self._r("hipSetDevice")

    def hipMalloc(self, n):
        if "hipMalloc" in self.fail:
            return (self.fail["hipMalloc"], None)
        ptr, self.next_ptr = self.next_ptr, self.next_ptr + ((n + 255) // 256) * 256
        self.mem[ptr] = bytearray(n)
        return (self.ok, ptr)

    def hipFree(self, ptr):
        self.freed.append(ptr)
        return self._r("hipFree")

    def hipMemcpy(self, dst, src, n, kind):
        if kind == self.hipMemcpyKind.hipMemcpyHostToDevice:
            self.mem[dst][:n] = np.ascontiguousarray(src).view(np.uint8).reshape(-1)[:n].tobytes()
        else:
            dst.reshape(-1).view(np.uint8)[:n] = np.frombuffer(bytes(self.mem[src][:n]), np.uint8)
        return self._r("hipMemcpy")

    def hipModuleLoadData(self, image):
        self.loaded.append(image)
        return self._r("hipModuleLoadData", "module-handle")

    def hipModuleGetFunction(self, module, name):
        return self._r("hipModuleGetFunction", ("fn", name))

    def hipModuleLaunchKernel(self, f, gx, gy, gz, bx, by, bz, shmem, stream, params, extra):
        record = dict(f=f, grid=(gx, gy, gz), block=(bx, by, bz), shmem=shmem, stream=stream, params=params)
        if extra is not None:  # decode the raw extra array while its buffers are alive
            words = (ctypes.c_void_p * 5).from_address(extra)
            size = ctypes.c_size_t.from_address(words[3]).value
            record.update(words=[words[0], words[2], words[4]], args=ctypes.string_at(words[1], size))
        self.launches.append(record)
        return self._r("hipModuleLaunchKernel")

    def hipDeviceSynchronize(self):
        return self._r("hipDeviceSynchronize")


@pytest.fixture
def fake(monkeypatch):
    hip = FakeHip()
    monkeypatch.setattr(rt, "_hip", lambda: hip)
    return hip


# ---- device selection ---------------------------------------------------------------------------
@pytest.mark.parametrize("arch_name,arch,wave", [("gfx90a:sramecc+:xnack-", "gfx90a", 64),
                                                  ("gfx942:sramecc+:xnack-", "gfx942", 64),
                                                  ("gfx1100", "gfx1100", 32), ("gfx1201", "gfx1201", 32)])
def test_gcn_arch_name_selects_the_target(fake, arch_name, arch, wave):
    fake.archs = ["gfx1030", arch_name]
    dev = rt.HipDevice(1)
    assert (dev.target.arch, dev.target.wave_size, dev.arch_name, dev.kind) == (arch, wave, arch_name, "hip")
    assert dev.target.code_object_version == 5 and arch in repr(dev)


@pytest.mark.parametrize("arch_name,shared", [("gfx90a:sramecc+:xnack-", 64 * 1024), ("gfx950", 160 * 1024)])
def test_max_shared_per_block_is_the_devices_attribute(fake, arch_name, shared):
    """``max_shared_per_block`` is what HIP reports for that GPU (hipDeviceAttributeMaxSharedMemoryPerBlock),
    not the 48 KiB every GPU has; a failing query is a clear error when the device opens."""
    fake.archs = [arch_name]
    assert rt.HipDevice(0).max_shared_per_block == shared
    fake.fail["hipDeviceGetAttribute"] = FakeHip.hipError_t.hipErrorInvalidValue
    with pytest.raises(DeviceError, match=r"hipDeviceGetAttribute\(MaxSharedMemoryPerBlock\) failed"):
        rt.HipDevice(0)


def test_unsupported_or_missing_devices(fake):
    fake.archs = ["gfx906:sramecc-:xnack-"]
    with pytest.raises(DeviceError, match=r"gfx906.*supported: gfx90a, gfx942, gfx950, gfx1030, gfx1100, gfx1101, gfx1150, gfx1151, gfx1200, gfx1201$"):
        rt.HipDevice(0)
    with pytest.raises(DeviceError, match=r"hip:3 does not exist; there are 1"):
        rt.HipDevice(3)
    fake.archs = []
    with pytest.raises(DeviceError, match="no AMD GPU"):
        rt.HipDevice(0)
    assert rt.hip_unavailable_reason() == "ROCm is installed but reports no AMD GPU"
    assert not rt.hip_available()


def test_missing_rocm_library_is_a_clear_error(fake, monkeypatch):
    def dlopen_fails():
        raise RuntimeError("failed to dlopen 'b'libamdhip64.so''")
    monkeypatch.setattr(fake, "hipGetDeviceCount", dlopen_fails)
    with pytest.raises(DeviceError, match="ROCm's HIP runtime could not be loaded") as info:
        rt.HipDevice(0)
    assert "failed to dlopen 'libamdhip64.so'" in str(info.value) and "b'" not in str(info.value)  # issue 25
    assert "libamdhip64" in rt.hip_unavailable_reason()


def test_hip_error_descriptions_are_text_not_bytes(fake, monkeypatch):
    """hip-python gives hipGetErrorString as bytes: the message shows the text (issue 25)."""
    monkeypatch.setattr(fake, "hipGetErrorString", lambda err: (fake.ok, b"device kernel image is invalid"),
                        raising=False)
    dev = rt.HipDevice(0)
    fake.fail["hipModuleLoadData"] = FakeHip.hipError_t.hipErrorInvalidImage
    with pytest.raises(DeviceError) as info:
        dev.load_artifact(build_saxpy("gfx90a"), [SAXPY])
    assert str(info.value) == ("hipModuleLoadData failed: hipErrorInvalidImage (200): "
                               "device kernel image is invalid")


def test_hip_errors_carry_hips_error_name(fake):
    dev = rt.HipDevice(0)
    fake.fail["hipMalloc"] = FakeHip.hipError_t.hipErrorOutOfMemory
    with pytest.raises(DeviceError, match=r"hipMalloc\(4096\) failed: hipErrorOutOfMemory \(2\)"):
        dev.empty(1024, np.float32)
    fake.fail["hipModuleLoadData"] = FakeHip.hipError_t.hipErrorInvalidImage
    with pytest.raises(DeviceError, match="hipModuleLoadData failed: hipErrorInvalidImage"):
        dev.load_artifact(build_saxpy("gfx90a"), [SAXPY])


def test_import_pykern_does_not_import_hip_python():
    code = "import sys, pykern, pykern.runtime.hip, pykern.targets.amdgpu; assert 'hip' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


# ---- memory ---------------------------------------------------------------------------------------
def test_arrays_round_trip_and_free(fake):
    dev = rt.HipDevice(0)
    host = np.arange(12, dtype=np.float32).reshape(3, 4)
    arr = dev.to_device(host)
    assert arr.ptr in fake.mem and arr.__cuda_array_interface__["data"] == (arr.ptr, False)
    np.testing.assert_array_equal(arr.to_host(), host)
    ptr = arr.ptr
    del arr
    gc.collect()
    assert ptr in fake.freed


# ---- code objects and launches ------------------------------------------------------------------
def test_launch_passes_the_packed_buffer_through_raw_extra(fake):
    dev = rt.HipDevice(0)
    mod = dev.load_artifact(build_saxpy("gfx90a"), [SAXPY])
    fn = dev.get_function(mod, "saxpy")
    assert fn.handle == ("fn", b"saxpy") and fn.kernel.max_flat_workgroup_size == 256
    args = pack(SAXPY, 1000, 2.5, 0x1111222233334444, 0x5555666677778888)
    dev.launch_packed(fn, (4, 1, 1), (256, 1, 1), 0, None, args, SAXPY)
    (launch,) = fake.launches
    assert launch["words"] == [1, 2, 3]  # BUFFER_POINTER, BUFFER_SIZE, END
    assert launch["args"] == bytes(args) and len(args) == 24
    assert launch["params"] is None and (launch["grid"], launch["block"]) == ((4, 1, 1), (256, 1, 1))
    assert struct.unpack_from("<ifQQ", launch["args"]) == (1000, 2.5, 0x1111222233334444, 0x5555666677778888)


def test_launch_limits_are_checked_before_hip(fake):
    dev = rt.HipDevice(0)
    fn = dev.get_function(dev.load_artifact(build_saxpy("gfx90a"), [SAXPY]), "saxpy")
    with pytest.raises(LaunchError, match=r"512 threads, more than the kernel's max_block_size 256"):
        dev.launch_packed(fn, (1, 1, 1), (512, 1, 1), 0, None, bytearray(24), SAXPY)
    with pytest.raises(LaunchError, match="65536 bytes a workgroup has on gfx90a"):
        dev.launch_packed(fn, (1, 1, 1), (64, 1, 1), 70000, None, bytearray(24), SAXPY)
    assert not fake.launches


def test_code_object_for_another_arch_is_refused(fake):
    dev = rt.HipDevice(0)
    with pytest.raises(DeviceError, match="code object is for gfx1100, but hip:0 is gfx90a"):
        dev.load_artifact(build_saxpy("gfx1100"), [SAXPY])
    assert not fake.loaded


def test_prebuilt_module_picks_the_device_arch_or_lists_what_it_has(fake):
    objs = {"gfx1100": build_saxpy("gfx1100"), "gfx90a": build_saxpy("gfx90a")}
    dev = rt.HipDevice(0)
    mod = dev.load_artifact(objs, [SAXPY])
    assert mod.code_object.arch == "gfx90a" and fake.loaded == [objs["gfx90a"]]
    assert rt.select_code_object({"amdgcn-amd-amdhsa--gfx942": b"x"}, "gfx942:sramecc+:xnack-") == b"x"
    with pytest.raises(DeviceError, match=r"unary has no code object for gfx942 .*it has: gfx1100, gfx90a"):
        rt.select_code_object({"gfx90a": b"", "gfx1100": b""}, "gfx942:sramecc+:xnack-", "unary")


def test_the_arch_object_first_then_its_generic_target():
    both = {"gfx11-generic": b"generic", "gfx1151": b"exact", "gfx9-4-generic": b"cdna"}
    assert rt.select_code_object(both, "gfx1151") == b"exact"
    assert rt.select_code_object(both, "gfx1100") == b"generic"
    assert rt.select_code_object(both, "gfx950:sramecc+:xnack-") == b"cdna"
    with pytest.raises(DeviceError, match="no code object for gfx90a"):
        rt.select_code_object(both, "gfx90a")   # gfx90a has no generic target that covers it


def test_a_device_takes_prebuilt_generic_objects(fake, monkeypatch):
    dev = rt.HipDevice(0)
    names = [t.arch for t in dev.prebuilt_targets()]
    assert names[0] == dev.target.arch
    generic = rt.ARCHS[dev.target.arch].generic_target
    assert names[1:] == ([generic] if generic else [])


def test_signature_layout_is_checked_once_at_load(fake):
    dev = rt.HipDevice(0)
    stale = KernelSignature("saxpy", (("n", 8, 8, "value"), ("x", 8, 8, "ptr")))
    with pytest.raises(DeviceError, match="saxpy: the code object's arguments"):
        dev.load_artifact(build_saxpy("gfx90a"), [stale])
    with pytest.raises(DeviceError, match="kernel saxpi is not in the gfx90a code object; did you mean saxpy"):
        dev.load_artifact(build_saxpy("gfx90a"), [KernelSignature("saxpi", ())])


def test_raw_extra_array_layout():
    args = bytearray(b"\x01\x02\x03\x04\x05\x06\x07\x08")
    extra = rt.launch_extra(args)
    words = list(extra)
    assert words[0] == 1 and words[2] == 2 and words[4] == 3
    assert ctypes.string_at(words[1], 8) == bytes(args)
    assert ctypes.c_size_t.from_address(words[3]).value == 8
    assert rt.launch_extra(bytearray()) is None  # a kernel without arguments passes no extra


# ---- on a real AMD GPU ------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.skipif(not rt.hip_available(), reason=NEEDS_GPU)
def test_saxpy_runs_on_the_gpu():
    dev = rt.HipDevice(0)
    n = 1000
    x, y = np.arange(n, dtype=np.float32), np.ones(n, np.float32)
    dx, dy = dev.to_device(x), dev.to_device(y)
    mod = dev.load_artifact(build_saxpy(dev.target.arch), [SAXPY])
    fn = dev.get_function(mod, "saxpy")
    dev.launch_packed(fn, ((n + 255) // 256, 1, 1), (256, 1, 1), 0, None, pack(SAXPY, n, 2.0, dx.ptr, dy.ptr), SAXPY)
    dev.synchronize()
    np.testing.assert_allclose(dy.to_host(), 2.0 * x + y, rtol=1e-6)


def test_hip_python_must_match_the_installed_rocm(tmp_path):
    (tmp_path / ".info").mkdir()
    (tmp_path / ".info" / "version").write_text("7.1.0-20\n")
    assert rt.rocm_version(str(tmp_path)) == (7, 1)
    assert rt.rocm_version(str(tmp_path / "nowhere")) is None
    assert rt.version_mismatch((7, 1), (7, 1)) is None
    assert rt.version_mismatch(None, (6, 4)) is None and rt.version_mismatch((6, 4), None) is None
    msg = rt.version_mismatch((7, 1), (6, 4))
    assert "hip-python 6.4" in msg and "ROCm 7.1" in msg and "pip install 'hip-python==7.1.*'" in msg
    msg = rt.version_mismatch((5, 7), (6, 4))
    assert "ROCm 5.7" in msg and "supports ROCm 6.4, 7.0" in msg
