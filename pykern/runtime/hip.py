"""The HIP runtime: pykern devices on AMD GPUs, through hip-python.

hip-python's releases follow ROCm's (6.4.x for ROCm 6.4, 7.0.x for ROCm 7.0, ...), and a binding
for another ROCm than the one installed fails in obscure ways, so the first use compares hip-python's
major.minor with the installed ROCm's (``$ROCM_PATH/.info/version``) and, when they differ, says
which hip-python to install. hip-python is imported lazily, so ``import pykern`` never needs it; it
opens ``libamdhip64.so`` on the first call.

hip-python returns ``(hipError_t, *results)`` tuples and never raises; ``_call`` turns a failure
into ``DeviceError`` carrying HIP's error name. Launches pass the explicit arguments as one packed
buffer through the raw ``extra`` array (``HIP_LAUNCH_PARAM_BUFFER_POINTER``...): hip-python's own
tuple packing aligns to at most 8 bytes, while the buffer pykern packs follows the code object's
``.args`` offsets, which ``load_artifact`` checks against each signature once per module.
"""
from __future__ import annotations

import ctypes
import importlib.metadata
import os
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import DeviceError, LaunchError, close_matches
from ..targets.amdgpu import AmdgpuTarget
from ..targets.amdgpu_archs import ARCHS, base_arch
from ..targets.base import KernelSignature
from ..targets.codeobject import CodeObject, CodeObjectError, Kernel
from .base import Device

#: the ROCm releases pykern's HIP runtime is written for (hip-python's API is the same across them)
SUPPORTED_ROCM = ((6, 4), (7, 0), (7, 1), (7, 2))


def rocm_version(rocm_path: str | None = None) -> tuple[int, int] | None:
    """The installed ROCm's (major, minor) from ``$ROCM_PATH/.info/version``, or None if unknown."""
    root = rocm_path or os.environ.get("ROCM_PATH") or "/opt/rocm"
    try:
        text = open(os.path.join(root, ".info", "version")).read()
    except OSError:
        return None
    parts = re.match(r"\s*(\d+)\.(\d+)", text)
    return (int(parts[1]), int(parts[2])) if parts else None


def hip_python_version() -> tuple[int, int] | None:
    """The installed hip-python's (major, minor), or None if it is not installed."""
    try:
        found = re.match(r"(\d+)\.(\d+)", importlib.metadata.version("hip-python"))
    except importlib.metadata.PackageNotFoundError:
        return None
    return (int(found[1]), int(found[2])) if found else None


def version_mismatch(rocm: tuple[int, int] | None, binding: tuple[int, int] | None) -> str | None:
    """Why this hip-python cannot drive this ROCm (with the command that fixes it), or None."""
    if rocm is None or binding is None or rocm == binding:
        return None
    fix = f"pip install 'hip-python=={rocm[0]}.{rocm[1]}.*'"
    if rocm not in SUPPORTED_ROCM:
        supported = ", ".join(f"{a}.{b}" for a, b in SUPPORTED_ROCM)
        return f"ROCm {rocm[0]}.{rocm[1]} is installed; pykern's HIP runtime supports ROCm {supported} ({fix} may work)"
    return (f"hip-python {binding[0]}.{binding[1]} is installed for ROCm {rocm[0]}.{rocm[1]}: "
            f"hip-python must match ROCm's release; run {fix}")


def _hip():
    """The ``hip.hip`` bindings module (imported on first use; tests replace this function)."""
    try:
        from hip import hip
    except ImportError as exc:
        rocm = rocm_version()
        which = f"'hip-python=={rocm[0]}.{rocm[1]}.*' (your ROCm is {rocm[0]}.{rocm[1]})" if rocm else \
            "'pykern[hip]', or the hip-python release that matches your ROCm ('hip-python==6.4.*' for ROCm 6.4)"
        raise DeviceError(f"the HIP runtime needs hip-python: pip install {which} ({exc})") from None
    mismatch = version_mismatch(rocm_version(), hip_python_version())
    if mismatch:
        raise DeviceError(mismatch)
    return hip


def _call(hip, result, what: str) -> Any:
    """Check a hip-python result tuple; return its payload (None, one value, or a tuple)."""
    err, *rest = result
    if err != hip.hipError_t.hipSuccess:
        raise DeviceError(f"{what} failed: {_error_text(hip, err)}")
    return None if not rest else rest[0] if len(rest) == 1 else tuple(rest)


