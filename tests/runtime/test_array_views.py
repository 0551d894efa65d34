"""What users of NumPy and torch expect of device arrays and launches: views by basic indexing,
``empty_like``/``zeros_like``, and launches that name their arguments."""
from __future__ import annotations

import numpy as np
import pytest

import pykern as pk
from pykern import ConstPtr, Ptr, f32, usize


@pk.kernel
def saxpy(n: usize, a: f32, x: ConstPtr[f32], y: Ptr[f32]):
    for i in pk.grid_stride(n):
        y[i] = a * x[i] + y[i]


HOST = np.arange(3 * 4 * 5, dtype=np.float32).reshape(3, 4, 5)
KEYS = [1, -1, slice(1, 3), (slice(None), 1), (Ellipsis, slice(None, None, 2)), (None, 0, slice(1, 4)),
        (-1, -2, -3), slice(5, 9), (0, None, Ellipsis, 1), (slice(0, 3, 2), slice(None), slice(4, 0))]


@pytest.mark.parametrize("key", KEYS, ids=repr)
def test_basic_indexing_gives_numpys_views(key):
    x = pk.device("cpu").to_device(HOST)
    view = x[key]
    want = HOST[key]
    assert view.shape == want.shape
    np.testing.assert_array_equal(view.to_host(), want)
    assert view.is_contiguous == (want.flags.c_contiguous or want.size <= 1) or view.size == 0


def test_views_share_memory_and_go_to_the_stdlib_through_their_layout():
    from stdlib_kernels import unary
    dev = pk.device("cpu")
    x = dev.to_device(HOST.copy())
    col = x[:, 1]                              # strides (20, 1): through candle's info
    out = getattr(unary, "neg")(col)
    np.testing.assert_array_equal(out.to_host(), -HOST[:, 1])
    row = x[2, 3]
    row.copy_from_host(np.zeros(5, np.float32))  # a contiguous view writes into its parent
    assert (x.to_host()[2, 3] == 0).all() and (x.to_host()[2, 2] == HOST[2, 2]).all()


def test_bad_indices_are_clear_errors():
    x = pk.device("cpu").to_device(HOST)
    with pytest.raises(IndexError, match="out of bounds for axis 1 of size 4"):
        x[0, 4]
    with pytest.raises(IndexError, match="too many indices"):
        x[0, 0, 0, 0]
    with pytest.raises(IndexError, match="negative step"):
        x[::-1]
    with pytest.raises(IndexError, match="single ellipsis"):
        x[..., ...]
    with pytest.raises(IndexError, match="fancy indexing"):
        x[[0, 1]]


def test_empty_like_and_zeros_like():
    dev = pk.device("cpu")
    for src in (HOST, dev.to_device(HOST)):
        e, z = dev.empty_like(src), dev.zeros_like(src)
        assert e.shape == z.shape == HOST.shape and e.dtype is z.dtype is pk.f32
        assert not z.to_host().any()
    assert dev.zeros_like(np.zeros((2,), np.int64)).dtype is pk.i64


def test_launch_by_keyword():
    x = np.arange(10, dtype=np.float32)
    y = np.ones(10, np.float32)
    saxpy[1, 32](n=10, a=2.0, x=x, y=y)
    np.testing.assert_array_equal(y, 2 * x + 1)
    saxpy[1, 32](10, 2.0, y=y, x=x)
    np.testing.assert_array_equal(y, 4 * x + 1)
    fn = pk.device("cpu").get_or_load_func("saxpy", saxpy.instance().module)
    fn[1, 32](10, a=1.0, x=x, y=y)
    np.testing.assert_array_equal(y, 5 * x + 1)
    with pytest.raises(pk.LaunchError, match="no parameter 'z'.*n, a, x, y"):
        saxpy[1, 32](n=10, a=2.0, x=x, z=y)
    with pytest.raises(pk.LaunchError, match="'a' given by position and by name"):
        saxpy[1, 32](10, 2.0, x, y, a=3.0)
    with pytest.raises(pk.LaunchError, match="missing argument.*'y'"):
        saxpy[1, 32](10, 2.0, x=x)


@pk.kernel
def fill_bf16(n: usize, out: Ptr[pk.bf16], v: pk.bf16):
    for i in pk.grid_stride(n):
        out[i] = v


def test_storage_float_scalars_made_with_the_dtype_are_accepted():
    out = pk.device("cpu").empty(4, pk.bf16)
    fill_bf16[1, 32](4, out, pk.bf16(0.75))   # an ml_dtypes scalar, as pk.bf16(...) makes on the host
    assert (out.to_host().astype(np.float32) == 0.75).all()
    with pytest.raises(pk.LaunchError, match="expects bf16"):
        fill_bf16[1, 32](4, out, "0.75")
