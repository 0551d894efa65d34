"""The CLI for a user's own kernels and habits: ``pykern build my_kernels.py``, ``show
file.py:kernel --sig``, ``--version``, flags after the command, ``-j`` checked, progress on a
terminal only."""
from __future__ import annotations

import io
import json
import textwrap

import pytest

from pykern.cli import commands
from pykern.targets.codeobject import CodeObject
from tests.cli.test_cli import assert_user_error, pykern

USER_FILE = textwrap.dedent('''
    import pykern as pk
    from pykern import f32, usize, Ptr, ConstPtr

    T = pk.TypeVar("T")

    @pk.kernel
    def saxpy(n: usize, a: f32, x: ConstPtr[f32], y: Ptr[f32]):
        for i in pk.grid_stride(n):
            y[i] = a * x[i] + y[i]

    @pk.kernel
    def copy(n: usize, x: ConstPtr[T], y: Ptr[T], *, T):
        for i in pk.grid_stride(n):
            y[i] = x[i]

    copy_f16 = copy.instance("copy_f16", T=pk.f16)

    @pk.kernel
    def never_bound(n: usize, x: Ptr[T], *, T):
        pass

    bytes_module = pk.Module("bytes").add(copy.instance("copy_u8", T=pk.u8))
''')


@pytest.fixture
def user_file(tmp_path):
    path = tmp_path / "my_kernels.py"
    path.write_text(USER_FILE)
    return path


def test_build_a_users_file(user_file, tmp_path):
    out = tmp_path / "out"
    r = pykern("build", str(user_file), "--arch", "gfx1100,gfx90a", "--out", str(out), "-j", "2",
               cache=tmp_path / "cache")
    assert "skipping never_bound: generic over ['T']" in r.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    built = {(e["arch"], e["module"]): sorted(k["name"] for k in e["kernels"]) for e in manifest["modules"]}
    for arch in ("gfx1100", "gfx90a"):
        assert built[(arch, "my_kernels")] == ["copy_f16", "saxpy"]
        assert built[(arch, "bytes")] == ["copy_u8"]
        co = CodeObject((out / arch / "my_kernels.hsaco").read_bytes())
        assert co.arch == arch and set(co.kernels) == {"saxpy", "copy_f16"}


def test_a_file_with_no_kernel_is_a_usage_error(tmp_path):
    empty = tmp_path / "nothing.py"
    empty.write_text("x = 1\n")
    assert_user_error(pykern("build", str(empty), "--out", str(tmp_path / "o"), cache=tmp_path, check=None),
                      "defines no kernel to build")


def test_a_file_inside_a_package_keeps_its_relative_imports(tmp_path):
    pkg = tmp_path / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "consts.py").write_text("SCALE = 3.0\n")
    (pkg / "kern.py").write_text(textwrap.dedent('''
        import pykern as pk
        from pykern import f32, usize, Ptr
        from .consts import SCALE

        @pk.kernel
        def scale(n: usize, y: Ptr[f32]):
            for i in pk.grid_stride(n):
                y[i] = y[i] * SCALE
    '''))
    out = tmp_path / "out"
    r = pykern("build", str(pkg / "kern.py"), "--target", "cuda", "--out", str(out), cache=tmp_path / "cache")
    assert "1 modules (1 kernels)" in r.stdout, r.stdout
    assert "mul" in (out / "sm_90" / "kern.ptx").read_text()
    r = pykern("show", f"{pkg / 'kern.py'}:scale", "--target", "cpu", "--stage", "typed", cache=tmp_path / "cache")
    assert "3.0" in r.stdout, r.stdout


def test_show_a_generic_kernel_with_sig(user_file, tmp_path):
    r = pykern("show", f"{user_file}:copy", "--sig", "T=bf16", "--stage", "typed", cache=tmp_path)
    assert "def copy(n: u64, x: ConstPtr[bf16], y: Ptr[bf16]) -> None:" in r.stdout
    r = pykern("show", f"{user_file}:copy", "--sig", "T=f32", "--target", "cuda", "--stage", "asm", cache=tmp_path)
    assert ".entry copy(" in r.stdout and ".b32" in r.stdout
    assert_user_error(pykern("show", f"{user_file}:copy", "--sig", "T=f99", cache=tmp_path, check=None),
                      "not a dtype")
    assert_user_error(pykern("show", f"{user_file}:copy", "--sig", "W=4", cache=tmp_path, check=None),
                      "missing compile-time parameters ['T']")
    assert_user_error(pykern("show", "unary", "ucopy_f32", "--sig", "T=f32", cache=tmp_path, check=None),
                      "--sig is for generic kernels")


def test_version_flags_after_the_command_and_jobs(tmp_path):
    from pykern import __version__
    assert pykern("--version", cache=tmp_path).stdout.strip() == f"pykern {__version__}"
    r = pykern("list", "affine", "-v", cache=tmp_path)   # a global flag after the command
    assert "affine_f32" in r.stdout
    r = pykern("show", "affine", "affine_f32", "--stage", "ir", "--verbose", cache=tmp_path)
    assert "pykern.compiler" not in r.stdout and "define" in r.stdout
    for bad in ("0", "-3"):
        assert_user_error(pykern("build", "affine", "--out", str(tmp_path / "o"), "-j", bad, cache=tmp_path,
                                 check=None), "positive number")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_one_line_on_a_terminal_and_nothing_elsewhere():
    tty, pipe = _Terminal(), io.StringIO()
    for stream in (tty, pipe):
        p = commands.Progress(stream, 30)
        p.note("[0/2] building 2 modules x arch (gfx90a)")  # at once, before the first module is done
        p.advance(10, "[1/2] unary gfx90a")
        p.advance(20, "[2/2] binary gfx90a")
        p.close()
    assert pipe.getvalue() == ""
    text = tty.getvalue()
    assert text.count("\r") == 3 and text.endswith("\n") and "30/30 kernels  [2/2] binary gfx90a" in text
    assert text.startswith("\rpykern build: 0/30 kernels  [0/2] building 2 modules x arch (gfx90a)")
