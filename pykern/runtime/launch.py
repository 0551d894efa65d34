"""Launching: argument checking and packing, shared by every device.

A ``Function`` is built once per (device, kernel) by ``Device.get_or_load_func``. It precomputes a
``struct.Struct`` laid out at the kernel's argument offsets, one converter per parameter and a
packer generated for the kernel (``Function._packer``), so a launch is one call that converts the
arguments and packs them. Converters check everything a kernel cannot:
argument count, kinds, array dtypes and devices, integer ranges — and name the parameter.
"""
from __future__ import annotations

import struct
from typing import Any, Callable

import ml_dtypes
import numpy as np

from ..errors import LaunchError
from ..ir import nodes as N
from ..ir import types as T
from .array import DeviceArray

#: what a float parameter takes: Python and NumPy numbers and ml_dtypes' scalars (``pk.bf16(0.75)``,
#: ``pk.f8e4m3(2)``: NumPy scalars of their own kind, not ``np.floating``)
_REAL_SCALARS = (int, float, np.integer, np.floating, *{type(ml_dtypes.bfloat16(0)), type(ml_dtypes.float8_e4m3fn(0))})
from .dlpack import accepts, borrow, producer_stream

_FMT = {(True, 1): "B", (True, 2): "H", (True, 4): "I", (True, 8): "Q",
        (False, 1): "b", (False, 2): "h", (False, 4): "i", (False, 8): "q"}


_MAX_SHARED = 1 << 31  # no device has more; larger values would wrap in 32-bit launch fields
_GRID_CACHE: dict = {n: (n, 1, 1) for n in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)}


def _exact_dims(v) -> bool:
    """An int, or a tuple of ints (not bools): a dims value the hot path may key on."""
    if v.__class__ is int:
        return True
    return v.__class__ is tuple and all(x.__class__ is int for x in v)


def _dim3(v, what: str, kernel: str) -> tuple[int, int, int]:
    if isinstance(v, list):
        v = tuple(v)
    t = (v,) if isinstance(v, (int, np.integer)) else v
    if not isinstance(t, tuple) or not 1 <= len(t) <= 3 or \
            not all(isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_)) for x in t):
        raise LaunchError(f"kernel {kernel}: {what} must be an int or a tuple of up to 3 ints, got {v!r}")
    t = tuple(int(x) for x in t) + (1,) * (3 - len(t))
    if any(not 1 <= x < 1 << 32 for x in t):  # the driver takes unsigned 32-bit dimensions
        raise LaunchError(f"kernel {kernel}: every {what} dimension must be at least 1 and below 2**32, got {t}")
    if v.__class__ is tuple and len(_GRID_CACHE) < 4096 and all(x.__class__ is int for x in v):
        _GRID_CACHE[v] = t  # the next launch with this tuple skips the checks
    return t  # type: ignore[return-value]


