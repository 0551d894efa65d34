"""Wave operations in divergent code on the CPU target: a wave operation reached by only some lanes
of a wave -- the others elsewhere, or already returned -- raises LaunchError naming the line (issue
25: a lane that had returned used to be skipped, and the shuffle read its own value as if it were
the partner's, which a GPU does not promise). Nothing crashes; convergent code runs."""
from __future__ import annotations

import numpy as np
import pytest

import pykern as pk
from pykern import ConstPtr, Ptr, i32, u64, usize


@pk.kernel
def lane0_shuffles(x: ConstPtr[i32], out: Ptr[i32]):
    i = pk.global_id()
    if pk.lane_id() == 0:
        out[i] = pk.wave.shuffle(x[i] + 100, 1)   # lane 1 has returned


@pk.kernel
def lane0_votes(x: ConstPtr[i32], mask: Ptr[u64]):
    i = pk.global_id()
    if pk.lane_id() == 0:
        mask[i // u64(pk.wave_size)] = pk.wave.ballot(x[i] == 0)


@pk.kernel
def tail_returns_then_sums(x: ConstPtr[i32], out: Ptr[i32], n: usize):
    i = pk.global_id()
    if i >= n:
        return
    out[i] = pk.wave.sum(x[i])   # the returned lanes of the last wave are missing


@pk.kernel
def tail_contributes_zero(x: ConstPtr[i32], out: Ptr[i32], n: usize):
    i = pk.global_id()
    v = x[i] if i < n else 0
    s = pk.wave.sum(v)   # every lane here
    if i < n:
        out[i] = s


@pytest.mark.parametrize("width", [32, 64])
def test_divergent_wave_operations_raise(width):
    dev = pk.device("cpu", wave_size=width)
    x = np.arange(128, dtype=np.int32)
    with pytest.raises(pk.LaunchError, match=r"lane0_shuffles: a wave operation was reached by only some lanes "
                                             r"of a wave \(line \d+\)"):
        lane0_shuffles.launch(1, 128, x, np.full(128, -1, np.int32), device=dev)
    with pytest.raises(pk.LaunchError, match="lane0_votes: a wave operation was reached by only some lanes"):
        lane0_votes.launch(1, 128, x, np.zeros(128 // width, np.uint64), device=dev)
    with pytest.raises(pk.LaunchError, match="tail_returns_then_sums: a wave operation"):
        tail_returns_then_sums.launch(1, 128, x, np.zeros(128, np.int32), 100, device=dev)


@pytest.mark.parametrize("width", [32, 64])
def test_convergent_wave_operations_run(width):
    dev = pk.device("cpu", wave_size=width)
    x = np.arange(128, dtype=np.int32)
    out = np.zeros(128, np.int32)
    tail_contributes_zero.launch(1, 128, x, out, 100, device=dev)
    sums = np.where(np.arange(128) < 100, x, 0).reshape(-1, width).sum(1)
    assert out[:100].tolist() == np.repeat(sums, width)[:100].tolist()
    out[:] = 0
    tail_contributes_zero.launch(1, 100, x, out, 100, device=dev)  # a partial last wave: its lanes all there
    sums = x[:100].copy()
    want = [int(sums[w * width:(w + 1) * width].sum()) for w in range(-(-100 // width)) for _ in range(width)][:100]
    assert out[:100].tolist() == want
