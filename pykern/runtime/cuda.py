"""The CUDA runtime: pykern's PTX on NVIDIA GPUs through the driver API (``cuda-bindings``).

The driver API rather than the runtime API because PTX goes straight to ``cuModuleLoadData``
(the driver JIT-compiles it for the GPU it finds and keeps the result in its compute cache), and
the primary context is the one PyTorch and CuPy use, so device pointers pass between them.
``cuda-bindings`` is the optional extra ``pykern[cuda]`` and is imported on first use.

Launch cost is the point of ``CudaFunction``: everything that does not change between launches
(the parameter buffer, the array of pointers into it that ``cuLaunchKernel`` wants, both handles
as ctypes pointers) is built once per function. ``launch.Function`` packs its arguments straight
into that buffer, so a launch is one call of the driver's own ``cuLaunchKernel`` (``_raw_launch``).
"""
from __future__ import annotations

import ctypes
import functools
import os
import threading
from typing import Any

import numpy as np

from .. import config
from ..errors import DeviceError, LaunchError
from ..targets.nvptx import NvptxTarget, arch_for_capability
from .base import Device


@functools.cache
def _driver():
    try:
        from cuda.bindings import driver
    except ImportError as exc:
        raise DeviceError(f"the CUDA runtime needs cuda-bindings: pip install 'pykern[cuda]' ({exc})") from None
    _check(driver, driver.cuInit(0), "cuInit")
    return driver


def _check(drv, result, what: str):
    """Unwrap a ``(CUresult, *values)`` tuple, raising DeviceError with the CUDA error name."""
    err = result[0]
    if err != drv.CUresult.CUDA_SUCCESS:  # compare, don't test truth: older bindings use plain Enums
        raise DeviceError(f"{what} failed: {_error_name(drv, err)}")
    return result[1] if len(result) == 2 else result[1:]


def _error_name(drv, err) -> str:
    """The CUDA name of an error code, a CUresult or the plain int the raw launch returns."""
    try:
        r = drv.cuGetErrorName(drv.CUresult(err))
    except Exception:  # a code this binding does not know
        return f"CUresult {int(err)}"
    return r[1].decode() if not r[0] and r[1] else f"CUresult {int(err)}"


@functools.cache
def _raw_launch():
    """The driver's own ``cuLaunchKernel``, called through ctypes rather than cuda-bindings.

    Issue 4 budgets 5 us of host time per launch, and the driver itself takes most of it; the
    wrapper converts and checks each of the eleven arguments on every call, which the raw entry
    point leaves to launch.py's checks, done once. The entry point comes from ``cuGetProcAddress``,
    so it is the very driver cuda-bindings loaded, on the same default stream (legacy, or
    per-thread when cuda-bindings was told so by its environment variable).

    The prototype leaves the argument types open on purpose: with ``argtypes`` ctypes calls a
    ``from_param`` per argument, 0.7 us a launch. Without them a Python int travels as a C int --
    the register or stack slot the driver reads its ``unsigned int`` dimensions from on the 64-bit
    ABIs CUDA supports; launch.py keeps dimensions and shared memory below 2**32 -- so every
    pointer must be passed as a ``c_void_p`` (or None for NULL), never as an int, which would be
    cut to 32 bits.
    """
    fn = _driver_entry("cuLaunchKernel")
    if fn is None:
        raise DeviceError("cuGetProcAddress(cuLaunchKernel) failed")
    return fn


def _driver_entry(name: str):
    """The driver's own entry point ``name`` as an untyped ctypes function (see ``_raw_launch``), on
    the default stream cuda-bindings uses, or None where the driver has none."""
    drv = _driver()
    flag = drv.CUdriverProcAddress_flags
    ptds = os.environ.get("CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM", "0") not in ("", "0")
    res = drv.cuGetProcAddress(name.encode(), 12000, flag.CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
                               if ptds else flag.CU_GET_PROC_ADDRESS_LEGACY_STREAM)
    if res[0] != drv.CUresult.CUDA_SUCCESS or not res[1]:  # (err, pfn) or (err, pfn, status) by version
        return None
    return ctypes.CFUNCTYPE(ctypes.c_int)(int(res[1]))