class Function:
    """A kernel loaded on a device, launchable as ``fn[grid, block](*args)`` or ``fn.launch(...)``."""

    def __init__(self, device, instance, sig, handle):
        self.device, self.instance, self.sig, self.handle = device, instance, sig, handle
        self.name = sig.name
        typed = instance.typed(device.target)
        self.param_types = [ty for _, ty in typed.params]
        self.param_names = [n for n, _ in typed.params]
        self._nullable = null_tested(typed)  # pointer parameters the kernel tests against None
        fmt, pos = "<", 0
        for (_, size, align, _), off, ty in zip(sig.params, sig.offsets, self.param_types):
            fmt += "x" * (off - pos) + _format(ty)
            pos = off + size
        self._struct = struct.Struct(fmt)
        own = getattr(handle, "param_buffer", None)  # the device's launch buffer (CUDA): no copy per launch
        self._buf = own if own is not None and len(own) == self._struct.size else bytearray(self._struct.size)
        self._nargs = len(self.param_types)
        self._max_block = sig.max_block_size
        self._check_bounds = getattr(device, "check_bounds", False)
        #: [the launch's explicit stream, the stream a DLPack producer's framework runs on]: the
        #: converters read the first and set the second (a launch with no stream runs on it)
        self._streams: list = [None, None]
        self._convert: list[Callable[[Any], Any]] = [self._converter(n, t) for n, t in zip(self.param_names, self.param_types)]
        self._pack_args = self._packer()
        # packing into the device's own buffer, a device may hand out a launcher bound to this kernel
        fast = getattr(device, "fast_launcher", None)
        self._go = fast(handle, sig) if fast is not None and self._buf is own and not self._check_bounds else None
        self._dims: dict = {}  # (grid, block) as given -> validated (grid3, block3), for the hot path
        if self._go is not None:
            self.launch = self._hot_launch()  # type: ignore[method-assign]

    def __repr__(self) -> str:
        return f"<pykern function {self.name} on {self.device}>"

    def __getitem__(self, config) -> Callable:
        grid, block, stream, shared = _unpack_config(config, self.name)
        return lambda *args, **kwargs: self.launch(grid, block, *(self.bind(args, kwargs) if kwargs else args),
                                                   shared_mem=shared, stream=stream)

    def bind(self, args: tuple, kwargs: dict) -> tuple:
        """The positional arguments of a call that names some by parameter (Python's rules)."""
        names = self.param_names
        if len(args) > len(names):
            raise LaunchError(f"kernel {self.name} takes {len(names)} arguments ({', '.join(names)}), got {len(args)}")
        bound = dict(zip(names, args))
        for name, value in kwargs.items():
            if name not in names:
                raise LaunchError(f"kernel {self.name} has no parameter {name!r}; its parameters: {', '.join(names)}")
            if name in bound:
                raise LaunchError(f"kernel {self.name}: argument {name!r} given by position and by name")
            bound[name] = value
        missing = [n for n in names if n not in bound]
        if missing:
            raise LaunchError(f"kernel {self.name}: missing argument(s) {', '.join(map(repr, missing))}")
        return tuple(bound[n] for n in names)

    def pack(self, args) -> bytearray | memoryview:
        if len(args) != self._nargs:
            raise LaunchError(f"kernel {self.name} takes {self._nargs} arguments "
                              f"({', '.join(self.param_names)}), got {len(args)}")
        return self._pack_args(*args)

    def launch(self, grid, block, *args, shared_mem: int = 0, stream=None, programmatic: bool = False) -> None:
        """``programmatic=True``: the kernel may start before the kernel before it on the stream ends
        (CUDA's programmatic dependent launch, sm_90+: it reads that kernel's output only after
        ``pk.grid_dependency_wait()``); every other device launches it as usual, which means the same."""
        # one dim check, then one generated convert-and-pack into the launch buffer
        given = (grid, block)
        grid = ((grid.__class__ is int or grid.__class__ is tuple) and _GRID_CACHE.get(grid)) or _dim3(grid, "grid", self.name)
        block = ((block.__class__ is int or block.__class__ is tuple) and _GRID_CACHE.get(block)) or \
            _dim3(block, "block", self.name)
        if block[0] * block[1] * block[2] > self._max_block:
            raise LaunchError(f"kernel {self.name}: a block of {block[0] * block[1] * block[2]} threads exceeds "
                              f"its maximum block size {self._max_block}")
        if shared_mem.__class__ is not int or not 0 <= shared_mem < _MAX_SHARED:
            raise LaunchError(f"kernel {self.name}: shared_mem must be an int of bytes in [0, {_MAX_SHARED}), "
                              f"got {shared_mem!r}")
        streams = self._streams
        streams[0], streams[1] = stream, None
        buf = self._pack_args(*args) if len(args) == self._nargs else self.pack(args)  # pack() names the arity error
        if stream is None and streams[1] is not None:  # torch / CuPy arrays: their current stream
            stream = streams[1]
        if self._go is not None:
            if programmatic:
                self._go(grid, block, shared_mem, stream, True)
            else:
                self._go(grid, block, shared_mem, stream)
            if len(self._dims) < 256 and _exact_dims(given[0]) and _exact_dims(given[1]):
                # the hot path's key: the pair as the caller wrote it; its launcher on the default stream
                bind = getattr(self._go, "bind", None)
                self._dims[given] = (grid, block, (bind(grid, block) if bind else None) or
                                     (lambda g=grid, b=block, go=self._go: go(g, b, 0, None)))
            return None
        try:
            if self._check_bounds:
                self.device.launch_packed(self.handle, grid, block, shared_mem, stream, buf, self.sig,
                                          ranges=_extents(args))
            elif programmatic:
                self.device.launch_packed(self.handle, grid, block, shared_mem, stream, buf, self.sig,
                                          programmatic=True)
            else:
                self.device.launch_packed(self.handle, grid, block, shared_mem, stream, buf, self.sig)
        except LaunchError as exc:
            src = self.instance.kdef.source
            raise LaunchError(f"{exc} in {src.file}") from None

    def _hot_launch(self) -> Callable[..., None]:
        """``launch`` for a device with a bound launcher (CUDA): a (grid, block) pair seen before and
        default shared memory go straight to packing and the driver in one Python frame, on any
        stream (the launcher takes the stream as the checked path would); anything else takes the
        checked path (``Function.launch``), which remembers valid pairs."""
        n = self._nargs
        env = {**self._pack_env, "dims": self._dims, "go": self._go, "general": Function.launch.__get__(self),
               "streams": self._streams}
        lines = ["def launch(grid, block, *args, shared_mem=0, stream=None, programmatic=False):",
                 f"    d = dims.get((grid, block)) if len(args) == {n} and "
                 "shared_mem.__class__ is int and shared_mem == 0 else None",
                 "    if d is None:",
                 "        return general(grid, block, *args, shared_mem=shared_mem, stream=stream, "
                 "programmatic=programmatic)"]
        if n:
            lines.append(f"    {', '.join(f'a{i}' for i in range(n))}, = args")
        lines += ["    streams[0] = stream",
                  "    streams[1] = None",
                  f"    pack_into(buf, 0, {self._pack_exprs})",
                  "    if stream is None:",
                  "        stream = streams[1]",  # set by a DLPack argument: its framework's current stream
                  "    if programmatic:",
                  "        go(d[0], d[1], 0, stream, True)",
                  "    elif stream is None:",
                  "        d[2]()",  # the pair's own launcher (cuLaunchKernelEx with a built config)
                  "    else:",
                  "        go(d[0], d[1], 0, stream)"]
        exec("\n".join(lines) + "\n", env)  # noqa: S102
        return env["launch"]

    def _packer(self) -> Callable[..., bytearray | memoryview]:
        """``pack(*args)``: every argument converted and all packed into ``self._buf`` at once.

        Generated for this kernel so the work is spelled out: each argument's common case (a device
        array of the right dtype on this device, an int in range, a float) is an inline test, and
        anything else goes to its converter, which checks everything and raises. The generic loop
        (zip, a list, a star call, a call per argument) took twice as long, about 0.3 us more for
        six arguments, out of a 5 us launch budget most of which the driver spends.
        """
        env = {"pack_into": self._struct.pack_into, "buf": self._buf, "DeviceArray": DeviceArray, "device": self.device}
        exprs = []
        for i, (ty, conv) in enumerate(zip(self.param_types, self._convert)):
            a, env[f"c{i}"] = f"a{i}", conv
            if isinstance(ty, T.PtrType):
                env[f"e{i}"] = ty.elem
                # an array Device.empty made (its owner is not another array) is contiguous: views
                # (as_strided, transpose, broadcast_to, offset_view) take the converter, which checks
                fast = (f"{a}.ptr if {a}.__class__ is DeviceArray and {a}.device is device and {a}.dtype is e{i} "
                        f"and {a}._owner.__class__ is not DeviceArray")
            elif ty.is_int:
                fast = f"{a} if {a}.__class__ is int and {ty.int_range[0]} <= {a} <= {ty.int_range[1]}"
            elif ty in (T.f32, T.f64):
                fast = f"{a} if {a}.__class__ is float"
            else:  # bool, f16, bf16, f8: the converter does it all
                fast = None
            exprs.append(f"{fast} else c{i}({a})" if fast else f"c{i}({a})")
        names = ", ".join(f"a{i}" for i in range(len(exprs)))
        self._pack_env, self._pack_exprs = env, ", ".join(exprs)
        exec(f"def pack({names}):\n    pack_into(buf, 0, {self._pack_exprs})\n    return buf\n", env)  # noqa: S102
        return env["pack"]

    # ---- converters
    def _converter(self, name: str, ty: T.Type) -> Callable[[Any], Any]:
        if not isinstance(ty, T.PtrType):
            return _scalar_converter(self.name, name, ty)
        return lambda v: self._pointer(name, ty, v)  # the common case is inlined by _packer

    def _pointer(self, name: str, ty: T.PtrType, v) -> int:
        if v is None:
            # a store through it would fault (a segfault on the host, a dead context on CUDA) unless
            # the kernel checks for None first
            if not ty.const and name not in self._nullable:
                raise LaunchError(f"kernel {self.name}: argument '{name}' is a {ty!r} the kernel may write "
                                  f"through and never tests against None, so it cannot be None")
            return 0
        if isinstance(v, DeviceArray):
            if v.device is not self.device:
                raise LaunchError(f"kernel {self.name}: argument '{name}' lives on {v.device}, the kernel runs on {self.device}")
            if v.dtype is not ty.elem:
                raise LaunchError(f"kernel {self.name}: argument '{name}' expects an array of {ty.elem!r}, got {v.dtype!r}")
            if not v.is_contiguous:
                raise LaunchError(f"kernel {self.name}: argument '{name}' is a non-contiguous view (shape {v.shape}, "
                                  f"strides {v.strides}); a pointer indexes memory in order. Pass a contiguous copy, "
                                  f"or pykern.runtime.launch.storage(view) with the strides passed separately")
            return v.ptr
        if isinstance(v, np.ndarray):
            if self.device.kind != "cpu":
                raise LaunchError(f"kernel {self.name}: argument '{name}' is a host NumPy array; "
                                  f"copy it with device.to_device() first")
            if v.dtype != ty.elem.np:
                raise LaunchError(f"kernel {self.name}: argument '{name}' expects {ty.elem!r} data, got a {v.dtype} array")
            if not v.flags.c_contiguous:
                raise LaunchError(f"kernel {self.name}: argument '{name}' must be C-contiguous")
            if not ty.const and not v.flags.writeable:
                raise LaunchError(f"kernel {self.name}: argument '{name}' is a read-only NumPy array, but the "
                                  f"kernel may write through {ty!r} (pass a writeable copy, or declare it ConstPtr)")
            return v.ctypes.data
        if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
            if not 0 <= int(v) < 1 << 64:
                raise LaunchError(f"kernel {self.name}: argument '{name}' address {v} is out of range")
            return int(v)
        if hasattr(v, "__dlpack__"):  # PyTorch, CuPy, JAX ...: zero-copy, bf16 included
            return self._dlpack(name, ty, v)
        iface = getattr(v, "__cuda_array_interface__", None)
        if iface is not None and self.device.kind in ("cuda", "hip"):
            if np.dtype(iface["typestr"]) != ty.elem.np and not (ty.elem is T.bf16 and iface["typestr"] == "<V2"):
                raise LaunchError(f"kernel {self.name}: argument '{name}' expects {ty.elem!r} data, got {iface['typestr']}")
            return int(iface["data"][0])
        raise LaunchError(f"kernel {self.name}: argument '{name}' expects a pointer to {ty.elem!r} "
                          f"(a device array, None or an address), got {type(v).__name__}")


    def _dlpack(self, name: str, ty: T.PtrType, v) -> int:
        """A DLPack producer's buffer, on the stream this launch runs on (see ``_streams``)."""
        gpu = self.device.kind in ("cuda", "hip")
        stream = None
        if gpu:
            explicit = self._streams[0]
            if explicit is not None:
                stream = _raw_stream(explicit)
            else:  # the framework's current stream, as Triton does; the first producer's wins
                stream = self._streams[1] if self._streams[1] is not None else producer_stream(v)
                if stream is not None and self._streams[1] is None:
                    self._streams[1] = stream
        try:
            # DLPack's stream numbers: 1 is CUDA's legacy default stream (0 is not allowed there); 0 is ROCm's
            t = borrow(v, None if stream is None else (stream or 1) if self.device.kind == "cuda" else stream)
        except Exception as exc:  # noqa: BLE001 - a producer that cannot export here
            raise LaunchError(f"kernel {self.name}: argument '{name}' could not be read through DLPack: {exc}") from None
        if t.device_kind != self.device.kind or (self.device.kind != "cpu" and t.device_id != self.device.index):
            raise LaunchError(f"kernel {self.name}: argument '{name}' lives on {t.device_kind}:{t.device_id}, "
                              f"the kernel runs on {self.device}")
        if not accepts(ty.elem, t.code, t.bits):
            raise LaunchError(f"kernel {self.name}: argument '{name}' expects {ty.elem!r} data, got DLPack "
                              f"type code {t.code} with {t.bits} bits")
        if not t.contiguous:
            raise LaunchError(f"kernel {self.name}: argument '{name}' is a non-contiguous tensor (shape {t.shape}, "
                              f"strides {t.strides}); a pointer indexes memory in order: pass .contiguous()")
        return t.ptr


