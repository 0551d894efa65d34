"""The ``pykern`` command line, run for real in a subprocess (``python -m pykern.cli.main``).

A session-wide cache directory keeps the repeated compiles cheap; the module built and inspected is
the smallest non-empty stdlib module (the families are written concurrently).
"""
from __future__ import annotations

import hashlib
import importlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import stdlib_kernels

ABI_CHECK = Path(__file__).resolve().parents[3] / "shared" / "tools" / "abi_check.py"


def _missing(*modules: str) -> str | None:
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 — being written concurrently
            return f"{name} is not importable: {type(exc).__name__}: {exc}"
    return None


AMDGPU = ("pykern.targets.amdgpu", "pykern.targets.amdgpu_archs", "pykern.targets.codeobject",
          "pykern.targets.linker")
needs_amdgpu = pytest.mark.skipif(bool(_missing(*AMDGPU)), reason=str(_missing(*AMDGPU)))
needs_cuda = pytest.mark.skipif(bool(_missing("pykern.targets.nvptx")), reason=str(_missing("pykern.targets.nvptx")))

NONEMPTY = sorted((m for m in stdlib_kernels.MODULES if len(m)), key=len)
EMPTY = [m.name for m in stdlib_kernels.MODULES if not len(m)]
SMALL = NONEMPTY[0] if NONEMPTY else None
needs_module = pytest.mark.skipif(SMALL is None, reason="no stdlib module has kernels yet")

USER_KERNEL = '''
import pykern as pk
from pykern import f32, usize, Ptr

@pk.kernel
def scale(n: usize, a: f32, x: Ptr[f32]):
    for i in pk.grid_stride(n):
        x[i] = a * x[i]

@pk.kernel
def generic(n: usize, x: Ptr[f32], *, T):
    pass

@pk.kernel
def broken(n: usize, x: Ptr[f32]):
    x[0] = undefined_name
'''


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cli-cache")


def pykern(*args: str, cache: Path, env: dict | None = None, check: int | None = 0,
           timeout: float = 600) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "PYKERN_CACHE_DIR": str(cache), **(env or {})}
    full_env.pop("PYKERN_PREBUILT", None) if "PYKERN_PREBUILT" not in (env or {}) else None
    r = subprocess.run([sys.executable, "-m", "pykern.cli.main", *args], capture_output=True, text=True,
                       env=full_env, timeout=timeout, cwd=Path(__file__).resolve().parents[2])
    if check is not None:
        assert r.returncode == check, f"exit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    return r


def assert_user_error(r: subprocess.CompletedProcess, *needles: str) -> None:
    """Exit status 2, exactly one line on stderr naming the choices, no traceback."""
    assert r.returncode == 2, r
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "Traceback" not in r.stderr
    for n in needles:
        assert n in lines[0], lines[0]


