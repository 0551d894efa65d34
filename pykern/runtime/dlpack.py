"""DLPack, both ways, with ctypes: zero-copy exchange with PyTorch, CuPy, NumPy, JAX.

``__cuda_array_interface__`` cannot describe bf16 (PyTorch refuses to export it); DLPack can
(``kDLBfloat``). Launches accept any object with ``__dlpack__`` on the launching device, and device
arrays export ``__dlpack__`` / ``__dlpack_device__``. The structs follow ``dlpack.h`` (v0.8 ABI).
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass

from ..ir import types as T

KDL_CPU, KDL_CUDA, KDL_ROCM = 1, 2, 10
DEVICE_KINDS = {KDL_CPU: "cpu", KDL_CUDA: "cuda", KDL_ROCM: "hip"}
KIND_CODES = {v: k for k, v in DEVICE_KINDS.items()}
KDL_INT, KDL_UINT, KDL_FLOAT, KDL_BFLOAT, KDL_BOOL = 0, 1, 2, 4, 6
#: DLPack 1.1's code for OCP e4m3 ("fn": finite, NaN only), PyTorch's float8_e4m3fn
KDL_FLOAT8_E4M3FN = 10


class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _Device), ("ndim", ctypes.c_int32), ("dtype", _DType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class _Managed(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(_Managed))
_Managed._fields_ = [("dl_tensor", _Tensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER)]

_api = ctypes.pythonapi
_api.PyCapsule_IsValid.restype, _api.PyCapsule_IsValid.argtypes = ctypes.c_int, [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_SetName.restype, _api.PyCapsule_SetName.argtypes = ctypes.c_int, [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]

_CODES = {"bool": KDL_BOOL, "int": KDL_INT, "uint": KDL_UINT, "float": KDL_FLOAT}


def dl_dtype(ty: T.DType) -> tuple[int, int]:
    """(type code, bits) a pykern dtype exports as; fp8 goes out as u8 (what every consumer, NumPy
    included, can read) and comes in as u8 or DLPack 1.1's float8_e4m3fn (``accepts``)."""
    if ty is T.bf16:
        return KDL_BFLOAT, 16
    if ty is T.f8e4m3:
        return KDL_UINT, 8
    return _CODES[ty.kind], ty.bits


def accepts(ty: T.DType, code: int, bits: int) -> bool:
    """Whether DLPack data of (``code``, ``bits``) is ``ty``'s."""
    return (code, bits) == dl_dtype(ty) or (ty is T.f8e4m3 and (code, bits) == (KDL_FLOAT8_E4M3FN, 8))


def dtype_of(code: int, bits: int) -> T.DType:
    """The pykern dtype of DLPack data (``TypeError`` naming the code for one pykern lacks)."""
    if (code, bits) == (KDL_FLOAT8_E4M3FN, 8):
        return T.f8e4m3
    for ty in T.ALL_DTYPES:
        if ty is not T.f8e4m3 and dl_dtype(ty) == (code, bits):
            return ty
    raise TypeError(f"pykern has no dtype for DLPack type code {code} with {bits} bits")


