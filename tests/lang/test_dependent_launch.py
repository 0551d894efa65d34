"""Programmatic dependent launch: ``pk.grid_dependency_wait()`` / ``pk.launch_dependents()`` and
``Function.launch(..., programmatic=True)``.

The built-ins lower to ``griddepcontrol`` on NVPTX sm_90+ and to nothing elsewhere; a producer /
consumer pair launched programmatically computes exactly what two plain launches compute, on every
device (on a CUDA sm_90 GPU the consumer really may start early: the wait is what keeps it right),
and under CUDA-graph capture.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import pykern as pk
from pykern import ConstPtr, Ptr, u32
from pykern.compiler import compile_kernels
from pykern.targets.nvptx import NvptxTarget, ptxas_check, ptxas_path

#: rounds of busy work a producer's thread does before its store: long enough that a consumer which
#: started early and read without waiting would find the previous launch's values
SPIN = 2000


@pk.kernel
def producer(out: Ptr[u32], n: u32, seed: u32):
    """``out[i]`` = a hash of (i, seed) after SPIN rounds (not affine: LLVM cannot merge them): slow on purpose. The dependent kernel may
    start as soon as every block is running (launch_dependents first)."""
    pk.launch_dependents()
    i = pk.block_idx.x * pk.block_dim.x + pk.thread_idx.x
    if i < n:
        h = i ^ seed
        for _ in range(SPIN):
            h = (h ^ (h >> u32(13))) * u32(1664525) + u32(1013904223)
        out[i] = h


@pk.kernel
def consumer(src: ConstPtr[u32], acc: Ptr[u32], n: u32):
    """``acc[i] += src[i]``: reads the producer's output only after the wait."""
    i = pk.block_idx.x * pk.block_dim.x + pk.thread_idx.x
    pk.grid_dependency_wait()
    if i < n:
        acc[i] = acc[i] + src[i]


def expected(n: int, seeds) -> np.ndarray:
    """NumPy's producer + consumer: the hashes of every seed summed (u32, wrapping)."""
    acc = np.zeros(n, np.uint32)
    i = np.arange(n, dtype=np.uint32)
    with np.errstate(over="ignore"):
        for seed in seeds:
            h = i ^ np.uint32(seed)
            for _ in range(SPIN):
                h = (h ^ (h >> np.uint32(13))) * np.uint32(1664525) + np.uint32(1013904223)
            acc += h
    return acc


def _ptx(kernel, arch: str) -> str:
    ptx, _ = compile_kernels([kernel._only_instance()], NvptxTarget(arch), kernel.name)
    if ptxas_path():
        ptxas_check(ptx, arch)
    return ptx.decode()


def test_ptx_has_griddepcontrol_on_sm90_only():
    lines = [ln.strip() for ln in _ptx(consumer, "sm_90").splitlines()]
    wait = lines.index("griddepcontrol.wait;")
    first_load = next(i for i, ln in enumerate(lines) if ln.startswith("ld.global"))
    assert wait < first_load  # the memory clobber keeps the producer's output read after the wait
    assert "griddepcontrol.launch_dependents;" in _ptx(producer, "sm_90")
    for arch in ("sm_80", "sm_86", "sm_89"):
        assert "griddepcontrol" not in _ptx(consumer, arch) + _ptx(producer, arch)


def test_typing_takes_no_arguments():
    @pk.kernel
    def bad(p: Ptr[u32]):
        pk.grid_dependency_wait(p)

    with pytest.raises(pk.CompileError, match=r"grid_dependency_wait\(\) takes 0 arguments"):
        compile_kernels([bad._only_instance()], NvptxTarget("sm_90"), "bad")


@pytest.mark.needs_lld
@pytest.mark.parametrize("arch", ["gfx90a", "gfx1100", "gfx942"])
def test_amdgpu_lowers_to_nothing(arch):
    """The same code object text with and without the built-ins: they emit nothing on AMDGPU."""
    from pykern.targets.amdgpu import AmdgpuTarget

    @pk.kernel
    def plain(src: ConstPtr[u32], acc: Ptr[u32], n: u32):
        i = pk.block_idx.x * pk.block_dim.x + pk.thread_idx.x
        if i < n:
            acc[i] = acc[i] + src[i]

    target = AmdgpuTarget(arch)

    def asm(kernel):
        from pykern.compiler import lower_module
        module, _ = lower_module([kernel._only_instance()], target, "t")
        return re.sub(r"\b(plain|consumer)\b", "K", target.assembly(module))

    assert asm(consumer) == asm(plain)


def test_cpu_ir_has_no_trace():
    from pykern.compiler import lower_module
    from pykern.targets.cpu import CpuTarget
    module, _ = lower_module([consumer._only_instance()], CpuTarget(), "t")
    text = str(module)
    assert "griddepcontrol" not in text and "asm" not in text


@pytest.mark.parametrize("programmatic", [False, True])
def test_producer_consumer_exact(device, programmatic):
    """Many producer -> consumer pairs back to back on one stream, the consumer launched
    programmatically: the sum is exact, so no consumer read a stale or half-written output."""
    n, rounds = 1 << 14, 40 if device.kind != "cpu" else 3
    seeds = [(7919 * r + 1) & 0xFFFFFFFF for r in range(rounds)]
    buf = device.to_device(np.full(n, 0xDEADBEEF, np.uint32))
    acc = device.to_device(np.zeros(n, np.uint32))
    prod = device.get_or_load_func(producer.name, producer._only_instance().module)
    cons = device.get_or_load_func(consumer.name, consumer._only_instance().module)
    grid = -(-n // 256)
    for seed in seeds:
        prod.launch(grid, 256, buf, n, seed)
        cons.launch(grid, 256, buf, acc, n, programmatic=programmatic)
    np.testing.assert_array_equal(acc.to_host(), expected(n, seeds))


def test_programmatic_launch_under_graph_capture():
    """Captured into a CUDA graph (how benchmarks/quantized.py times the pair), the programmatic
    launch becomes a programmatic edge; replays compute the same exact sums."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    dev = pk.device("cuda")
    n, rounds, replays = 1 << 14, 8, 5
    seeds = [(104729 * r + 3) & 0xFFFFFFFF for r in range(rounds)]
    buf = torch.zeros(n, dtype=torch.int32, device="cuda")
    acc = torch.zeros(n, dtype=torch.int32, device="cuda")
    prod = dev.get_or_load_func(producer.name, producer._only_instance().module)
    cons = dev.get_or_load_func(consumer.name, consumer._only_instance().module)
    grid = -(-n // 256)

    def pairs(s):
        for seed in seeds:
            prod.launch(grid, 256, buf.data_ptr(), n, seed, stream=s)
            cons.launch(grid, 256, buf.data_ptr(), acc.data_ptr(), n, stream=s, programmatic=True)

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        pairs(s)  # loads the modules outside the capture
    torch.cuda.synchronize()
    acc.zero_()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        pairs(s)
    torch.cuda.synchronize()
    acc.zero_()
    torch.cuda.synchronize()
    for _ in range(replays):
        g.replay()
    torch.cuda.synchronize()
    got = acc.cpu().numpy().view(np.uint32)
    np.testing.assert_array_equal(got, expected(n, seeds * replays))
