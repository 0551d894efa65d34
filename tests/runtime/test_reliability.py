"""Issue 25: what a launch refuses rather than crash or compute a plausible wrong answer.

Cases that used to segfault run in a child process (``tests/fuzz/_isolated.py``), so a regression is a
failed test naming the case, not a dead test session.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import pykern as pk
from pykern import ConstPtr, Ptr, f32, usize
from pykern.runtime.devices import _available
from pykern.runtime.launch import storage

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fuzz"))  # the shared child-process harness
from _isolated import run_isolated  # noqa: E402


@pk.kernel
def k_copy(n: usize, x: ConstPtr[f32], y: Ptr[f32]):
    for i in pk.grid_stride(n):
        y[i] = x[i]


def test_none_for_a_written_pointer_is_refused(device):
    x = device.to_device(np.ones(8, np.float32))
    with pytest.raises(pk.LaunchError, match=r"argument 'y' is a Ptr\[f32\] the kernel may write through and never tests against None"):
        k_copy[1, 8](8, x, None)


def test_none_for_a_read_pointer_is_still_a_null_pointer():
    """candle's null ``info`` / ``inp``: a ConstPtr may be None (the kernel tests ``is None``)."""
    @pk.kernel
    def k(n: usize, x: ConstPtr[f32], y: Ptr[f32]):
        for i in pk.grid_stride(n):
            y[i] = 1.0 if x is None else x[i]
    y = np.zeros(4, np.float32)
    k[1, 4](4, None, y)
    assert (y == 1).all()


def test_none_for_a_written_pointer_does_not_crash_the_process():
    script = """
import numpy as np, pykern as pk
from pykern import ConstPtr, Ptr, f32, usize
@pk.kernel
def k(n: usize, x: ConstPtr[f32], y: Ptr[f32]):
    for i in pk.grid_stride(n):
        y[i] = x[i]
try:
    k[1, 8](8, np.ones(8, np.float32), None)
except pk.LaunchError as e:
    print("refused:", e)
"""
    result = run_isolated(script, "None for Ptr y")
    assert "refused:" in result.stdout


def test_read_only_numpy_array_for_a_written_pointer_is_refused():
    y = np.zeros(8, np.float32)
    y.flags.writeable = False
    with pytest.raises(pk.LaunchError, match=r"argument 'y' is a read-only NumPy array"):
        k_copy[1, 8](8, np.ones(8, np.float32), y)
    assert (y == 0).all()
    x = np.ones(8, np.float32)
    x.flags.writeable = False  # read-only input through a ConstPtr is fine
    out = np.zeros(8, np.float32)
    k_copy[1, 8](8, x, out)
    assert (out == 1).all()


def test_non_contiguous_device_array_is_refused(device):
    a = device.to_device(np.arange(12, dtype=np.float32).reshape(3, 4))
    t = a.transpose()
    out = device.zeros(12, np.float32)
    with pytest.raises(pk.LaunchError, match=r"argument 'x' is a non-contiguous view \(shape \(4, 3\), strides \(1, 4\)\)"):
        k_copy[1, 16](12, t, out)
    with pytest.raises(pk.LaunchError, match="non-contiguous"):  # a broadcast view too
        k_copy[1, 16](12, device.to_device(np.ones(4, np.float32)).broadcast_to((3, 4)), out)
    with pytest.raises(pk.LaunchError, match=r"argument 'y' is a non-contiguous"):
        k_copy[1, 16](12, a, device.zeros((4, 3), np.float32).transpose())
    # contiguous views (offset_view, reshape) still pass, and storage() is the explicit way through
    k_copy[1, 16](6, a.offset_view(6, (6,)), out)
    assert out.to_host()[:6].tolist() == list(range(6, 12))
    k_copy[1, 16](12, storage(t), out)  # the memory in its own order: the caller owns the layout
    assert out.to_host().tolist() == list(range(12))


def test_storage_covers_the_view_span():
    dev = pk.device("cpu")
    a = dev.to_device(np.arange(20, dtype=np.float32).reshape(4, 5))
    s = storage(a.as_strided((2, 3), (10, 2), offset=1))
    assert s.shape == (1 + 10 + 4,) and s.is_contiguous and s.ptr == a.ptr + 4
    assert storage(a) is a
    with pytest.raises(TypeError):
        storage(np.zeros(3))