def device_count() -> int:
    """How many HIP devices there are; 0 when ROCm is present but finds no GPU.

    Raises ``DeviceError`` when hip-python or ROCm's ``libamdhip64.so`` cannot be loaded."""
    hip = _hip()
    try:
        result = hip.hipGetDeviceCount()
    except RuntimeError as exc:  # hip-python's lazy dlopen of libamdhip64.so
        raise DeviceError(f"ROCm's HIP runtime could not be loaded ({_unbytes(str(exc))}); install ROCm "
                          "or set ROCM_PATH / LD_LIBRARY_PATH to its lib directory") from None
    if result[0] == getattr(hip.hipError_t, "hipErrorNoDevice", None):
        return 0
    return int(_call(hip, result, "hipGetDeviceCount"))


def hip_unavailable_reason() -> str | None:
    """None when at least one AMD GPU is usable through HIP, else why not (for skips and errors)."""
    try:
        return None if device_count() > 0 else "ROCm is installed but reports no AMD GPU"
    except DeviceError as exc:
        return str(exc)


def hip_available() -> bool:
    return hip_unavailable_reason() is None


def select_code_object(objects: Mapping[str, bytes], arch: str, module: str = "module") -> bytes:
    """The code object in ``objects`` (keyed by arch or target id) that runs on ``arch`` (a plain
    arch or HIP's ``gcnArchName`` such as ``gfx90a:sramecc+:xnack-``).

    Code objects are built with xnack/sramecc "any", so the plain arch name decides; without one for
    the arch itself, the arch's LLVM generic target (``gfx11-generic`` for gfx1100...) serves. With
    neither, the error lists the archs the module does have."""
    want = base_arch(arch)
    generic = ARCHS[want].generic_target if want in ARCHS else None
    for wanted in (want, generic):  # the arch's own object first, then its family's generic one
        for key, blob in objects.items():
            if wanted is not None and base_arch(key) == wanted:
                return blob
    have = ", ".join(sorted(base_arch(k) for k in objects)) or "none"
    raise DeviceError(f"{module} has no code object for {want} (this device: {arch}); it has: {have}. "
                      f"Rebuild the module for {want}, or let pykern compile it for this device")


def check_layout(co: CodeObject, kernels: list[KernelSignature]) -> None:
    """Every signature's explicit (offset, size) pairs must be what the code object's metadata says:
    the launch buffer is packed from the signature, and CLR reads arguments at metadata offsets."""
    for sig in kernels:
        k = co.kernels.get(sig.name)
        if k is None:
            raise DeviceError(f"kernel {sig.name} is not in the {co.arch} code object"
                              f"{close_matches(sig.name, co.kernels)}")
        got = [(a.offset, a.size) for a in k.explicit_args]
        want = [(off, p[1]) for off, p in zip(sig.offsets, sig.params)]
        if got != want:
            raise DeviceError(f"kernel {sig.name}: the code object's arguments (offset, size) are {got}, "
                              f"the signature's {want}; the code object is stale or foreign")


def launch_extra(args: bytearray):
    """HIP's raw ``extra`` array for a packed argument buffer, or None with no arguments.

    ``[HIP_LAUNCH_PARAM_BUFFER_POINTER, buf, HIP_LAUNCH_PARAM_BUFFER_SIZE, &size, HIP_LAUNCH_PARAM_END]``;
    the returned ctypes array keeps ``buf`` and ``size`` alive through ``_keep``."""
    if not args:
        return None
    hip = _hip()
    buf = (ctypes.c_char * len(args)).from_buffer(args)
    size = ctypes.c_size_t(len(args))
    extra = (ctypes.c_void_p * 5)(hip.HIP_LAUNCH_PARAM_BUFFER_POINTER, ctypes.addressof(buf),
                                  hip.HIP_LAUNCH_PARAM_BUFFER_SIZE, ctypes.addressof(size),
                                  hip.HIP_LAUNCH_PARAM_END)
    extra._keep = (buf, size, args)
    return extra


def _unbytes(message: str) -> str:
    """``failed to dlopen 'b'libamdhip64.so''`` -> ``failed to dlopen 'libamdhip64.so'``: hip-python
    formats file names as bytes reprs."""
    return re.sub(r"""b(['"])(.*?)\1""", r"\2", message)


