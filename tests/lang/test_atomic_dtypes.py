"""``pk.atomic.add`` on every dtype the stdlib and users need (f16, bf16, f32, f64, i32, u32, i64,
u64), global and shared memory, under contention from many threads; and, per arch, that the
instruction is the native one where the arch has it and a compare-and-swap loop elsewhere (the table
in docs/language.md)."""
from __future__ import annotations

import re

import numpy as np
import pytest

import pykern as pk
from pykern import ConstPtr, Ptr, usize
from pykern.compiler import lower_module
from pykern.targets.amdgpu import AmdgpuTarget
from pykern.targets.nvptx import NvptxTarget

T = pk.TypeVar("T")
DTYPES = (pk.f16, pk.bf16, pk.f32, pk.f64, pk.i32, pk.u32, pk.i64, pk.u64)
#: the unit roundoff of each float dtype; 16-bit floats add in f32 and round once more (CAS loops)
UNIT = {pk.f16: 2.0 ** -11 + 2.0 ** -24, pk.bf16: 2.0 ** -8 + 2.0 ** -24, pk.f32: 2.0 ** -24, pk.f64: 2.0 ** -53}
BLOCKS, THREADS = 64, 128


@pk.kernel
def add_global(n: usize, counters: usize, vals: ConstPtr[T], acc: Ptr[T], old: Ptr[T], *, T):
    for i in pk.grid_stride(n):
        old[i] = pk.atomic.add(acc, i % counters, vals[i])


@pk.kernel
def add_shared(counters: usize, vals: ConstPtr[T], acc: Ptr[T], old: Ptr[T], *, T):
    """Every block adds its threads' values into ``counters`` shared cells, then into ``acc``."""
    cells = pk.shared.array(THREADS, T)
    t = pk.thread_idx.x
    cells[t] = T(0)
    pk.syncthreads()
    i = pk.global_id()
    old[i] = pk.atomic.add(cells, usize(t) % counters, vals[i])
    pk.syncthreads()
    if usize(t) < counters:
        pk.atomic.add(acc, usize(t), cells[t])


MODULE = pk.Module("test_atomic_dtypes")
for _t in DTYPES:
    MODULE.add(add_global.instance(f"add_global_{_t.tag}", T=_t), add_shared.instance(f"add_shared_{_t.tag}", T=_t))


def launch_global(dev, ty, vals: np.ndarray, counters: int):
    acc, old = dev.to_device(np.zeros(counters, ty.np)), dev.empty(len(vals), ty)
    dev.get_or_load_func(f"add_global_{ty.tag}", MODULE)[BLOCKS, THREADS](len(vals), counters, dev.to_device(vals), acc, old)
    return acc.to_host(), old.to_host()


def launch_shared(dev, ty, vals: np.ndarray, counters: int):
    acc, old = dev.to_device(np.zeros(counters, ty.np)), dev.empty(len(vals), ty)
    dev.get_or_load_func(f"add_shared_{ty.tag}", MODULE)[len(vals) // THREADS, THREADS](
        counters, dev.to_device(vals), acc, old)
    return acc.to_host(), old.to_host()


def int_values(ty, n: int) -> np.ndarray:
    """Values over the whole range: the sums wrap, as integer atomics do."""
    info = np.iinfo(ty.np)
    return np.random.default_rng(7).integers(info.min, info.max, size=n, endpoint=True, dtype=ty.np)


def groups(vals: np.ndarray, counters: int, where: str) -> list[np.ndarray]:
    """The values each counter receives: thread i adds to counter i % counters (global), or to cell
    (i % THREADS) % counters of its block's shared array (shared)."""
    if where == "global":
        return [vals[c::counters] for c in range(counters)]
    return [vals.reshape(-1, THREADS)[:, c::counters].reshape(-1) for c in range(counters)]


def wrapped_sums(parts: list[np.ndarray], ty) -> list[int]:
    sums = [sum(int(v) for v in g) for g in parts]
    return [int(np.array(s % (1 << ty.bits), np.uint64).astype(ty.np)) for s in sums]


