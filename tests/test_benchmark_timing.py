"""benchmarks/timing.py, the one way the benchmarks time GPU work, checked where it can be.

Every benchmark must import without a GPU (the docs name them, and a broken import is only found
when a GPU call is spent on it). On a CUDA GPU: ``Timer`` must give the GPU's time of a call however
long the host takes to issue it, against an independent figure, the same calls captured in a CUDA
graph and replayed (``timing.graph_time``: no host work in the window at all); the earlier timing
(``idle_start``) must show the host's time that ``Timer`` keeps out.
"""
from __future__ import annotations

import importlib
import sys
import time
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.fixture
def bench_path(monkeypatch):
    """benchmarks/ on sys.path, and its modules (top-level names such as ``sort`` and ``conv``) out
    of sys.modules again afterwards."""
    monkeypatch.syspath_prepend(str(BENCH))
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        if str(getattr(sys.modules[name], "__file__", "") or "").startswith(str(BENCH)):
            del sys.modules[name]


@pytest.mark.parametrize("name", sorted(p.stem for p in BENCH.glob("*.py")))
def test_benchmark_imports_without_a_gpu(name, bench_path):
    module = importlib.import_module(name)
    assert callable(getattr(module, "main", None)) or name == "timing", f"benchmarks/{name}.py has no main()"


def _cuda_torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU (torch.cuda)")
    return torch


def test_timer_keeps_the_hosts_issue_out(bench_path):
    torch = _cuda_torch()
    timing = importlib.import_module("timing")
    x = torch.randn(1 << 24, device="cuda")  # 64 MiB each way: ~40 µs a copy on an H100
    y = torch.empty_like(x)
    copy = lambda: y.copy_(x)  # noqa: E731
    host_delay = 3e-4  # a wrapper's Python taking 300 µs a call, several times the kernel

    def slow_host():
        t = time.perf_counter()
        while time.perf_counter() - t < host_delay:
            pass
        y.copy_(x)

    reference = timing.graph_time(torch, lambda i, s: copy(), 20)
    timer = timing.Timer(torch)
    fast, slow = timer(copy), timer(slow_host)
    assert abs(fast / reference - 1) < 0.1, (fast, reference)
    assert abs(slow / reference - 1) < 0.1, (slow, reference)
    # the earlier timing puts the host's time in the window: each call waits for the host's 300 µs
    old = timing.idle_start(torch, slow_host, reps=5, calls=10)
    assert old > host_delay > 3 * reference, (old, reference)


def test_copy_bandwidth_is_the_copy_timed_by_the_timer(bench_path):
    torch = _cuda_torch()
    timing = importlib.import_module("timing")
    n = 1 << 26
    bw = timing.Timer(torch).copy_bandwidth(n)
    x = torch.randn(n, device="cuda")
    y = torch.empty_like(x)
    reference = 2 * x.nbytes / timing.graph_time(torch, lambda i, s: y.copy_(x), 10)
    assert abs(bw / reference - 1) < 0.1, (bw, reference)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
