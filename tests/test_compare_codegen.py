"""tools/compare_codegen.py on two builds of a small file whose differences are known: one kernel
unchanged, one changed, one only in the second build. The AMDGPU figures it reads from llvm-readobj's
text are checked against pykern's own code-object reader (msgpack, not text)."""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("compare_codegen", ROOT / "tools" / "compare_codegen.py")
cg = sys.modules["compare_codegen"] = importlib.util.module_from_spec(_spec)  # dataclasses look it up
_spec.loader.exec_module(cg)

BEFORE = '''
import pykern as pk
from pykern import f32, usize, Ptr, ConstPtr

@pk.kernel
def scale(n: usize, a: f32, y: Ptr[f32]):
    for i in pk.grid_stride(n):
        y[i] = a * y[i]

@pk.kernel
def axpy(n: usize, a: f32, x: ConstPtr[f32], y: Ptr[f32]):
    for i in pk.grid_stride(n):
        y[i] = a * x[i] + y[i]

@pk.kernel
def block_sum(x: ConstPtr[f32], out: Ptr[f32]):
    buf = pk.shared.array(256, f32)
    t = pk.thread_idx.x
    buf[t] = x[t]
    pk.syncthreads()
    if t == 0:
        s = f32(0)
        for k in range(256):
            s += buf[k]
        out[0] = s
'''
AFTER = (BEFORE.replace("y[i] = a * x[i] + y[i]", "y[i] = a * x[i] + pk.sqrt(y[i])")
         + '''
@pk.kernel
def added(n: usize, y: Ptr[f32]):
    for i in pk.grid_stride(n):
        y[i] = f32(0)
''')


def _build(tmp: Path, side: str, source: str, target: str, arch: str) -> Path:
    folder = tmp / side
    folder.mkdir(exist_ok=True)
    (folder / "kern.py").write_text(source)
    out = folder / "out"
    env = {"PYKERN_CACHE_DIR": str(tmp / f"cache-{side}"), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "pykern.cli.main", "build", str(folder / "kern.py"),
                           "--target", target, "--arch", arch, "-j", "1", "--out", str(out)],
                          capture_output=True, text=True, env={**os.environ, **env})
    assert done.returncode == 0, done.stderr
    return out


def _compare(a: Path, b: Path, arch: str, tmp: Path) -> tuple[int, dict]:
    report = tmp / f"report-{arch}.json"
    status = cg.main(["--built", str(a), str(b), "--targets", arch, "--json", str(report)])
    return status, json.loads(report.read_text())["archs"][arch]


def _check(tmp: Path, target: str, arch: str) -> tuple[Path, Path]:
    a = _build(tmp, "a", BEFORE, target, arch)
    b = _build(tmp, "b", AFTER, target, arch)
    status, same = _compare(a, a, arch, tmp)
    assert status == 0 and same["kernels"] == same["identical"] == 3 and not same["different"]
    assert same["modules"] == same["files_identical"] == 1
    status, r = _compare(a, b, arch, tmp)
    assert status == 1
    assert (r["kernels"], r["identical"], r["files_identical"]) == (3, 2, 0)
    assert r["only_a"] == [] and r["only_b"] == ["kern/added"]
    [d] = r["different"]
    assert d["kernel"] == "kern/axpy" and not d["code_identical"]
    assert d["changed"]["instructions"][1] > d["changed"]["instructions"][0]  # and a square root
    return a, b


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="no ptxas (CUDA toolkit) here")
def test_ptx(tmp_path):
    a, _ = _check(tmp_path, "cuda", "sm_90")
    kernels, _ = cg.read_ptx(a / "sm_90" / "kern.ptx", "sm_90", shutil.which("ptxas"))
    assert set(kernels) == {"scale", "axpy", "block_sum"}
    assert kernels["block_sum"].stats["smem"] == 1024  # 256 f32 of static shared memory
    assert all(k.stats["registers"] > 0 and k.instructions > 0 for k in kernels.values())


@pytest.mark.needs_lld
@pytest.mark.skipif(not shutil.which("llvm-readobj-19") and not shutil.which("llvm-readobj"),
                    reason="no llvm-readobj (apt-get install llvm-19)")