class CUlaunchConfig(ctypes.Structure):
    """The driver's ``CUlaunchConfig`` (cuda.h, CUDA 12.0+): a launch's dimensions, shared memory and
    stream, built once per (grid, block) so a launch passes four pointers, not eleven arguments."""

    _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3), ("shared_mem", ctypes.c_uint),
                ("stream", ctypes.c_void_p), ("attrs", ctypes.c_void_p), ("num_attrs", ctypes.c_uint)]


class CUlaunchAttribute(ctypes.Structure):
    """The driver's ``CUlaunchAttribute`` (cuda.h): an id, padded to 8 bytes, and a 64-byte union of
    which a programmatic launch sets the first int (``programmaticStreamSerializationAllowed``)."""

    _fields_ = [("id", ctypes.c_uint), ("pad", ctypes.c_char * 4), ("value", ctypes.c_int),
                ("value_pad", ctypes.c_char * 60)]


#: ``CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION`` (cuda.h; cuda-bindings' ``CUlaunchAttributeID``)
PROGRAMMATIC_STREAM_SERIALIZATION = 6


def programmatic_config(grid, block, shared_mem: int, stream) -> CUlaunchConfig:
    """A ``CUlaunchConfig`` that lets the launch overlap the kernel before it on ``stream`` (programmatic
    dependent launch: the kernel's ``pk.grid_dependency_wait()`` does the waiting); its attribute array
    is kept alive on the config."""
    attr = CUlaunchAttribute(PROGRAMMATIC_STREAM_SERIALIZATION, b"", 1)
    config = CUlaunchConfig((ctypes.c_uint * 3)(*grid), (ctypes.c_uint * 3)(*block), shared_mem,
                            None if stream is None else ctypes.c_void_p(stream), ctypes.addressof(attr), 1)
    config.attribute = attr
    return config


@functools.cache
def _raw_launch_ex():
    """The driver's own ``cuLaunchKernelEx(config, f, kernelParams, extra)`` (see ``_raw_launch``), or
    None from a driver without it. Four pointer arguments cost ctypes 0.25 us less than the eleven of
    ``cuLaunchKernel`` (H100 host: 4.59 against 4.84 us a launch)."""
    return _driver_entry("cuLaunchKernelEx")


@functools.cache
def cuda_available() -> bool:
    """True when cuda-bindings imports, a driver is installed and it reports a device."""
    try:
        drv = _driver()
        return _check(drv, drv.cuDeviceGetCount(), "cuDeviceGetCount") > 0
    except Exception:  # no package, no libcuda, no device: all mean "not available"
        return False


_tls = threading.local()  # the context this thread last made current


#: dynamic shared memory any kernel may take; more needs an opt-in per function (what candle's
#: argsort does for rows past 12288 columns: cudaFuncSetAttribute)
DEFAULT_DYNAMIC_SHARED = 48 * 1024


def opt_in_shared(drv, func: "CudaFunction", shared_mem: int) -> None:
    """Let ``func`` take ``shared_mem`` bytes of dynamic shared memory (past 48 KiB, an opt-in up to
    the device's per-block limit minus the kernel's static shared memory); a clear error beyond."""
    attr = drv.CUfunction_attribute
    static = int(_check(drv, drv.cuFuncGetAttribute(attr.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, func.handle),
                        "cuFuncGetAttribute"))
    dev = _check(drv, drv.cuCtxGetDevice(), "cuCtxGetDevice")
    optin = int(_check(drv, drv.cuDeviceGetAttribute(
        drv.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev), "cuDeviceGetAttribute"))
    if shared_mem + static > optin:
        raise LaunchError(f"kernel {func.name}: {shared_mem} bytes of dynamic shared memory (plus {static} static) "
                          f"exceed this GPU's {optin} bytes a block")
    _check(drv, drv.cuFuncSetAttribute(func.handle, attr.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                       shared_mem), "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)")
    func.dynamic_shared = shared_mem