def null_tested(fn, _seen: dict | None = None) -> frozenset[str]:
    """The parameters of typed function ``fn`` it tests with ``is None`` / ``is not None``, itself or
    through a device function it passes them to."""
    seen = {} if _seen is None else _seen
    if id(fn) in seen:
        return seen[id(fn)]
    seen[id(fn)] = frozenset()  # no recursion in kernels, but never loop
    names = {n for n, _ in fn.params}
    out = set()
    for node in N.walk(fn.body):
        if isinstance(node, N.IsNull) and isinstance(node.ptr, N.Var) and node.ptr.name in names:
            out.add(node.ptr.name)
        elif isinstance(node, N.Call) and isinstance(node.func, N.Function):
            inner = null_tested(node.func, seen)
            for (pname, _), arg in zip(node.func.params, node.args):
                if pname in inner and isinstance(arg, N.Var) and arg.name in names:
                    out.add(arg.name)
    seen[id(fn)] = frozenset(out)
    return seen[id(fn)]


def _raw_stream(stream) -> int:
    """A stream object's raw handle (pykern's, PyTorch's ``cuda_stream``, CuPy's ``ptr``, an int)."""
    if isinstance(stream, int):
        return stream
    if hasattr(stream, "__cuda_stream__"):
        return int(stream.__cuda_stream__()[1])
    for attr in ("handle", "cuda_stream", "ptr"):
        if hasattr(stream, attr):
            return int(getattr(stream, attr))
    return int(stream)