def _error_text(hip, err) -> str:
    """``hipErrorInvalidImage (200): the description`` as text: hip-python hands names and
    descriptions over as bytes, which must not reach a message as ``b'...'``."""
    name = _text(getattr(err, "name", None) or err)
    try:
        code = int(getattr(err, "value", err))
    except (TypeError, ValueError):
        code = None
    out = f"{name} ({code})" if code is not None else name
    describe = getattr(hip, "hipGetErrorString", None)
    if describe is not None:
        try:
            desc = describe(err)
        except Exception:  # noqa: BLE001 - a description is a courtesy; the name says it
            desc = None
        desc = _text(desc[-1] if isinstance(desc, tuple) else desc) if desc is not None else ""
        if desc and desc != name:
            out += f": {desc}"
    return out


def _text(v) -> str:
    return (v.decode("utf-8", "replace") if isinstance(v, (bytes, bytearray)) else str(v)).split("\0", 1)[0]


class _HipAllocation:
    """Owns one ``hipMalloc`` block; frees it when collected."""

    def __init__(self, hip, ptr: int):
        self._hip, self.ptr = hip, ptr

    def __del__(self):
        try:
            self._hip.hipFree(self.ptr)
        except Exception:  # noqa: BLE001 - interpreter shutdown or a lost device: nothing to do
            pass


class HipModule:
    """A loaded code object: the ``hipModule_t``, its parsed metadata, and the bytes it came from."""

    def __init__(self, handle, code_object: CodeObject, image: bytes):
        self.handle, self.code_object, self.image = handle, code_object, image


class HipFunction:
    """A kernel handle plus its metadata, so launches are checked against the kernel's limits."""

    def __init__(self, handle, kernel: Kernel):
        self.handle, self.kernel = handle, kernel


class HipStream:
    """A HIP stream; pass it as a launch's ``stream``."""

    def __init__(self, device: "HipDevice"):
        self.device = device
        device._activate()
        self.handle = _call(device._hip, device._hip.hipStreamCreate(), "hipStreamCreate")

    def synchronize(self) -> None:
        _call(self.device._hip, self.device._hip.hipStreamSynchronize(self.handle), "hipStreamSynchronize")

    def __del__(self):
        try:
            self.device._hip.hipStreamDestroy(self.handle)
        except Exception:  # noqa: BLE001
            pass