def device_count() -> int:
    """How many CUDA GPUs the driver sees (0 without a driver or cuda-bindings)."""
    try:
        drv = _driver()
        _check(drv, drv.cuInit(0), "cuInit")
        return int(_check(drv, drv.cuDeviceGetCount(), "cuDeviceGetCount"))
    except Exception:  # no driver, no GPU, no cuda-bindings: none to count
        return 0


def param_pointer_array(base: int, offsets) -> ctypes.Array:
    """The ``void*[]`` that ``cuLaunchKernel``'s kernelParams takes: one pointer to each parameter,
    each ``base`` + its offset in the packed buffer (``KernelSignature.offsets``)."""
    return (ctypes.c_void_p * max(len(offsets), 1))(*(base + o for o in offsets))


class CudaFunction:
    """A kernel ready to launch: its CUfunction and a fixed parameter buffer with its pointer array.

    ``launch.py`` packs its arguments straight into ``buffer`` (through ``param_buffer``); other
    packed arguments are copied in under ``lock``. The driver copies the parameters out during
    ``cuLaunchKernel``, so reusing one buffer is safe once the call returns. ``c_handle`` and
    ``c_params`` are the handle and the pointer array as the ``c_void_p`` (or None) that the raw
    launch takes.
    """

    __slots__ = ("handle", "name", "sig", "nbytes", "buffer", "view", "pointers", "params", "lock", "module",
                 "c_handle", "c_params", "dynamic_shared")

    def __init__(self, handle, name: str, sig, module):
        self.handle, self.name, self.module = handle, name, module  # module: keeps it loaded
        self.c_handle = ctypes.c_void_p(int(handle))
        self.lock = threading.Lock()
        #: dynamic shared memory the function may take now: CUDA's 48 KiB until a launch asks for more
        self.dynamic_shared = DEFAULT_DYNAMIC_SHARED
        self.prepare(sig)

    def prepare(self, sig) -> None:
        """Build the parameter buffer for ``sig`` (None: not known yet; the first launch brings it)."""
        self.sig = sig
        self.nbytes = sig.kernarg_size if sig is not None else 0
        self.buffer = (ctypes.c_char * max(self.nbytes, 1))()
        self.view = memoryview(self.buffer).cast("B")[: self.nbytes]
        self.pointers = param_pointer_array(ctypes.addressof(self.buffer), sig.offsets if sig else ())
        self.params = ctypes.addressof(self.pointers) if sig is not None and sig.params else 0
        self.c_params = ctypes.c_void_p(self.params) if self.params else None

    @property
    def param_buffer(self) -> memoryview:
        """Where ``launch.Function`` packs its arguments, so its launches skip the copy and the lock."""
        return self.view

    def __repr__(self) -> str:
        return f"<CudaFunction {self.name}>"


class CudaModule:
    """A loaded PTX module; unloaded when the last function handle from it is gone."""

    def __init__(self, device: "CudaDevice", handle, sigs: dict):
        self.device, self.handle, self.sigs = device, handle, sigs

    def __del__(self):
        try:
            self.device._current()
            self.device._drv.cuModuleUnload(self.handle)
        except Exception:  # interpreter shutdown: the driver may already be gone
            pass


class _Allocation:
    """Owner of one block of device memory; frees it when collected: back to the pool, in stream
    order (``cuMemFreeAsync`` on the default stream, after the work already queued there), or with
    ``cuMemFree``, which waits for the whole device."""

    __slots__ = ("device", "ptr", "pooled")

    def __init__(self, device: "CudaDevice", ptr, pooled: bool):
        self.device, self.ptr, self.pooled = device, ptr, pooled

    def __del__(self):
        try:
            self.device._current()
            if self.pooled:
                self.device._drv.cuMemFreeAsync(self.ptr, 0)
            else:
                self.device._drv.cuMemFree(self.ptr)
        except Exception:
            pass