@pytest.fixture(scope="session")
def user_file(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("user") / "mykernels.py"
    p.write_text(textwrap.dedent(USER_KERNEL))
    return p


# ---- list ------------------------------------------------------------------------------------------
def test_list_modules(cache_dir):
    r = pykern("list", cache=cache_dir)
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 1 + len(stdlib_kernels.MODULES)
    for m, line in zip(stdlib_kernels.MODULES, lines[1:]):
        idx, name, count = line.split()[:3]
        assert (int(idx), name, int(count)) == (m.index, m.name, len(m))


@needs_module
def test_list_one_module_shows_signatures(cache_dir):
    r = pykern("list", SMALL.name, cache=cache_dir)
    assert f"{len(SMALL)} kernels" in r.stdout
    for name in SMALL.names():
        assert f"  {name}(" in r.stdout
    r = pykern("list", str(SMALL.index), cache=cache_dir)
    assert SMALL.names()[0] in r.stdout


def test_list_unknown_module(cache_dir):
    assert_user_error(pykern("list", "nope", cache=cache_dir, check=None), "nope", "unary", "affine")


# ---- show ------------------------------------------------------------------------------------------
@needs_module
@needs_amdgpu
@pytest.mark.parametrize("stage,needle", [("ir", "amdgpu_kernel"), ("opt", "amdgpu_kernel"),
                                          ("asm", "s_endpgm"), ("meta", "wave64")])
def test_show_stdlib_amdgpu(cache_dir, stage, needle):
    kernel = SMALL.names()[0]
    r = pykern("show", SMALL.name, kernel, "--stage", stage, cache=cache_dir)
    assert needle in r.stdout and kernel in r.stdout


@needs_module
@needs_amdgpu
def test_show_rdna_wave32_meta(cache_dir):
    r = pykern("show", SMALL.name, SMALL.names()[0], "--arch", "gfx1100", "--stage", "meta", cache=cache_dir)
    assert "gfx1100" in r.stdout and "wave32" in r.stdout


@needs_module
@needs_cuda
def test_show_stdlib_cuda(cache_dir):
    kernel = SMALL.names()[0]
    r = pykern("show", SMALL.name, kernel, "--target", "cuda", cache=cache_dir)
    assert f".entry {kernel}(" in r.stdout and ".target sm_90" in r.stdout
    r = pykern("show", SMALL.name, kernel, "--target", "cuda", "--arch", "sm_80", "--stage", "ir", cache=cache_dir)
    assert "ptx_kernel" in r.stdout


@needs_module
def test_show_stdlib_cpu(cache_dir):
    r = pykern("show", SMALL.name, SMALL.names()[0], "--target", "cpu", "--stage", "opt", cache=cache_dir)
    assert "define" in r.stdout


@needs_amdgpu
@needs_cuda
@pytest.mark.parametrize("target,stage,needle", [("amdgpu", "asm", "s_endpgm"), ("amdgpu", "meta", "scale"),
                                                 ("cuda", "asm", ".entry scale("), ("cpu", "ir", "scale"),
                                                 ("cpu", "asm", "scale")])
def test_show_user_kernel(cache_dir, user_file, target, stage, needle):
    r = pykern("show", f"{user_file}:scale", "--target", target, "--stage", stage, cache=cache_dir)
    assert needle in r.stdout
    r2 = pykern("show", str(user_file), "scale", "--target", target, "--stage", stage, cache=cache_dir)
    assert r2.stdout == r.stdout


def test_show_user_kernel_errors(cache_dir, user_file, tmp_path):
    assert_user_error(pykern("show", f"{user_file}:nothere", cache=cache_dir, check=None), "scale", "generic")
    assert_user_error(pykern("show", f"{user_file}:generic", cache=cache_dir, check=None), "generic over")
    assert_user_error(pykern("show", f"{tmp_path / 'missing.py'}:k", cache=cache_dir, check=None), "no such file")
    # a compile error in the user's kernel points at its line, without a traceback; --debug adds one
    r = pykern("show", f"{user_file}:broken", "--stage", "ir", cache=cache_dir, check=1)
    assert "mykernels.py:" in r.stderr and "undefined_name" in r.stderr and "Traceback" not in r.stderr
    r = pykern("--debug", "show", f"{user_file}:broken", "--stage", "ir", cache=cache_dir, check=None)
    assert r.returncode != 0 and "Traceback" in r.stderr


@needs_module
def test_show_user_errors(cache_dir):
    k = SMALL.names()[0]
    assert_user_error(pykern("show", "nope", k, cache=cache_dir, check=None), "unknown module", "unary")
    assert_user_error(pykern("show", SMALL.name, k + "_zz", cache=cache_dir, check=None), "no kernel", k)
    assert_user_error(pykern("show", SMALL.name, k, "--target", "metal", cache=cache_dir, check=None),
                      "amdgpu, cuda, cpu")
    assert_user_error(pykern("show", SMALL.name, k, "--arch", "gfx9", cache=cache_dir, check=None),
                      "gfx90a", "gfx1100")
    assert_user_error(pykern("show", SMALL.name, k, "--target", "cuda", "--arch", "gfx90a", cache=cache_dir,
                             check=None), "sm_90")
    assert_user_error(pykern("show", SMALL.name, k, "--stage", "bin", cache=cache_dir, check=None), "ir, opt, asm")
    assert_user_error(pykern("show", SMALL.name, k, "--target", "cuda", "--stage", "meta", cache=cache_dir,
                             check=None), "amdgpu")
    assert_user_error(pykern("show", SMALL.name, cache=cache_dir, check=None), k)
    r = pykern("--debug", "show", "nope", k, cache=cache_dir, check=None)
    assert "Traceback" in r.stderr


# ---- resources -------------------------------------------------------------------------------------
@needs_module
@needs_amdgpu
def test_resources_table_and_json(cache_dir):
    r = pykern("resources", SMALL.name, cache=cache_dir)
    header, *rows = r.stdout.strip().splitlines()
    assert header.split()[:4] == ["kernel", "arch", "wave", "vgpr"] and "occupancy" in header
    assert len(rows) == len(SMALL) + 1
    r = pykern("resources", SMALL.name, "--arch", "gfx90a,gfx1100", "--json", cache=cache_dir)
    data = json.loads(r.stdout)
    assert len(data) == 2 * len(SMALL)
    by_arch = {(d["arch"], d["kernel"]): d for d in data}
    for name in SMALL.names():
        cdna, rdna = by_arch[("gfx90a", name)], by_arch[("gfx1100", name)]
        assert (cdna["wave"], rdna["wave"]) == (64, 32)
        assert cdna["vgpr"] > 0 and cdna["sgpr"] > 0 and 1 <= cdna["occupancy"] <= 8
        assert {"agpr", "vspill", "sspill", "lds", "scratch"} <= cdna.keys()


def test_resources_errors(cache_dir):
    assert_user_error(pykern("resources", "nope", cache=cache_dir, check=None), "unary")
    name = SMALL.name if SMALL else "unary"
    assert_user_error(pykern("resources", name, "--arch", "sm_90", cache=cache_dir, check=None), "gfx90a")


# ---- build -----------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def built(cache_dir, tmp_path_factory):
    """One amdgpu build of the smallest module (and an empty one, if any) for two archs."""
    if SMALL is None or _missing(*AMDGPU):
        pytest.skip(_missing(*AMDGPU) or "no stdlib module has kernels yet")
    out = tmp_path_factory.mktemp("build")
    mods = [SMALL.name] + EMPTY[:1]
    r = pykern("build", *mods, "--target", "amdgpu", "--arch", "gfx90a,gfx1100", "--out", str(out),
               "--emit-rust", "-j", "2", cache=cache_dir)
    return out, r


def test_build_writes_code_objects_and_manifest(built):
    from pykern import prebuilt
    from pykern.targets.codeobject import CodeObject
    out, r = built
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["versions"] == prebuilt.versions()
    entries = {(e["arch"], e["module"]): e for e in manifest["modules"]}
    assert set(entries) == {("gfx90a", SMALL.name), ("gfx1100", SMALL.name)}
    for (arch, name), e in entries.items():
        path = out / arch / f"{name}.hsaco"
        assert e["file"] == f"{arch}/{name}.hsaco" and e["index"] == SMALL.index
        data = path.read_bytes()
        assert hashlib.sha256(data).hexdigest() == e["sha256"] and len(data) == e["bytes"]
        co = CodeObject(data)
        assert co.arch == arch
        assert sorted(k["name"] for k in e["kernels"]) == sorted(SMALL.names())
        for k in e["kernels"]:
            got = [(a.name, a.offset, a.size) for a in co.kernels[k["name"]].explicit_args]
            assert got == [(a["name"], a["offset"], a["size"]) for a in k["args"]]
    assert "kernels  [" not in r.stderr  # progress is for terminals only (tests/cli/test_cli_users.py)
    if EMPTY:
        assert f"skipping {EMPTY[0]}: no kernels yet" in r.stderr


def test_build_emits_a_rust_crate(built):
    out, _ = built
    assert (out / "Cargo.toml").is_file() and (out / "tests" / "code_objects.rs").is_file()
    rs = (out / "src" / "lib.rs").read_text()
    ident = SMALL.name.upper()
    assert f"pub const {ident}: Module = Module {{" in rs
    assert f'("gfx90a", include_bytes!("../gfx90a/{SMALL.name}.hsaco")),' in rs
    assert f'("gfx1100", include_bytes!("../gfx1100/{SMALL.name}.hsaco")),' in rs
    for m in stdlib_kernels.MODULES:  # every candle module constant exists, built or not
        assert f"pub const {m.name.upper()}: Module" in rs
    assert "pub const ALL_IDS: [Id; 11]" in rs and "pub fn code_for(&self, arch: &str)" in rs


@pytest.mark.skipif(shutil.which("cargo") is None, reason="cargo is not installed (.ci/run installs it)")
def test_the_rust_crate_builds_and_its_tests_pass_offline(built, tmp_path):
    """What a candle backend gets: the crate compiles with no dependencies, its code objects are
    valid for each arch with the module's kernels, and those cover candle's ABI for the module."""
    out, _ = built
    abi = ABI_CHECK.parent.parent / "spec" / "candle_abi.json"
    env = {**os.environ, "CARGO_TARGET_DIR": str(tmp_path / "target"), "CARGO_NET_OFFLINE": "true"}
    if abi.is_file():
        env["CANDLE_ABI_JSON"] = str(abi)
    extra = ["--include-ignored"] if abi.is_file() else []  # the ABI test needs candle_abi.json
    r = subprocess.run(["cargo", "test", "--offline", "--quiet", "--", *extra], cwd=out, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "3 passed" in r.stdout if abi.is_file() else "2 passed" in r.stdout


def test_build_again_is_up_to_date_and_force_uses_cache(built, cache_dir):
    out, _ = built
    r = pykern("build", SMALL.name, "--arch", "gfx90a", "--arch", "gfx1100", "--out", str(out),
               cache=cache_dir)
    assert "2 up to date" in r.stdout and "0 compiled" in r.stdout
    r = pykern("-v", "build", SMALL.name, "--arch", "gfx90a", "--out", str(out), "--force", "-j", "1",
               cache=cache_dir)
    assert "1 from cache" in r.stdout and "cache hit" in r.stderr
    # the manifest kept the gfx1100 entry
    manifest = json.loads((out / "manifest.json").read_text())
    assert {e["arch"] for e in manifest["modules"]} == {"gfx90a", "gfx1100"}


def test_build_rebuilds_a_tampered_file(built, cache_dir):
    out, _ = built
    path = out / "gfx1100" / f"{SMALL.name}.hsaco"
    good = path.read_bytes()
    path.write_bytes(good[:-1] + bytes([good[-1] ^ 1]))
    r = pykern("build", SMALL.name, "--arch", "gfx1100", "--out", str(out), cache=cache_dir)
    assert "0 up to date" in r.stdout
    assert path.read_bytes() == good


@needs_cuda
@needs_module
def test_build_cuda_ptx_and_abi_check(cache_dir, tmp_path):
    r = pykern("build", SMALL.name, "--target", "cuda", "--arch", "sm_90", "--out", str(tmp_path),
               "--emit-rust", cache=cache_dir)
    ptx = (tmp_path / "sm_90" / f"{SMALL.name}.ptx").read_text()
    for k in SMALL.names():
        assert f".entry {k}(" in ptx
    assert f'("sm_90", include_bytes!("../sm_90/{SMALL.name}.ptx")),' in (tmp_path / "src" / "lib.rs").read_text()
    assert "1 compiled" in r.stdout or "1 from cache" in r.stdout
    if ABI_CHECK.is_file():
        a = subprocess.run([sys.executable, str(ABI_CHECK), str(tmp_path)], capture_output=True, text=True)
        assert f"{SMALL.name}.ptx:" in a.stdout and "unreadable" not in a.stdout, a.stdout


def test_build_abi_check_accepts_amdgpu_output(built):
    if not ABI_CHECK.is_file():
        pytest.skip("shared/tools/abi_check.py is not present")
    out, _ = built
    a = subprocess.run([sys.executable, str(ABI_CHECK), str(out)], capture_output=True, text=True)
    assert f"gfx90a/{SMALL.name}.hsaco:" in a.stdout and "unreadable" not in a.stdout, a.stdout
    assert a.stdout.strip().splitlines()[-1].startswith("ABI: ")


def test_build_errors(cache_dir, tmp_path):
    assert_user_error(pykern("build", "--target", "cpu", "--out", str(tmp_path), cache=cache_dir, check=None),
                      "not applicable", "amdgpu, cuda")
    assert_user_error(pykern("build", "nope", "--out", str(tmp_path), cache=cache_dir, check=None), "unary")
    assert_user_error(pykern("build", "--arch", "gfx90a,gfx9", "--out", str(tmp_path), cache=cache_dir,
                             check=None), "gfx1100")
    assert_user_error(pykern("build", "--target", "rocm", "--out", str(tmp_path), cache=cache_dir, check=None),
                      "amdgpu, cuda, cpu")
    assert_user_error(pykern("build", cache=cache_dir, check=None), "--out")


@pytest.mark.skipif(not EMPTY, reason="every stdlib module has kernels now")
def test_build_only_empty_modules(cache_dir, tmp_path):
    r = pykern("build", EMPTY[0], "--out", str(tmp_path), "--emit-rust", cache=cache_dir)
    assert "no kernels yet" in r.stderr and "built 0 modules" in r.stdout
    assert json.loads((tmp_path / "manifest.json").read_text())["modules"] == []


# ---- prebuilt lookup (what `pykern build` writes is what the runtime may load) ---------------------
def _find(out: Path, cache: Path, arch: str = "gfx90a", module: str | None = None) -> str:
    code = ("import json, stdlib_kernels as s; from pykern import prebuilt; "
            "from pykern.targets.registry import make_target; "
            f"r = prebuilt.find_prebuilt(s.module({module or SMALL.name!r}), make_target('amdgpu', {arch!r})); "
            "print('none' if r is None else json.dumps([len(r[0]), [x.name for x in r[1]]]))")
    env = {**os.environ, "PYKERN_PREBUILT": str(out), "PYKERN_CACHE_DIR": str(cache)}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          check=True).stdout.strip()


def test_prebuilt_found_and_checked(built, cache_dir, tmp_path):
    out, _ = built
    copy = tmp_path / "pre"
    shutil.copytree(out, copy)
    n, names = json.loads(_find(copy, cache_dir))
    assert n == (copy / "gfx90a" / f"{SMALL.name}.hsaco").stat().st_size and sorted(names) == sorted(SMALL.names())
    assert _find(copy, cache_dir, arch="gfx942") == "none"  # not built for that arch
    manifest = json.loads((copy / "manifest.json").read_text())
    # another LLVM: not loaded
    stale = json.loads(json.dumps(manifest))
    stale["versions"]["llvm"] = "1.0.0"
    (copy / "manifest.json").write_text(json.dumps(stale))
    assert _find(copy, cache_dir) == "none"
    # kernels edited since the build: not loaded
    stale = json.loads(json.dumps(manifest))
    for e in stale["modules"]:
        e["fingerprint"] = "0" * 64
    (copy / "manifest.json").write_text(json.dumps(stale))
    assert _find(copy, cache_dir) == "none"
    # a damaged code object: not loaded; a damaged manifest: not loaded, no crash
    (copy / "manifest.json").write_text(json.dumps(manifest))
    path = copy / "gfx90a" / f"{SMALL.name}.hsaco"
    data = path.read_bytes()
    path.write_bytes(data[:100] + bytes([data[100] ^ 0xFF]) + data[101:])
    assert _find(copy, cache_dir) == "none"
    path.write_bytes(data)
    assert _find(copy, cache_dir) != "none"
    (copy / "manifest.json").write_text("{not json")
    assert _find(copy, cache_dir) == "none"


# ---- info, cache, verbose --------------------------------------------------------------------------
def test_info(cache_dir):
    r = pykern("info", cache=cache_dir)
    out = r.stdout
    assert "LLVM 22" in out and "llvmlite" in out
    assert "amdgpu" in out and "gfx90a" in out and "sm_90" in out and "cpu" in out
    assert "ld.lld:" in out and "HIP GPUs:" in out and "CUDA GPUs:" in out
    assert f"cache: {cache_dir}" in out


def test_info_survives_a_broken_gpu_stack(cache_dir):
    r = pykern("info", cache=cache_dir, env={"LD_LIBRARY_PATH": "/nonexistent", "ROCM_PATH": "/nonexistent",
                                             "CUDA_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": ""})
    assert "HIP GPUs:" in r.stdout and "CUDA GPUs:" in r.stdout


def test_cache_commands(tmp_path):
    cache = tmp_path / "c"
    r = pykern("cache", "stats", cache=cache)
    assert "entries: 0" in r.stdout and str(cache) in r.stdout
    user = tmp_path / "k.py"
    user.write_text(textwrap.dedent(USER_KERNEL))
    if not _missing(*AMDGPU):
        r = pykern("-v", "show", f"{user}:scale", "--stage", "meta", cache=cache)
        assert "pykern.compiler: compiled" in r.stderr
        r = pykern("-v", "show", f"{user}:scale", "--stage", "meta", cache=cache)
        assert "pykern.compiler: cache hit" in r.stderr
        r = pykern("cache", "ls", cache=cache)  # two keys per compile: the source-level one and the IR one
        rows = r.stdout.strip().splitlines()
        assert rows[0].startswith("kernels") and rows[-1].startswith("2 entries") and len(rows) == 4
        assert all(row.startswith("scale") and "amdgpu gfx90a" in row for row in rows[1:3])
        r = pykern("cache", "stats", cache=cache)
        assert "entries: 2" in r.stdout
    r = pykern("cache", "clear", cache=cache)
    assert "removed" in r.stdout
    assert "entries: 0" in pykern("cache", "stats", cache=cache).stdout
    assert pykern("cache", "ls", cache=cache).stdout.splitlines()[1].startswith("0 entries")
    r = pykern("cache", "shrink", cache=cache, check=2)
    assert "ls" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_console_script_and_help(cache_dir):
    exe = shutil.which("pykern")
    if exe is None:
        pytest.skip("the pykern console script is not installed (pip install -e .)")
    r = subprocess.run([exe, "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "build" in r.stdout and "resources" in r.stdout
    r = subprocess.run([exe], capture_output=True, text=True)
    assert r.returncode == 2


# ---- issue 25: the user's mistakes exit 2 with the reason, never "internal error" -------------------
def test_build_out_into_a_file_or_an_unwritable_dir(cache_dir, tmp_path):
    a_file = tmp_path / "afile"
    a_file.write_text("")
    assert_user_error(pykern("build", "--target", "cuda", "--out", str(a_file), "fill", cache=cache_dir, check=None),
                      "--out", "is a file; give a directory")
    assert_user_error(pykern("build", "--target", "cuda", "--out", str(a_file / "sub"), "fill", cache=cache_dir,
                             check=None), "cannot write to --out")
    if Path("/proc/1").is_dir():  # read-only even for root (chmod is not, so no tmp dir will do)
        assert_user_error(pykern("build", "--target", "cuda", "--out", "/proc/1", "fill", cache=cache_dir,
                                 check=None), "cannot write to --out /proc/1")


def test_show_a_file_with_a_syntax_error(cache_dir, tmp_path):
    bad = tmp_path / "bad_syntax.py"
    bad.write_text("import pykern as pk\n\n\n@pk.kernel\ndef k(p: pk.Ptr[pk.f32])\n    p[0] = 1.0\n")
    assert_user_error(pykern("show", f"{bad}:k", "--target", "cpu", cache=cache_dir, check=None),
                      f"{bad}:5:", "SyntaxError: expected ':'")
    imports = tmp_path / "bad_import.py"
    imports.write_text("import no_such_module_for_pykern\n")
    assert_user_error(pykern("show", f"{imports}:k", "--target", "cpu", cache=cache_dir, check=None),
                      "importing", "ModuleNotFoundError")