class _Producer:
    """A minimal DLPack producer (not NumPy, which the CPU device takes directly)."""

    def __init__(self, array: np.ndarray):
        self.array = array

    def __dlpack__(self, stream=None):
        return self.array.__dlpack__()

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def test_non_contiguous_dlpack_tensor_is_refused():
    base = np.arange(12, dtype=np.float32).reshape(3, 4)
    out = np.zeros(12, np.float32)
    with pytest.raises(pk.LaunchError, match=r"argument 'x' is a non-contiguous tensor.*contiguous\(\)"):
        k_copy[1, 16](12, _Producer(base.T), out)
    k_copy[1, 16](12, _Producer(base), out)  # contiguous: read in place
    assert out.tolist() == list(range(12))


def test_copy2d_past_its_arrays_is_refused():
    from stdlib_kernels import fill
    dev = pk.device("cpu")
    src, dst = dev.to_device(np.arange(12, dtype=np.float32)), dev.zeros(12, np.float32)
    for args, what in [((4, 4, 4, 4), "src"), ((3, 4, 4, 4, 1), "src"), ((3, 4, 4, 4, 0, 1), "dst"),
                       ((2, 100, 1, 1), "src"), ((1000, 1000, 1000, 1000), "src")]:
        with pytest.raises(ValueError, match=f"reach element .* of {what}"):
            fill.copy2d(src, dst, *args)
    with pytest.raises(ValueError, match="d1 must be a non-negative int"):
        fill.copy2d(src, dst, -1, 2, 2, 2)
    with pytest.raises(ValueError, match="d2 = 4294967296 does not fit"):
        fill.copy2d(src, dst, 1, 2 ** 32, 2 ** 32, 2 ** 32)
    fill.copy2d(src, dst, 3, 4, 4, 4)
    assert dst.to_host().tolist() == list(range(12))
    dst2 = dev.zeros(6, np.float32)
    fill.copy2d(src, dst2, 2, 3, 4, 3, src_o=1)  # rows [1,2,3] and [5,6,7]
    assert dst2.to_host().tolist() == [1, 2, 3, 5, 6, 7]


def test_copy2d_past_its_arrays_does_not_crash_the_process():
    script = """
import numpy as np, pykern as pk
from stdlib_kernels import fill
dev = pk.device("cpu")
try:
    fill.copy2d(dev.zeros(4, np.float32), dev.zeros(4, np.float32), 100000, 100000, 100000, 100000)
except ValueError as e:
    print("refused:", e)
"""
    assert "refused:" in run_isolated(script, "copy2d past its arrays").stdout