class CudaStream:
    """An explicit stream (blocking, so it stays ordered with the default stream's copies)."""

    def __init__(self, device: "CudaDevice"):
        self.device = device
        device._current()
        self.handle = _check(device._drv, device._drv.cuStreamCreate(0), "cuStreamCreate")

    def synchronize(self) -> None:
        self.device._current()
        _check(self.device._drv, self.device._drv.cuStreamSynchronize(self.handle), "cuStreamSynchronize")

    def __cuda_stream__(self):
        return (0, int(self.handle))

    def __del__(self):
        try:
            self.device._current()
            self.device._drv.cuStreamDestroy(self.handle)
        except Exception:
            pass


def _stream_handle(stream):
    """None (the default stream) or a raw handle as an int, from pykern's, cuda.core's (the
    ``__cuda_stream__`` protocol), PyTorch's (``cuda_stream``) or CuPy's (``ptr``) stream objects."""
    if stream is None or isinstance(stream, int):
        return stream
    if isinstance(stream, CudaStream):
        return int(stream.handle)
    if hasattr(stream, "__cuda_stream__"):
        return int(stream.__cuda_stream__()[1])
    for attr in ("cuda_stream", "ptr"):
        if hasattr(stream, attr):
            return int(getattr(stream, attr))
    return int(stream)  # a CUstream


