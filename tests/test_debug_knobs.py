"""The debugging knobs do what docs/guide.md §6 says: PYKERN_DUMP writes every stage of every
compile, PYKERN_VERBOSE logs each compile with its time and cache outcome, and the typed IR prints."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import stdlib_kernels
from pykern.ir import printer
from pykern.targets.registry import make_target

SCRIPT = textwrap.dedent('''
    import numpy as np
    import pykern as pk
    from pykern import f32, usize, Ptr, ConstPtr

    @pk.kernel
    def saxpy(n: usize, a: f32, x: ConstPtr[f32], y: Ptr[f32]):
        for i in pk.grid_stride(n):
            y[i] = a * x[i] + y[i]

    y = np.ones(8, np.float32)
    saxpy[1, 32](8, 2.0, np.ones(8, np.float32), y)
    assert (y == 3).all()
    print("ran")
''')


def run(tmp_path, **env) -> subprocess.CompletedProcess:
    script = tmp_path / "user.py"
    script.write_text(SCRIPT)
    full = {"PATH": "/usr/bin:/bin", "PYKERN_CACHE_DIR": str(tmp_path / "cache"), **env}
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=full, timeout=300)
    assert r.returncode == 0 and "ran" in r.stdout, r.stderr[-2000:]
    return r


def test_verbose_logs_each_compile_and_the_cache_outcome(tmp_path):
    first = run(tmp_path, PYKERN_VERBOSE="1")
    assert "cache miss: saxpy" in first.stderr and "compiled saxpy for" in first.stderr
    second = run(tmp_path, PYKERN_VERBOSE="1")
    assert "cache hit: saxpy" in second.stderr and "compiled saxpy" not in second.stderr
    quiet = run(tmp_path)
    assert "pykern.compiler" not in quiet.stderr


def test_dump_writes_every_stage(tmp_path):
    run(tmp_path, PYKERN_DUMP=str(tmp_path / "dump"))
    folders = list((tmp_path / "dump").iterdir())
    assert [f.name for f in folders] == ["saxpy.cpu-host"]
    files = {p.name: p.read_text() for p in folders[0].iterdir()}
    assert sorted(files) == ["1-typed.py", "2-llvm.ll", "3-opt.ll", "4-asm.s"]
    assert "def saxpy(n: u64, a: f32, x: ConstPtr[f32], y: Ptr[f32]) -> None:" in files["1-typed.py"]
    assert "y[i] = ((a * x[i]) + y[i])" in files["1-typed.py"]
    assert "define" in files["2-llvm.ll"] and "define" in files["3-opt.ll"]
    assert files["4-asm.s"].strip()
    run(tmp_path, PYKERN_DUMP=str(tmp_path / "dump2"))  # the cache is warm: dumping still lowers
    assert (tmp_path / "dump2" / "saxpy.cpu-host" / "1-typed.py").is_file()


@pytest.mark.parametrize("module", [m for m in stdlib_kernels.MODULES if len(m)], ids=lambda m: m.name)
def test_the_typed_ir_of_stdlib_kernels_prints(module):
    target = make_target("amdgpu", "gfx90a")
    for inst in module.kernels[:: max(1, len(module) // 4)]:
        text = printer.function(inst.typed(target))
        assert text.startswith(f"def {inst.name}(") and "\n    " in text
