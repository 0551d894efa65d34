"""Wave operations in divergent code on the CPU target: lanes that already returned are absent
(a shuffle from one yields the caller's own value, a ballot leaves its bit clear); nothing crashes."""
from __future__ import annotations

import numpy as np
import pytest

import pykern as pk
from pykern import ConstPtr, Ptr, i32, u64


@pk.kernel
def lane0_shuffles(x: ConstPtr[i32], out: Ptr[i32]):
    i = pk.global_id()
    if pk.lane_id() == 0:
        out[i] = pk.wave.shuffle(x[i] + 100, 1)   # lane 1 has returned: absent


@pk.kernel
def lane0_votes(x: ConstPtr[i32], mask: Ptr[u64]):
    i = pk.global_id()
    if pk.lane_id() == 0:
        mask[i // u64(pk.wave_size)] = pk.wave.ballot(x[i] == 0)


@pytest.mark.parametrize("width", [32, 64])
def test_divergent_wave_operations(width):
    dev = pk.device("cpu", wave_size=width)
    x = np.arange(128, dtype=np.int32)
    out = np.full(128, -1, np.int32)
    lane0_shuffles.launch(1, 128, x, out, device=dev)
    assert out[::width].tolist() == [v + 100 for v in x[::width]]
    mask = np.zeros(128 // width, np.uint64)
    lane0_votes.launch(1, 128, x, mask, device=dev)
    assert mask.tolist() == [1] + [0] * (128 // width - 1)