@pytest.mark.parametrize("ty", [t for t in DTYPES if t.is_int], ids=lambda t: t.tag)
def test_integer_sums_exact(wave_device, ty):
    n, counters = BLOCKS * THREADS * 2, 5
    vals = int_values(ty, n)
    acc, _ = launch_global(wave_device, ty, vals, counters)
    assert [int(a) for a in acc] == wrapped_sums(groups(vals, counters, "global"), ty)
    vals = int_values(ty, BLOCKS * THREADS)
    acc, _ = launch_shared(wave_device, ty, vals, counters)
    assert [int(a) for a in acc] == wrapped_sums(groups(vals, counters, "shared"), ty)


@pytest.mark.parametrize("ty", DTYPES, ids=lambda t: t.tag)
@pytest.mark.parametrize("where", ["global", "shared"])
def test_each_add_sees_a_distinct_old_value(wave_device, ty, where):
    """Adding 1 from k threads: the old values returned are exactly 0..k-1 in some order (each
    read-modify-write is indivisible), and the total is k. k stays where every dtype counts exactly."""
    counters = 64 if ty in (pk.f16, pk.bf16) else 4  # bf16 counts exactly to 256
    vals = np.ones(BLOCKS * THREADS, ty.np)
    acc, old = (launch_global if where == "global" else launch_shared)(wave_device, ty, vals, counters)
    per = len(vals) // counters
    assert acc.astype(np.float64).tolist() == [per] * counters
    if where == "global":
        for c in range(counters):
            assert sorted(old[c::counters].astype(np.float64).tolist()) == list(range(per))


@pytest.mark.parametrize("ty", [t for t in DTYPES if t.is_float], ids=lambda t: t.tag)
def test_float_sums_exact_when_every_partial_sum_is(wave_device, ty):
    """Multiples of 1/8 whose total in eighths fits the significand: every order gives the exact sum."""
    n, counters = BLOCKS * THREADS, 64 if ty in (pk.f16, pk.bf16) else 8
    per = n // counters
    top = 2 ** (11 if ty is pk.f16 else 8 if ty is pk.bf16 else 24) // per  # per * top <= 2**p eighths
    vals = (np.random.default_rng(3).integers(0, top, n, endpoint=True) / 8).astype(ty.np)
    acc, _ = launch_global(wave_device, ty, vals, counters)
    want = [float(vals[c::counters].astype(np.float64).sum()) for c in range(counters)]
    assert acc.astype(np.float64).tolist() == want


@pytest.mark.parametrize("ty", [t for t in DTYPES if t.is_float], ids=lambda t: t.tag)
@pytest.mark.parametrize("where", ["global", "shared"])
def test_float_sums_within_recursive_summation_bound(wave_device, ty, where):
    """Mixed signs, any order: |got - sum| <= gamma_(k-1) * sum|x| with gamma_m = m*u / (1 - m*u),
    k values per counter (Higham, Accuracy and Stability, 4.2), u the dtype's unit roundoff (plus
    f32's for the 16-bit floats, which add in f32 and round again)."""
    counters = 128 if where == "global" else 64  # 64 or 128 adds a counter: the bound stays < 1
    n = BLOCKS * THREADS
    vals = np.random.default_rng(11).uniform(-4, 4, n).astype(ty.np)
    # shared: a block's threads add into its cells, then each cell into the counter (BLOCKS more adds)
    acc, _ = (launch_global if where == "global" else launch_shared)(wave_device, ty, vals, counters)
    for c, g in enumerate(groups(vals, counters, where)):
        exact, mag = g.astype(np.float64).sum(), np.abs(g.astype(np.float64)).sum()
        m = len(g) - 1 + (BLOCKS if where == "shared" else 0)
        gamma = m * UNIT[ty] / (1 - m * UNIT[ty])
        assert abs(float(acc[c]) - exact) <= gamma * mag, (c, float(acc[c]), exact, gamma * mag)