def storage(view):
    """The memory a strided DeviceArray view covers, as a flat contiguous array starting at the view's
    first element: what to pass for a pointer parameter whose layout the kernel is given separately
    (candle's ``info``). A view itself is refused there, so a transposed array is never read as if it
    were in order by mistake."""
    if not isinstance(view, DeviceArray):
        raise TypeError(f"storage() takes a DeviceArray, got {type(view).__name__}")
    if view.is_contiguous:
        return view
    if any(s < 0 for s in view.strides):
        raise ValueError(f"storage(): negative strides {view.strides} are not supported")
    span = 1 + sum((n - 1) * s for n, s in zip(view.shape, view.strides)) if view.size else 0
    return DeviceArray(view.device, view.ptr, (span,), view.dtype, owner=view)


def _extents(args) -> list[tuple[int, int]]:
    """Byte ranges of the array arguments (bounds-checked mode accepts accesses only inside them)."""
    out = []
    for a in args:
        if isinstance(a, np.ndarray):
            out.append((a.ctypes.data, a.ctypes.data + a.nbytes))
        elif isinstance(a, DeviceArray):
            span = 1 + sum((n - 1) * s for n, s in zip(a.shape, a.strides)) if a.size else 0
            root = a
            while isinstance(root._owner, DeviceArray):
                root = root._owner
            lo = min(a.ptr, root.ptr)
            out.append((lo, max(a.ptr + span * a.dtype.nbytes, root.ptr + root.nbytes)))
    return out