class HipDevice(Device):
    """AMD GPU number ``index``. Its ``gcnArchName`` picks the ``AmdgpuTarget`` modules are built for."""

    kind = "hip"

    def __init__(self, index: int = 0, code_object_version: int = 5):
        super().__init__(index)
        self._hip = _hip()
        count = device_count()
        if count == 0:
            raise DeviceError("no AMD GPU: ROCm reports no HIP devices")
        if not 0 <= index < count:
            raise DeviceError(f"hip:{index} does not exist; there are {count} HIP device(s)")
        props = self._hip.hipDeviceProp_t()
        _call(self._hip, self._hip.hipGetDeviceProperties(props, index), "hipGetDeviceProperties")
        self.arch_name, self.name = _text(props.gcnArchName), _text(props.name)
        arch = base_arch(self.arch_name)
        if arch not in ARCHS:
            raise DeviceError(f"hip:{index} ({self.name}) is {self.arch_name}, which pykern does not "
                              f"support; supported: {', '.join(a for a, i in ARCHS.items() if not i.is_generic)}")
        self._target = AmdgpuTarget(arch, code_object_version)
        self._shared = int(_call(self._hip, self._hip.hipDeviceGetAttribute(
            self._hip.hipDeviceAttribute_t.hipDeviceAttributeMaxSharedMemoryPerBlock, index),
            "hipDeviceGetAttribute(MaxSharedMemoryPerBlock)"))

    @property
    def max_shared_per_block(self) -> int:
        """``hipDeviceAttributeMaxSharedMemoryPerBlock``, read once (64 KiB on gfx90a, gfx942 and RDNA;
        160 KiB on gfx950): HIP has no opt-in, every launch may take it all."""
        return self._shared

    def __repr__(self) -> str:
        return f"hip:{self.index}({self.arch_name})"

    @property
    def target(self) -> AmdgpuTarget:
        return self._target

    def prebuilt_targets(self) -> list:
        """This arch's prebuilt objects, then its LLVM generic target's (one build for a family)."""
        generic = self._target.info.generic_target
        if generic is None:
            return [self._target]
        return [self._target, AmdgpuTarget(generic, wave64=self._target.wave_size == 64)]

    def _activate(self) -> None:
        _call(self._hip, self._hip.hipSetDevice(self.index), "hipSetDevice")

    # ---- memory ---------------------------------------------------------------------------------
    def alloc(self, nbytes: int) -> tuple[int, Any]:
        self._activate()
        ptr = int(_call(self._hip, self._hip.hipMalloc(nbytes), f"hipMalloc({nbytes})"))
        return ptr, _HipAllocation(self._hip, ptr)

    def copy_to_device(self, dst: int, src: np.ndarray) -> None:
        self._activate()
        _call(self._hip, self._hip.hipMemcpy(dst, src, src.nbytes, self._hip.hipMemcpyKind.hipMemcpyHostToDevice),
              "hipMemcpy(host to device)")

    def copy_to_host(self, dst: np.ndarray, src: int) -> None:
        self._activate()
        _call(self._hip, self._hip.hipMemcpy(dst, src, dst.nbytes, self._hip.hipMemcpyKind.hipMemcpyDeviceToHost),
              "hipMemcpy(device to host)")

    # ---- modules and launches -------------------------------------------------------------------
    def load_artifact(self, artifact, kernels: list) -> HipModule:
        """Load a code object (bytes, or a mapping arch -> bytes from a prebuilt module)."""
        if isinstance(artifact, Mapping):
            artifact = select_code_object(artifact, self.arch_name)
        image = bytes(artifact)
        try:
            co = CodeObject(image)
        except CodeObjectError as exc:
            raise DeviceError(f"not a loadable code object: {exc}") from None
        if co.arch != self._target.arch:
            raise DeviceError(f"the code object is for {co.arch}, but hip:{self.index} is {self.arch_name}")
        check_layout(co, kernels)
        self._activate()
        handle = _call(self._hip, self._hip.hipModuleLoadData(image), "hipModuleLoadData")
        return HipModule(handle, co, image)

    def get_function(self, handle: HipModule, name: str) -> HipFunction:
        kernel = handle.code_object.kernels.get(name)
        if kernel is None:
            raise DeviceError(f"no kernel {name!r} in the code object"
                              f"{close_matches(name, handle.code_object.kernels)}")
        fn = _call(self._hip, self._hip.hipModuleGetFunction(handle.handle, name.encode()),
                   f"hipModuleGetFunction({name})")
        return HipFunction(fn, kernel)

    def launch_packed(self, func: HipFunction, grid, block, shared_mem: int, stream, args: bytearray,
                      sig, programmatic: bool = False) -> None:
        threads = block[0] * block[1] * block[2]
        k = func.kernel
        if threads > k.max_flat_workgroup_size:
            raise LaunchError(f"{k.name}: block {tuple(block)} has {threads} threads, more than the "
                              f"kernel's max_block_size {k.max_flat_workgroup_size}")
        lds_limit = self._target.info.lds_per_workgroup
        if k.lds + shared_mem > lds_limit:
            raise LaunchError(f"{k.name}: {k.lds} bytes of static and {shared_mem} of dynamic shared "
                              f"memory exceed the {lds_limit} bytes a workgroup has on {self._target.arch}")
        extra = launch_extra(args)  # referenced until the call returns; HIP copies the arguments
        self._activate()
        _call(self._hip, self._hip.hipModuleLaunchKernel(
            func.handle, *grid, *block, shared_mem, getattr(stream, "handle", stream), None,
            None if extra is None else ctypes.addressof(extra)), f"hipModuleLaunchKernel({k.name})")

    def synchronize(self) -> None:
        self._activate()
        _call(self._hip, self._hip.hipDeviceSynchronize(), "hipDeviceSynchronize")

    def new_stream(self) -> HipStream:
        return HipStream(self)


__all__ = ["HipDevice", "HipStream", "hip_available", "hip_unavailable_reason", "device_count",
           "select_code_object", "check_layout", "launch_extra", "SUPPORTED_ROCM", "rocm_version", "hip_python_version",
           "version_mismatch"]