class CudaDevice(Device):
    kind = "cuda"

    def __init__(self, index: int = 0, arch: str | None = None):
        super().__init__(index)
        self._drv = drv = _driver()
        self._ok, self._launch = drv.CUresult.CUDA_SUCCESS, _raw_launch()
        self._dev = _check(drv, drv.cuDeviceGet(index), f"cuDeviceGet({index})")
        # The primary context is retained for the life of the process: arrays may be freed by the
        # collector long after anyone holds this device object.
        self._ctx = _check(drv, drv.cuDevicePrimaryCtxRetain(self._dev), "cuDevicePrimaryCtxRetain")
        self._current()
        attr = drv.CUdevice_attribute
        get = lambda a: _check(drv, drv.cuDeviceGetAttribute(a, self._dev), "cuDeviceGetAttribute")
        self.compute_capability = (get(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
                                   get(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR))
        self.multiprocessors = get(attr.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        self._shared_optin = get(attr.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
        self.name = _check(drv, drv.cuDeviceGetName(256, self._dev), "cuDeviceGetName").split(b"\0")[0].decode()
        self.arch = arch or arch_for_capability(*self.compute_capability)
        if self.arch is None:
            raise DeviceError(f"{self.name} (compute capability {'.'.join(map(str, self.compute_capability))}) "
                              "is older than sm_80, the oldest arch pykern targets")
        self._target = NvptxTarget(self.arch)
        self._pooled = self._keep_pool() if get(attr.CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED) else False

    def _keep_pool(self) -> bool:
        """Allocate from the device's default memory pool, which keeps freed blocks for reuse (the
        release threshold raised from 0): a wrapper's temporary output costs no driver allocation and
        no device-wide wait when it is freed. PYKERN_CUDA_POOL=0 turns it off."""
        if not config.cuda_pool():
            return False
        drv = self._drv
        pool = _check(drv, drv.cuDeviceGetDefaultMemPool(self._dev), "cuDeviceGetDefaultMemPool")
        _check(drv, drv.cuMemPoolSetAttribute(pool, drv.CUmemPool_attribute.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                                              drv.cuuint64_t(2 ** 64 - 1)), "cuMemPoolSetAttribute")
        return True

    def __repr__(self) -> str:
        return f"cuda:{self.index}"

    @property
    def target(self) -> NvptxTarget:
        return self._target

    @property
    def max_shared_per_block(self) -> int:
        """``CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN`` (227 KiB on an H100, 163 KiB on an
        A100), read once: what a block may take with the opt-in that ``opt_in_shared`` makes at launch."""
        return self._shared_optin

    def _current(self) -> None:
        """Make this device's context current on the calling thread (a no-op when it already is)."""
        if getattr(_tls, "ctx", None) is not self._ctx:
            _check(self._drv, self._drv.cuCtxSetCurrent(self._ctx), "cuCtxSetCurrent")
            _tls.ctx = self._ctx

    # ---- memory ---------------------------------------------------------------------------------
    def alloc(self, nbytes: int) -> tuple[int, Any]:
        self._current()
        if self._pooled:  # stream-ordered on the default stream: copies and launches there follow it
            ptr = _check(self._drv, self._drv.cuMemAllocAsync(nbytes, 0), f"cuMemAllocAsync({nbytes})")
        else:
            ptr = _check(self._drv, self._drv.cuMemAlloc(nbytes), f"cuMemAlloc({nbytes})")
        return int(ptr), _Allocation(self, ptr, self._pooled)

    def copy_to_device(self, dst: int, src: np.ndarray) -> None:
        self._current()
        _check(self._drv, self._drv.cuMemcpyHtoD(dst, src.ctypes.data, src.nbytes), "cuMemcpyHtoD")

    def copy_to_host(self, dst: np.ndarray, src: int) -> None:
        self._current()
        _check(self._drv, self._drv.cuMemcpyDtoH(dst.ctypes.data, src, dst.nbytes), "cuMemcpyDtoH")

    def stream(self) -> CudaStream:
        return CudaStream(self)

    def synchronize(self) -> None:
        self._current()
        _check(self._drv, self._drv.cuCtxSynchronize(), "cuCtxSynchronize")

    # ---- modules and launches ---------------------------------------------------------------------
    def load_artifact(self, artifact: bytes, kernels: list) -> CudaModule:
        self._current()
        image = artifact if artifact.endswith(b"\0") else artifact + b"\0"  # PTX must be NUL-terminated
        err, handle = self._drv.cuModuleLoadData(image)
        if err != self._ok:
            raise DeviceError(f"cuModuleLoadData failed: {_error_name(self._drv, err)}{self._jit_log(image)}")
        return CudaModule(self, handle, {k.name: k for k in kernels})

    def _jit_log(self, image: bytes) -> str:
        """The driver JIT's error log for a PTX image it refused (only on the failure path)."""
        drv, log = self._drv, bytearray(16384)
        try:
            opts = [drv.CUjit_option.CU_JIT_ERROR_LOG_BUFFER, drv.CUjit_option.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES]
            drv.cuModuleLoadDataEx(image, 2, opts, [log, len(log)])
        except Exception:
            return ""
        text = log.split(b"\0")[0].decode(errors="replace").strip()
        return f"\n{text}" if text else ""

    def get_function(self, handle: CudaModule, name: str) -> CudaFunction:
        self._current()
        fn = _check(self._drv, self._drv.cuModuleGetFunction(handle.handle, name.encode()),
                    f"cuModuleGetFunction({name})")
        return CudaFunction(fn, name, handle.sigs.get(name), handle)

    def fast_launcher(self, func: CudaFunction, sig):
        """``go(grid, block, shared_mem, stream)`` launching ``func`` with the arguments already packed
        in its own buffer: the few Python steps left around the driver's ~4 us (``launch.Function``
        takes this path when it packs into ``func.param_buffer``)."""
        if func.sig is None:
            func.prepare(sig)
        raw, c_handle, c_params, ctx, current, drv = self._launch, func.c_handle, func.c_params, self._ctx, self._current, self._drv
        ex = _raw_launch_ex()
        programmatic_ok = ex is not None and self.compute_capability >= (9, 0)
        configs: dict = {}  # (grid, block, shared_mem, stream) -> a programmatic launch's config

        def go(grid, block, shared_mem: int, stream, programmatic: bool = False) -> None:
            if getattr(_tls, "ctx", None) is not ctx:
                current()
            if shared_mem > func.dynamic_shared:
                opt_in_shared(drv, func, shared_mem)
            handle = None if stream is None else _stream_handle(stream)
            if programmatic and programmatic_ok:
                key = (grid, block, shared_mem, handle)
                config = configs.get(key)
                if config is None:
                    if len(configs) > 64:
                        configs.clear()
                    config = configs[key] = programmatic_config(grid, block, shared_mem, handle)
                err = ex(ctypes.c_void_p(ctypes.addressof(config)), c_handle, c_params, None)
            else:
                err = raw(c_handle, grid[0], grid[1], grid[2], block[0], block[1], block[2], shared_mem,
                          None if handle is None else ctypes.c_void_p(handle), c_params, None)
            if err:
                raise _launch_error(drv, func, grid, block, shared_mem, err)

        def bind(grid, block):
            """A launcher of these checked dims on the default stream: ``cuLaunchKernelEx`` with a
            config built here (None without it: ``go`` then serves)."""
            if ex is None:
                return None
            config = CUlaunchConfig((ctypes.c_uint * 3)(*grid), (ctypes.c_uint * 3)(*block), 0, None, None, 0)
            c_config = ctypes.c_void_p(ctypes.addressof(config))

            def launch_default() -> None:
                if getattr(_tls, "ctx", None) is not ctx:
                    current()
                err = ex(c_config, c_handle, c_params, None)
                if err:
                    raise _launch_error(drv, func, grid, block, 0, err)
            launch_default.config = config  # kept alive with the launcher
            return launch_default

        go.bind = bind
        return go

    def launch_packed(self, func: CudaFunction, grid, block, shared_mem: int, stream, args, sig,
                      programmatic: bool = False) -> None:
        if programmatic:  # cuLaunchKernelEx with its attribute: the fast launcher's path
            if func.sig is None:
                func.prepare(sig)
            if len(args) < func.nbytes:
                raise LaunchError(f"{func.name}: {len(args)} bytes of arguments, the kernel takes {func.nbytes}")
            with func.lock:
                if args is not func.view:
                    func.view[:] = memoryview(args)[:func.nbytes]
                self.fast_launcher(func, sig)(grid, block, shared_mem, stream, True)
            return
        if getattr(_tls, "ctx", None) is not self._ctx:
            self._current()
        if func.sig is None:
            func.prepare(sig)
        if shared_mem > func.dynamic_shared:
            opt_in_shared(self._drv, func, shared_mem)
        handle = None if stream is None else ctypes.c_void_p(_stream_handle(stream))
        # the raw driver entry point (see _raw_launch): ints for the dimensions, c_void_p or None for
        # the pointers; extra=NULL, the parameters go through kernelParams
        if args is func.view:  # packed in place by launch.Function
            err = self._launch(func.c_handle, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                               shared_mem, handle, func.c_params, None)
        else:
            n = func.nbytes
            if len(args) != n:
                if len(args) < n:
                    raise LaunchError(f"{func.name}: {len(args)} bytes of arguments, the kernel takes {n}")
                args = memoryview(args)[:n]
            with func.lock:
                func.view[:] = args
                err = self._launch(func.c_handle, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                                   shared_mem, handle, func.c_params, None)
        if err:
            raise _launch_error(self._drv, func, grid, block, shared_mem, err)


def _launch_error(drv, func: CudaFunction, grid, block, shared_mem: int, err) -> DeviceError:
    return DeviceError(f"cuLaunchKernel({func.name}, grid={tuple(grid)}, block={tuple(block)}, "
                       f"shared={shared_mem}) failed: {_error_name(drv, err)}")


@functools.cache
def cuda_device(index: int = 0) -> CudaDevice:
    """The one CudaDevice per GPU index, so its loaded modules (ModuleStore slots) are shared."""
    return CudaDevice(index)


__all__ = ["CudaDevice", "CudaFunction", "CudaStream", "cuda_available", "cuda_device",
           "param_pointer_array"]
