"""A user's file that writes, instantiates and launches kernels type-checks under ``mypy --strict``
against pykern's public API (``pykern/__init__.pyi``, ``py.typed``) — and runs."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

USER_FILE = textwrap.dedent('''
    import numpy as np
    import pykern as pk
    from pykern import ConstPtr, Ptr, f32, i32, u32, usize

    T = pk.TypeVar("T")


    @pk.func
    def axpy(a: f32, x: f32, y: f32) -> f32:
        return pk.fma(a, x, y)


    @pk.kernel
    def saxpy(n: usize, a: f32, x: ConstPtr[f32], y: Ptr[f32]) -> None:
        for i in pk.grid_stride(n):
            y[i] = axpy(a, x[i], y[i])


    @pk.kernel(max_block_size=256)
    def block_sum(n: u32, x: ConstPtr[f32], out: Ptr[f32]) -> None:
        tile = pk.shared.array(256, f32)
        t = pk.thread_idx.x
        tile[t] = x[t] if t < n else f32(0)
        pk.syncthreads()
        lane_sum = pk.wave.sum(tile[t])
        if pk.lane_id() == 0:
            pk.atomic.add(out, 0, lane_sum)


    @pk.kernel
    def fill(n: usize, out: Ptr[T], v: T, *, T: type) -> None:  # compile-time parameters may be annotated
        for i in pk.grid_stride(n):
            out[i] = v


    def main() -> None:
        x = np.arange(100, dtype=np.float32)
        y = np.ones(100, np.float32)
        saxpy[1, 64](100, 2.0, x, y)
        assert np.allclose(y, 2 * x + 1)
        dev = pk.device("cpu")
        xd = dev.to_device(x)
        out = dev.zeros(1, pk.f32)
        block_sum[1, 256](100, xd, out)
        assert abs(float(out.to_host()[0]) - float(x.sum())) < 1e-3
        mod = pk.Module("fills").add(fill.instance("fill_i32", T=pk.i32))
        buf = dev.empty(5, pk.i32)
        dev.get_or_load_func("fill_i32", mod)[1, 32](n=5, out=buf, v=7)
        first: i32 = int(buf.to_host()[0])
        assert first == 7 and buf[1:3].shape == (2,)


    main()
''')


@pytest.mark.skipif(shutil.which("mypy") is None and not shutil.which(sys.executable), reason="no mypy")
def test_a_users_file_passes_mypy_strict_and_runs(tmp_path):
    pytest.importorskip("mypy", reason="mypy is in the test extra")
    user = tmp_path / "my_kernels.py"
    user.write_text(USER_FILE)
    env = {**os.environ, "MYPYPATH": str(REPO), "MYPY_CACHE_DIR": str(tmp_path / ".mypy_cache")}
    r = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(user)],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    run = subprocess.run([sys.executable, str(user)], capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]


def test_the_stub_declares_every_public_name():
    """``__init__.pyi`` replaces ``__init__.py`` for type checkers: a name exported without a
    declaration there would be an error in every user's file that uses it."""
    import ast
    import types

    import pykern
    tree = ast.parse((REPO / "pykern" / "__init__.pyi").read_text())
    declared = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            declared.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            declared.add(node.target.id)
        elif isinstance(node, ast.Assign):
            declared.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.ImportFrom):
            declared.update(a.asname for a in node.names if a.asname and a.asname == a.name)
    public = {n for n, v in vars(pykern).items() if not n.startswith("_")
              and not (isinstance(v, types.ModuleType) and n not in ("math", "config"))}
    assert public - declared == set(), "declare these in pykern/__init__.pyi"