def test_hsaco(tmp_path):
    from pykern.targets.codeobject import CodeObject
    a, _ = _check(tmp_path, "amdgpu", "gfx90a")
    path = a / "gfx90a" / "kern.hsaco"
    tools = {"readobj": cg.tool(["llvm-readobj-19", "llvm-readobj"], "LLVM_READOBJ"),
             "objdump": cg.tool(["llvm-objdump-19", "llvm-objdump"], "LLVM_OBJDUMP")}
    kernels, _ = cg.read_hsaco(path, tools["readobj"], tools["objdump"])
    reference = CodeObject(path.read_bytes()).kernels
    assert set(kernels) == set(reference)
    for name, k in kernels.items():
        ref = reference[name]
        assert k.stats["vgpr"] == ref.vgpr_count and k.stats["sgpr"] == ref.sgpr_count
        assert k.stats["lds"] == ref.lds and k.stats["scratch"] == ref.scratch
        assert k.stats["vgpr_spill"] == ref.vgpr_spill_count and k.stats["sgpr_spill"] == ref.sgpr_spill_count
        insns = k.text.splitlines()
        assert "s_endpgm" in insns and insns[-1] != "s_nop 0"  # the kernel, not the padding after it
    assert kernels["block_sum"].stats["lds"] == 1024


def test_ptx_functions_split():
    """Entries and out-of-line device functions are cut at their closing brace; prototypes stay in
    the module's shared text."""
    ptx = "\n".join([
        ".version 7.8", ".target sm_90", ".address_size 64",
        ".func (.param .b32 r) helper(.param .b32 x);",
        ".visible .entry k1(", "\t.param .u64 p", ")", "{", "\tld.param.b64 \t%rd1, [p];", "$L1:", "\tret;", "}",
        ".func (.param .b32 r) helper(.param .b32 x)", "{", "\tmov.b32 \t%r1, 0;", "\tret;", "}",
        ".entry k2()", "{", "\tret;", "}"])
    funcs, rest = cg.ptx_functions(ptx)
    assert set(funcs) == {"k1", "k2", "func helper"}
    assert cg.ptx_instructions(funcs["k1"]) == 2 and cg.ptx_instructions(funcs["k2"]) == 1
    assert ".func (.param .b32 r) helper(.param .b32 x);" in rest and "ret" not in rest


TWINS = '''
from __future__ import annotations
import pykern as pk
from pykern import u32, i32, usize, Ptr

@pk.kernel
def bump(n: usize, y: Ptr[T], *, T):
    for i in pk.grid_stride(n):
        y[i] = y[i] + T(1)

twins = pk.Module("twins").add(bump.instance("bump_u32", T=u32), bump.instance("bump_i32", T=i32))
'''


def test_neutral_names():
    """Labels numbered by the function's place and demoted shared arrays' kernel names are not code."""
    a = "$L__BB3_1:\n\tld.shared.f32 %f1, [k1_$_buf+4];\n\tbra.uni $L__BB3_1;"
    b = "$L__BB7_1:\n\tld.shared.f32 %f1, [other_$_buf+4];\n\tbra.uni $L__BB7_1;"
    assert cg.neutral_names(a) == cg.neutral_names(b)
    assert cg.neutral_names(a) != cg.neutral_names(a.replace("BB3_1", "BB3_2", 1))


@pytest.mark.needs_lld
@pytest.mark.skipif(not shutil.which("llvm-readobj-19") and not shutil.which("llvm-readobj"),
                    reason="no llvm-readobj (apt-get install llvm-19)")
def test_hsaco_second_name_has_its_code(tmp_path):
    """A kernel written under a second name (a twin, compiler.identical_kernels) shares its primary's
    symbol address; objdump lists the code under one name, and both read as that code."""
    out = _build(tmp_path, "t", TWINS, "amdgpu", "gfx90a")
    tools = {"readobj": cg.tool(["llvm-readobj-19", "llvm-readobj"], "LLVM_READOBJ"),
             "objdump": cg.tool(["llvm-objdump-19", "llvm-objdump"], "LLVM_OBJDUMP")}
    [path] = (out / "gfx90a").glob("*.hsaco")
    kernels, _ = cg.read_hsaco(path, tools["readobj"], tools["objdump"])
    assert set(kernels) == {"bump_u32", "bump_i32"}
    assert kernels["bump_u32"].instructions > 0 and kernels["bump_i32"].text == kernels["bump_u32"].text


def test_ptx_entry_ends_at_its_matching_brace():
    """An inline asm block (a cache-hinted load) may close at column 0 inside an entry: the entry
    goes on to its matching brace, so nothing of it is read as the module's own lines."""
    ptx = ("//\n.version 8.0\n\n\t// .globl\tk\n.visible .entry k(\n\t.param .u64 k_param_0\n)\n{\n"
           "\tld.param.b64 \t%rd1, [k_param_0];\n\t// begin inline asm\n\t{\n\t.reg .b64 pol;\n"
           "\tld.global.b64 %rd2, [%rd1];\n}\n\t// end inline asm\n\tret;\n\n}\n")
    funcs, rest = cg.ptx_functions(ptx)
    assert list(funcs) == ["k"] and funcs["k"].endswith("\tret;\n\n}") and "ret;" not in rest
    assert cg.ptx_instructions(funcs["k"]) == 3
