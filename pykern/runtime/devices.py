"""``pykern.device(spec)``: one Device object per spec, created on first use."""
from __future__ import annotations

import threading

from ..errors import DeviceError
from .cpu import CpuDevice
from .cuda import CudaDevice, cuda_available
from .dlpack import DEVICE_KINDS
from .hip import HipDevice, hip_available

_devices: dict[tuple, object] = {}
_defaults: dict[tuple, object] = {}  # device(None)'s choice, by options
_lock = threading.Lock()


def device(spec: str | None = None, index: int | None = None, **options):
    """``"cpu"``, ``"hip"``, ``"hip:N"``, ``"cuda"``, ``"cuda:N"`` (or the kind and ``index``:
    ``device("cuda", 1)``); ``None`` picks the first GPU, else the CPU (once per process). Each GPU is
    its own device: its own memory, module store and launches.

    CPU options: ``wave_size`` (32 or 64), ``check_bounds``, ``threads``.
    """
    if index is not None:
        if spec is None or ":" in spec:
            raise DeviceError(f"device(kind, index) takes a kind without an index ('cuda', 'hip'), got {spec!r}")
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise DeviceError(f"a device index is a non-negative int, got {index!r}")
        spec = f"{spec}:{index}"
    if spec is None:
        # chosen once: probing HIP and CUDA costs ~100 us (a failed import is retried every time),
        # and kernel[grid, block](...) with plain pointers asks for the default on every launch
        key = tuple(sorted(options.items()))
        dev = _defaults.get(key)
        if dev is None:
            kind = next((kind for kind in ("hip", "cuda") if _available(kind)), None)
            dev = _defaults[key] = device(kind) if kind else device("cpu", **options)
        return dev
    kind, _, idx = spec.partition(":")
    if kind not in ("cpu", "hip", "cuda") or (idx and not idx.isdigit()):
        raise DeviceError(f"unknown device {spec!r}: use 'cpu', 'hip', 'hip:N', 'cuda' or 'cuda:N'")
    key = (kind, int(idx or 0), tuple(sorted(options.items())))
    with _lock:
        dev = _devices.get(key)
        if dev is None:
            dev = _devices[key] = _create(kind, int(idx or 0), options)
    return dev


def _create(kind: str, index: int, options: dict):
    if kind == "cpu":
        return CpuDevice(index, **options)
    if options:
        raise DeviceError(f"{kind} devices take no options, got {sorted(options)}")
    if kind == "hip":
        return HipDevice(index)
    return CudaDevice(index)


def _available(kind: str) -> bool:
    try:
        if kind == "hip":
            return hip_available()
        return cuda_available()
    except Exception:  # a broken driver stack means "not available", never a crash at import
        return False


def from_dlpack(obj):
    """A DeviceArray viewing ``obj`` (a torch/CuPy/JAX/NumPy array) on the device it lives on, without
    copying: ``pk.from_dlpack(torch_tensor)``. See ``Device.from_dlpack``."""
    if hasattr(obj, "__dlpack_device__"):
        code, index = obj.__dlpack_device__()
        kind = DEVICE_KINDS.get(int(code))
        if kind is None:
            raise DeviceError(f"{type(obj).__name__} lives on DLPack device type {int(code)}, which pykern does not run on")
    elif hasattr(obj, "__cuda_array_interface__"):
        kind, index = "cuda", 0
        if hasattr(obj, "device") and hasattr(obj.device, "id"):  # CuPy, Numba: the array's own GPU
            index = int(obj.device.id)
    else:
        raise TypeError(f"{type(obj).__name__} exports neither __dlpack__ nor __cuda_array_interface__")
    return device(kind, int(index) if kind != "cpu" else None).from_dlpack(obj)