def import_array(device, obj) -> tuple[int, T.DType, tuple[int, ...], tuple[int, ...] | None]:
    """(address, dtype, shape, element strides or None) of ``obj``'s memory on ``device``, for a
    DeviceArray viewing it: from DLPack, else from ``__cuda_array_interface__`` (Numba, CuPy).
    Strides must be non-negative."""
    if hasattr(obj, "__dlpack__"):
        # DLPack's stream numbers: 1 is CUDA's legacy default stream, 0 ROCm's null stream
        t = borrow(obj, 1 if device.kind == "cuda" else 0 if device.kind == "hip" else None)
        if t.device_kind != device.kind or (device.kind != "cpu" and t.device_id != device.index):
            raise ValueError(f"the array lives on {t.device_kind}:{t.device_id}, not on {device}")
        ptr, dtype, shape, strides = t.ptr, dtype_of(t.code, t.bits), t.shape, t.strides
    elif hasattr(obj, "__cuda_array_interface__") and device.kind in ("cuda", "hip"):
        cai = obj.__cuda_array_interface__
        dtype = T.dtype_of_numpy(cai["typestr"])
        ptr, shape = int(cai["data"][0] or 0), tuple(cai["shape"])
        strides = None if cai.get("strides") is None else \
            tuple(int(s) // dtype.nbytes for s in cai["strides"])
    else:
        raise TypeError(f"{type(obj).__name__} exports neither __dlpack__ nor __cuda_array_interface__")
    if strides is not None and any(s < 0 for s in strides):
        raise ValueError(f"negative strides {strides} (a reversed view) have no candle layout; copy it first")
    return ptr, dtype, shape, strides


@dataclass(frozen=True)
class Borrowed:
    """What a launch needs from a DLPack producer: where, on which device, of which element type."""

    ptr: int
    device_kind: str
    device_id: int
    code: int
    bits: int
    shape: tuple[int, ...]
    strides: tuple[int, ...] | None

    @property
    def contiguous(self) -> bool:
        """Row-major and dense (DLPack's null strides say so; dims of one element take any stride)."""
        if self.strides is None:
            return True
        acc = 1
        for n, s in zip(reversed(self.shape), reversed(self.strides)):
            if n != 1 and s != acc:
                return False
            acc *= n
        return True


def producer_stream(obj) -> int | None:
    """The raw handle of the current GPU stream of the framework that made ``obj`` (PyTorch's
    ``current_stream()``, CuPy's current stream), None for any other producer. A launch given no
    stream runs there, as Triton's do, so it is ordered after the work the framework queued."""
    import sys
    root = type(obj).__module__.partition(".")[0]
    if root == "torch":
        torch = sys.modules["torch"]
        return int(torch.cuda.current_stream(obj.device).cuda_stream)
    if root == "cupy":
        cupy = sys.modules["cupy"]
        with cupy.cuda.Device(obj.device.id):
            return int(cupy.cuda.get_current_stream().ptr)
    return None


def borrow(obj, stream=None) -> Borrowed:
    """Read ``obj.__dlpack__()`` without copying. The producer's memory stays owned by ``obj``: the
    capsule's reference is released at once, so the caller must keep ``obj`` alive for the launch."""
    capsule = obj.__dlpack__() if stream is None else obj.__dlpack__(stream=stream)
    if not _api.PyCapsule_IsValid(capsule, b"dltensor"):
        raise ValueError("__dlpack__ did not return an unused 'dltensor' capsule")
    managed = ctypes.cast(_api.PyCapsule_GetPointer(capsule, b"dltensor"), ctypes.POINTER(_Managed))
    t = managed.contents.dl_tensor
    shape = tuple(t.shape[i] for i in range(t.ndim))
    strides = tuple(t.strides[i] for i in range(t.ndim)) if t.strides else None
    out = Borrowed((t.data or 0) + t.byte_offset, DEVICE_KINDS.get(t.device.device_type, f"dl{t.device.device_type}"),
                   t.device.device_id, t.dtype.code, t.dtype.bits * t.dtype.lanes, shape, strides)
    _api.PyCapsule_SetName(capsule, b"used_dltensor")  # consumed: the capsule must not delete it again
    if managed.contents.deleter:
        managed.contents.deleter(managed)
    return out


_exports: dict[int, tuple] = {}  # id(managed) -> (managed, shape, strides, array): alive until deleted


@_DELETER
def _release(managed):
    _exports.pop(ctypes.addressof(managed.contents), None)


_CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


# the destructor sees a capsule being freed: raw-pointer variants, so no new reference is taken
_is_valid_raw = _api["PyCapsule_IsValid"]
_is_valid_raw.restype, _is_valid_raw.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p]
_get_pointer_raw = _api["PyCapsule_GetPointer"]
_get_pointer_raw.restype, _get_pointer_raw.argtypes = ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_char_p]


@_CAPSULE_DESTRUCTOR
def _capsule_gone(capsule):
    # a capsule dropped unconsumed still owns its tensor: release it (dlpack's producer rule)
    if _is_valid_raw(capsule, b"dltensor"):
        _exports.pop(_get_pointer_raw(capsule, b"dltensor"), None)


def export(array) -> object:
    """A 'dltensor' capsule viewing a pykern DeviceArray (strides in elements, as DLPack's)."""
    m = _Managed()
    n = array.ndim
    shape = (ctypes.c_int64 * max(1, n))(*array.shape)
    strides = (ctypes.c_int64 * max(1, n))(*array.strides)
    code, bits = dl_dtype(array.dtype)
    m.dl_tensor = _Tensor(array.ptr, _Device(KIND_CODES[array.device.kind], array.device.index), n,
                          _DType(code, bits, 1), shape, strides, 0)
    m.deleter = _release
    _exports[ctypes.addressof(m)] = (m, shape, strides, array)
    return _api.PyCapsule_New(ctypes.addressof(m), b"dltensor", ctypes.cast(_capsule_gone, ctypes.c_void_p))