@pytest.mark.skipif(not _available("cuda"), reason="needs a CUDA GPU")
def test_torch_tensors_launch_on_torchs_current_stream():
    """With no explicit stream a launch runs on torch's current stream, so it follows the work torch
    queued there: a side stream kept busy, then written, then read by a pykern kernel."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    dev = pk.device("cuda")
    n = 1 << 22
    side = torch.cuda.Stream()
    failures = 0
    for _ in range(20):
        x = torch.zeros(n, device="cuda")
        out = torch.empty(n, device="cuda")
        torch.cuda.synchronize()
        with torch.cuda.stream(side):
            big = torch.randn(4096, 4096, device="cuda")
            for _ in range(8):  # keep the side stream busy before the write the kernel must see
                big = big @ big / 64
            x.fill_(3.0)
            k_copy[-(-n // 256), 256](n, x, out)
            torch.cuda._sleep(1000)
        side.synchronize()
        failures += int(not torch.all(out == 3.0).item())
    assert failures == 0, f"{failures} of 20 launches read x before torch wrote it"
    assert dev is not None


@pytest.mark.skipif(not _available("cuda"), reason="needs a CUDA GPU")
def test_explicit_stream_is_passed_to_dlpack():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    n = 1 << 20
    s = torch.cuda.Stream()
    x = torch.full((n,), 2.0, device="cuda")
    out = torch.zeros(n, device="cuda")
    k_copy[-(-n // 256), 256, s](n, x, out)
    s.synchronize()
    assert torch.all(out == 2.0).item()


@pk.kernel
def k_dynamic(p: Ptr[f32], n: pk.i32):
    s = pk.shared.dynamic(f32)
    s[n] = 1.0
    p[0] = s[n]


@pytest.mark.parametrize("check_bounds", [False, True])
def test_dynamic_shared_memory_is_bounded_like_a_gpu(check_bounds):
    from pykern.targets.cpu import SHARED_LIMIT
    dev = pk.device("cpu", check_bounds=check_bounds)
    p = dev.zeros(1, np.float32)
    for request in (1 << 30, SHARED_LIMIT + 4):
        with pytest.raises(pk.LaunchError, match=f"{request} bytes of dynamic shared memory exceed the 65536 bytes"):
            k_dynamic.launch(1, 1, p, 0, shared_mem=request, device=dev)
    k_dynamic.launch(1, 1, p, SHARED_LIMIT // 4 - 1, shared_mem=SHARED_LIMIT, device=dev)
    assert p.to_host()[0] == 1.0


@pk.kernel
def k_static_and_dynamic(p: Ptr[f32]):
    a = pk.shared.array(8192, f32)  # 32 KiB
    d = pk.shared.dynamic(f32)
    a[0] = 1.0
    d[0] = 2.0
    p[0] = a[0] + d[0]


def test_static_plus_dynamic_shared_memory_is_bounded():
    dev = pk.device("cpu")
    p = dev.zeros(1, np.float32)
    k_static_and_dynamic.launch(1, 1, p, shared_mem=32 * 1024, device=dev)
    assert p.to_host()[0] == 3.0
    with pytest.raises(pk.LaunchError, match=r"32768 bytes of static and 32772 of dynamic shared memory exceed"):
        k_static_and_dynamic.launch(1, 1, p, shared_mem=32 * 1024 + 4, device=dev)


def test_dynamic_shared_memory_past_the_request_is_caught_with_check_bounds():
    dev = pk.device("cpu", check_bounds=True)
    p = dev.zeros(1, np.float32)
    with pytest.raises(pk.LaunchError, match=r"kernel k_dynamic: out-of-bounds memory access \(line \d+\)"):
        k_dynamic.launch(1, 1, p, 256, shared_mem=1024, device=dev)


@pytest.mark.parametrize("options, message", [
    ({"threads": -1}, r"threads=\.\.\.\) takes a positive int"),
    ({"threads": 0}, r"threads=\.\.\.\) takes a positive int"),
    ({"threads": 2.5}, r"threads=\.\.\.\) takes a positive int"),
    ({"wave_size": 16}, r"wave_size=\.\.\.\) is 32 or 64"),
    ({"check_bounds": "yes"}, r"check_bounds=\.\.\.\) is a bool"),
])
def test_bad_cpu_device_options_raise(options, message):
    with pytest.raises(ValueError, match=message):
        pk.device("cpu", **options)


def test_unknown_device_options_raise():
    with pytest.raises(TypeError, match="unexpected keyword argument 'rounding'"):
        pk.device("cpu", rounding="nearest")


@pytest.mark.skipif(_available("cuda"), reason="cuda-bindings is installed here")
def test_cuda_without_cuda_bindings_names_the_extra():
    with pytest.raises(pk.DeviceError, match=r"needs cuda-bindings: pip install 'pykern\[cuda\]'"):
        pk.device("cuda")


def test_a_kernel_missing_from_its_module_is_an_error_not_a_call_to_address_zero():
    dev = pk.device("cpu")
    handle, _ = dev.load_module(k_copy.instance().module)
    with pytest.raises(pk.LaunchError, match="kernel not_there is missing from its compiled module"):
        dev.get_function(handle, "not_there")


@pk.func
def store_unless_none(p: Ptr[f32], v: f32):
    if p is not None:
        p[0] = v


@pk.kernel
def k_optional_out(x: ConstPtr[f32], out: Ptr[f32], extra: Ptr[f32]):
    out[0] = x[0]
    store_unless_none(extra, x[0] * 2.0)


def test_none_for_a_written_pointer_the_kernel_tests_is_allowed():
    """An optional output: the kernel (here through a device function) tests it against None."""
    out = np.zeros(1, np.float32)
    k_optional_out[1, 1](np.full(1, 3.0, np.float32), out, None)
    assert out[0] == 3.0
    with pytest.raises(pk.LaunchError, match="argument 'out' .* never tests against None"):
        k_optional_out[1, 1](np.full(1, 3.0, np.float32), None, out)


def test_negative_shapes_and_complex_dtypes_raise():
    dev = pk.device("cpu")
    with pytest.raises(ValueError, match=r"shape is non-negative ints, got \(-5,\)"):
        dev.empty((-5,), np.float32)
    with pytest.raises(ValueError, match="non-negative ints"):
        dev.zeros((2, 2.5), np.float32)
    with pytest.raises(TypeError, match=r"no dtype for NumPy's .*complex64.*it supports .*float32"):
        dev.empty((3,), np.complex64)
    with pytest.raises(TypeError, match="no dtype for NumPy's"):
        dev.to_device(np.zeros(3, np.complex128))
    assert dev.empty((0,), np.float32).size == 0


def test_a_strided_array_from_dlpack_is_refused_on_the_fast_path_too():
    """pk.from_dlpack of a transposed array is a view: a launch checks its layout (issue 25)."""
    dev = pk.device("cpu")
    t = pk.from_dlpack(np.arange(12, dtype=np.float32).reshape(3, 4).T)
    assert not t.is_contiguous and t.to_host().tolist() == np.arange(12).reshape(3, 4).T.tolist()
    out = dev.zeros(12, np.float32)
    for _ in range(2):  # the second launch of a (grid, block) pair takes the hot path where there is one
        with pytest.raises(pk.LaunchError, match="non-contiguous"):
            k_copy[1, 16](12, t, out)
    ok = pk.from_dlpack(np.arange(12, dtype=np.float32))
    k_copy[1, 16](12, ok, out)
    assert out.to_host().tolist() == list(range(12))


def test_unknown_keyword_arguments_raise():
    from stdlib_kernels import binary, unary
    a = pk.device("cpu").to_device(np.ones(3, np.float32))
    with pytest.raises(TypeError, match="rounding"):
        binary.add(a, a, rounding="nearest")
    with pytest.raises(TypeError, match="order"):
        unary.exp(a, order="C")
    with pytest.raises(TypeError, match="rounding"):
        pk.kernel(rounding="x")
    with pytest.raises(pk.LaunchError, match="has no parameter 'order'"):
        k_copy[1, 4](3, a, a, order="C")


def test_dlpack_arguments_launch_on_their_frameworks_current_stream(monkeypatch):
    """Without a GPU: a CUDA-kind device with a bound launcher (the hot path) and a torch-like producer.
    With no stream the launch runs on torch's current stream, and that stream is what ``__dlpack__``
    is given (1 for CUDA's legacy default stream, as DLPack asks); an explicit stream wins."""
    import types

    from pykern.runtime.base import DeviceArray
    from pykern.runtime.launch import Function
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_launch import _BoundLauncherDevice, k_args

    class CudaLike(_BoundLauncherDevice):
        kind, index = "cuda", 0

    current = {"stream": 1234}
    fake_torch = types.SimpleNamespace(cuda=types.SimpleNamespace(
        current_stream=lambda device: types.SimpleNamespace(cuda_stream=current["stream"])))
    monkeypatch.setitem(sys.modules, "torch", fake_torch)

    cpu = pk.device("cpu")
    inst = k_args._only_instance()
    sig = cpu.get_or_load_func(inst.name, inst.module).sig
    dev = CudaLike(cpu.target, sig.kernarg_size)
    fn = Function(dev, inst, sig, dev.handle)

    class Tensor:
        def __init__(self, array):
            self.array, self.device, self.asked = array, "cuda:0", []

        def __dlpack__(self, stream=None):
            self.asked.append(stream)
            return self.array.__dlpack__()

        def __dlpack_device__(self):
            return (2, 0)
    Tensor.__module__ = "torch"

    x = Tensor(DeviceArray(dev, 4096, (8,), f32))
    y = DeviceArray(dev, 8192, (8,), pk.i32)
    args = (8, 2.0, True, -3, 1.5, x, y)
    fn.launch(3, 64, *args)   # the checked path
    fn.launch(3, 64, *args)   # the hot path
    assert [r[3] for r in dev.launches] == [1234, 1234] and x.asked == [1234, 1234]
    fn.launch(3, 64, *args, stream=7)
    assert dev.launches[-1][3] == 7 and x.asked[-1] == 7
    current["stream"] = 0     # torch's default stream: CUDA's legacy stream, DLPack's 1
    fn.launch(3, 64, *args)
    assert dev.launches[-1][3] == 0 and x.asked[-1] == 1
    fn.launch(3, 64, 8, 2.0, True, -3, 1.5, DeviceArray(dev, 4096, (8,), f32), y)  # no producer: default stream
    assert dev.launches[-1][3] is None