# ---------------------------------------------------------------------------- per-arch instructions
#: (target, arch) -> dtype tag -> the instruction its global atomic add must be (a regex); a CAS loop
#: is "cas" (PTX atom.cas; AMDGPU global_atomic_cmpswap)
NATIVE_NV = {"f16": r"(atom|red)\.global\.add\.noftz\.f16\s", "bf16": r"(atom|red)\.global\.add\.noftz\.bf16\s",
             "f32": r"(atom|red)\.global\.add\.f32\s", "f64": r"(atom|red)\.global\.add\.f64\s",
             **{t: rf"(atom|red)\.global\.add\.[us]{t[1:]}\s" for t in ("i32", "u32", "i64", "u64")}}
CAS_NV = r"atom(\.relaxed\.gpu)?\.global\.cas\.b32"
CAS_AMD = r"global_atomic_cmpswap(_b32|_b64|_x2)?\s"
GLOBAL_ADD = {
    ("cuda", "sm_90"): NATIVE_NV,
    ("cuda", "sm_80"): {**NATIVE_NV, "bf16": CAS_NV},
    ("amdgpu", "gfx90a"): {"f16": CAS_AMD, "bf16": CAS_AMD, "f32": r"global_atomic_add_f32\s",
                           "f64": r"global_atomic_add_f64\s", "i32": r"global_atomic_add\s",
                           "u32": r"global_atomic_add\s", "i64": r"global_atomic_add_x2\s",
                           "u64": r"global_atomic_add_x2\s"},
    ("amdgpu", "gfx1100"): {"f16": CAS_AMD, "bf16": CAS_AMD, "f32": r"global_atomic_add_f32\s", "f64": CAS_AMD,
                            "i32": r"global_atomic_add_u32\s", "u32": r"global_atomic_add_u32\s",
                            "i64": r"global_atomic_add_u64\s", "u64": r"global_atomic_add_u64\s"},
}


def kernel_body(asm: str, name: str) -> str:
    """One kernel's instructions in a module's assembly: from its label (AMDGPU) or ``.entry`` (PTX)
    to the end of the function."""
    start = re.search(rf"^{name}:|\.entry {name}\(", asm, re.M).end()
    end = re.search(r"^\.Lfunc_end|\.entry ", asm[start:], re.M)
    return asm[start: start + end.start()] if end else asm[start:]


@pytest.mark.parametrize("target,arch", sorted(GLOBAL_ADD), ids=lambda x: x)
def test_native_instruction_or_cas_loop(target, arch, monkeypatch):
    monkeypatch.setenv("PYKERN_CACHE", "0")
    tgt = AmdgpuTarget(arch) if target == "amdgpu" else NvptxTarget(arch)
    kernels = [MODULE.get(f"add_global_{t.tag}") for t in DTYPES]
    module = lower_module(kernels, tgt, "atomics")[0]
    asm = tgt.assembly(module)
    for t in DTYPES:
        want = GLOBAL_ADD[(target, arch)][t.tag]
        # a kernel that lowers to another's IR (u32's add is i32's) is that kernel's code under a second name
        name = f"add_global_{t.tag}"
        body = kernel_body(asm, module.kernel_aliases.get(name, name))
        assert re.search(want, body), f"{arch} {t.tag}: no {want!r}"
        if want not in (CAS_NV, CAS_AMD):
            assert not re.search(r"cmpswap|\.cas\.", body), f"{arch} {t.tag}: a CAS loop beside {want!r}"


def test_fp8_atomic_add_is_a_clear_error():
    @pk.kernel
    def fp8_add(p: Ptr[pk.f8e4m3]):
        pk.atomic.add(p, 0, 1.0)

    with pytest.raises(pk.CompileError, match="atomic add on f8e4m3"):
        fp8_add[1, 1](np.zeros(1, pk.f8e4m3.np))
