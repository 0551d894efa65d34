"""How the benchmarks time GPU work: one module, so that every figure in the docs is measured one way.

A figure is the GPU's time for one call: the median over ``REPS`` samples of ``CALLS`` back-to-back
calls between two CUDA events, the calls queued behind a GPU-side sleep (``Timer``). Every bandwidth
is stated against a large device-to-device copy timed the same way in the same run
(``Timer.copy_bandwidth``), since the copy rate moves from host to host and card to card.

Why the sleep: a start event recorded on an idle GPU fires at once, and the window then also holds
the host's time to issue the first call. pykern's Python wrappers take 30-60 µs a call against
torch's 10-20, so that time made pykern's short kernels look 1-3% slower than they run (ten calls of
0.2 ms). Behind a sleep longer than the host takes to issue the calls, the start event fires only
when the GPU reaches it, with the calls already queued behind it. ``idle_start`` keeps the earlier
way, only to show the size of that correction beside the new figure.

Everything here takes the caller's ``torch`` module (imported by the benchmark, never here): the
benchmarks import on a machine without torch too, and time nothing there.
"""
from __future__ import annotations

import statistics
import time

#: calls between the two events of a sample, and samples a timing
CALLS, REPS = 10, 15
#: alternations of pykern's and torch's timings where a ratio of the two is reported (``Timer.pair``)
ROUNDS = 3


def _per_call(torch, fn, calls: int, reps: int, before=None) -> float:
    """Median seconds a call over ``reps`` samples of ``calls`` calls of ``fn`` between two events on
    the current stream, after three calls of warm-up (module loads, first-use work); ``before`` is
    queued ahead of each sample's start event."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if before is not None:
            before()
        a.record()
        for _ in range(calls):
            fn()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b) / 1e3 / calls)
    return statistics.median(out)


def idle_start(torch, fn, reps: int = 20, calls: int = 1) -> float:
    """The earlier timing, kept for comparison only: median seconds a call over ``reps`` samples of
    ``calls`` calls between two events, the start event recorded on an idle GPU, so each sample
    includes the host's issue of the first call (the size of what ``Timer`` corrects)."""
    return _per_call(torch, fn, calls, reps)


def graph_time(torch, fn, iters: int) -> float:
    """GPU seconds a call of ``fn(i, stream)``: ``iters`` calls captured in one CUDA graph, its
    replays timed with events (median of 5). No host work at all lies between the graph's kernels,
    so this is also the independent check of ``Timer`` (tests/test_benchmark_timing.py); the gaps
    between kernels stay in the figure, as in a captured model."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for i in range(3):  # module loads and first-use work stay out of the capture
            fn(i, s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        for i in range(iters):
            fn(i, s)
    g.replay()
    torch.cuda.synchronize()
    return _per_call(torch, g.replay, 1, 5) / iters


class Timer:
    """GPU seconds a call, the host's issue of the calls kept out of the window (module docstring).

    ``torch.cuda._sleep`` spins for a number of GPU clock cycles: the rate is calibrated once, so a
    sleep can be asked for in seconds. Each sample's sleep is three times what the host takes to
    issue its calls (``host``), and at least 0.2 ms."""

    def __init__(self, torch, calls: int = CALLS, reps: int = REPS):
        self.torch, self.calls, self.reps = torch, calls, reps
        torch.cuda._sleep(1000)  # the sleep kernel's own first launch stays out of the calibration
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        torch.cuda._sleep(10_000_000)
        b.record()
        b.synchronize()
        self.cycles_per_s = 1e7 / (a.elapsed_time(b) / 1e3)

    def sleep(self, seconds: float) -> None:
        """Keep the GPU busy for ``seconds`` on the current stream (no host wait)."""
        self.torch.cuda._sleep(int(self.cycles_per_s * seconds))

    def host(self, fn, calls: int = 20) -> float:
        """Seconds the host takes to issue one call of ``fn``, the GPU kept busy by a sleep meanwhile
        (so no call waits for a free slot in the launch queue or for the GPU)."""
        torch = self.torch
        fn()
        torch.cuda.synchronize()
        self.sleep(0.05)
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        t = (time.perf_counter() - t0) / calls
        torch.cuda.synchronize()
        return t

    def __call__(self, fn, host_s: float | None = None, *, calls: int | None = None,
                 reps: int | None = None) -> float:
        """Median GPU seconds a call of ``fn`` (``calls`` back to back a sample, ``reps`` samples).
        ``host_s``: the host's seconds a call, measured by ``host`` when not given."""
        calls, reps = calls or self.calls, reps or self.reps
        if host_s is None:
            host_s = self.host(fn)
        sleep = max(2e-4, 3 * host_s * calls)
        return _per_call(self.torch, fn, calls, reps, before=lambda: self.sleep(sleep))

    def pair(self, ours, theirs, rounds: int = ROUNDS) -> tuple[float, float, list[float]]:
        """(ours, theirs, the single rounds' theirs/ours ratios): the two timed in turn ``rounds``
        times and each side's median taken, since which of two timings runs first moves a ratio by
        about as much as two kernels a few percent apart differ."""
        h_ours, h_theirs = self.host(ours), self.host(theirs)
        t = [(self(ours, h_ours), self(theirs, h_theirs)) for _ in range(rounds)]
        return (statistics.median(p[0] for p in t), statistics.median(p[1] for p in t),
                [p[1] / p[0] for p in t])

    def copy_bandwidth(self, n: int = 1 << 28) -> float:
        """Bytes a second (read + written) of torch's copy of ``n`` f32 between two device buffers:
        the ceiling every bandwidth is stated against. 2^28 f32 (1 GiB each way) is far larger than
        any L2, so the copy runs at DRAM speed."""
        torch = self.torch
        x = torch.randn(n, device="cuda")
        y = torch.empty_like(x)
        return 2 * x.nbytes / self(lambda: y.copy_(x))