def _format(ty: T.Type) -> str:
    if isinstance(ty, T.PtrType):
        return "Q"
    if ty.is_bool:
        return "?"
    if ty in (T.f32, T.f64):
        return "f" if ty is T.f32 else "d"
    return _FMT[(not ty.is_signed, ty.nbytes)]  # ints, and f16/bf16/f8 as their bits


def _scalar_converter(kernel: str, name: str, ty: T.DType) -> Callable[[Any], Any]:
    def bad(v, why=""):
        return LaunchError(f"kernel {kernel}: argument '{name}' expects {ty!r}, got {type(v).__name__} {v!r}{why}")

    if ty.is_bool:
        def conv(v):  # noqa: F811 - one converter per kind
            if isinstance(v, (bool, np.bool_)):
                return bool(v)
            raise bad(v)
    elif ty.is_int:
        lo, hi = ty.int_range

        def conv(v):
            if v.__class__ is int and lo <= v <= hi:
                return v
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
                raise bad(v)
            if not lo <= int(v) <= hi:
                raise bad(v, f" (out of range {lo}..{hi})")
            return int(v)
    elif ty in (T.f32, T.f64):
        def conv(v):
            if v.__class__ is float:
                return v
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, _REAL_SCALARS):
                raise bad(v)
            return float(v)
    else:  # f16 / bf16 / f8: round on the host exactly as a cast would (ml_dtypes), pass the bits
        view = f"u{ty.nbytes}"

        def conv(v):
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, _REAL_SCALARS):
                raise bad(v)
            f = float(v)
            if ty is T.f8e4m3 and f == f:  # saturate like an in-kernel cast (ml_dtypes would give NaN)
                f = min(max(f, -448.0), 448.0)
            with np.errstate(over="ignore"):  # overflow to inf is the intended rounding
                return int(np.asarray(f, dtype=np.float32).astype(ty.np).view(view))
    return conv


def _unpack_config(config, kernel: str):
    if not isinstance(config, tuple) or not 2 <= len(config) <= 4:
        raise LaunchError(f"kernel {kernel}: launch as kernel[grid, block] or kernel[grid, block, stream, shared_mem]")
    grid, block, stream, shared = config + (None, 0)[len(config) - 2:]  # kernel[g, b, stream]: shared 0
    return grid, block, stream, shared
