"""Every stdlib kernel builds for the GPU targets, through the real ``pykern build`` CLI, and what it
builds is accepted by the tools that will load it — without a GPU (issues 3 and 4).

One session-scoped fixture runs ``pykern build -j 2`` into a temporary directory; the tests read
what it wrote:

* every kernel of every non-empty stdlib module is in the manifest and the artifact;
* AMDGPU code objects, through pykern's reader: ELF64, ``EM_AMDGPU``, ``ET_DYN``, the arch in
  ``e_flags``, a ``.kd`` descriptor per kernel, ``.args`` equal to the Python signature (order, size);
* the elementwise families (affine, binary, cast, fill, ternary, unary) use no scratch memory and
  spill no registers;
* ``llvm-readobj --notes`` and ``llvm-objdump -d`` (LLVM 19 preferred, as CI installs) accept a
  sample of code objects per arch;
* NVIDIA's ``ptxas`` assembles every PTX module;
* ``../shared/tools/abi_check.py`` finds every kernel of the built families matching candle's ABI
  in the gfx90a, gfx1100 and sm_90 builds.

Cost: the stdlib is ~1,100 kernels over 14 AMDGPU archs (LLVM's generic targets included) and 2 PTX
archs, far more than a CI run can build on 2 cores. So every kernel is built for the archs that
carry candle's ABI check — gfx90a (CDNA, wave64), gfx1100 (RDNA, wave32) and sm_90 — and, for each
other arch, the two smallest modules plus one larger module that rotates by day
(``PYKERN_TEST_BUILD_ROTATION=N`` pins it), so every (arch, module) pair is built over a cycle of
days. ``PYKERN_TEST_BUILD_ALL=1`` builds every kernel for every arch. The build reuses the disk
cache: the session's cache, or ``$PYKERN_CACHE_DIR`` when it is set outside the test run.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import stdlib_kernels
from pykern.targets import registry
from pykern.targets.amdgpu_archs import ARCHS
from pykern.targets.codeobject import CodeObject
from pykern.targets.nvptx import ptxas_check, ptxas_path

REPO = Path(__file__).resolve().parents[2]
ABI_CHECK = REPO.parent / "shared" / "tools" / "abi_check.py"

AMD_ARCHS = list(ARCHS)
PTX_ARCHS = ["sm_80", "sm_90"]
#: built in full on every run: one wave64 arch, one wave32 arch, and the default PTX arch
FULL = {("amdgpu", "gfx90a"), ("amdgpu", "gfx1100"), ("cuda", "sm_90")}
ABI_ARCHS = [("amdgpu", "gfx90a"), ("amdgpu", "gfx1100"), ("cuda", "sm_90")]
ELEMENTWISE = {"affine", "binary", "cast", "fill", "ternary", "unary"}
MODULES = [m for m in stdlib_kernels.MODULES if len(m)]

pytestmark = pytest.mark.skipif(not MODULES, reason="no stdlib module has kernels yet")


def _rotation() -> int:
    pinned = os.environ.get("PYKERN_TEST_BUILD_ROTATION")
    return int(pinned) if pinned else int(time.time() // 86400)


def _quick() -> bool:
    return os.environ.get("PYKERN_TEST_BUILD_ALL", "").lower() in ("", "0", "false", "no")


def _describe_plan() -> str:
    return f"every module for {len(FULL)} archs, a rotating subset for the others (rotation {_rotation()})" \
        if _quick() else "every module for every arch"


def build_plan() -> dict[tuple[str, str], list[str]]:
    """(target, arch) -> the module names this run builds for it (stdlib order)."""
    by_size = sorted(MODULES, key=len)
    small, rest = by_size[:2], by_size[2:]
    plan = {}
    keys = [(t, a) for t, archs in (("amdgpu", AMD_ARCHS), ("cuda", PTX_ARCHS)) for a in archs]
    others = [k for k in keys if k not in FULL]
    for key in keys:
        if not _quick() or key in FULL:
            chosen = MODULES
        else:
            i = others.index(key)
            chosen = small + ([rest[(_rotation() + i) % len(rest)]] if rest else [])
        plan[key] = [m.name for m in MODULES if m in chosen]
    return plan


PLAN = build_plan()
AMD_PLANNED = [a for (t, a) in PLAN if t == "amdgpu"]
PTX_PLANNED = [a for (t, a) in PLAN if t == "cuda"]


def _have_lld() -> bool:
    from pykern.targets.linker import find_lld
    try:
        find_lld()
    except Exception:
        return False
    return True


class _Builds(dict):
    """(target, arch) -> (directory, manifest); a target that could not be built skips its tests."""

    def __missing__(self, key):
        pytest.skip(f"{key[0]} {key[1]} not built: no ld.lld here (pip install ziglang)")


@pytest.fixture(scope="session")
def stdlib_build(tmp_path_factory, request, run_cache_dir):
    """Run ``pykern build -j 2`` for the plan (one call per target and distinct module list, each
    into its own directory) and return ``{(target, arch): (directory, manifest)}``. The build uses
    the test run's cache (``run_cache_dir``, all xdist workers'), where the AMD emulator layer, which
    starts first, has built every stdlib module for gfx1100 and gfx90a already: those two full
    builds then read the cache (same modules, same compile keys) instead of compiling again."""
    root = tmp_path_factory.mktemp("stdlib-build")
    cache_dir = os.environ.get("PYKERN_CACHE_DIR") or str(run_cache_dir)
    env = {**os.environ, "PYKERN_CACHE_DIR": cache_dir}
    env.pop("PYKERN_PREBUILT", None)
    env.pop("PYKERN_CACHE", None)
    groups: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for (target, arch), mods in PLAN.items():
        groups.setdefault((target, tuple(mods)), []).append(arch)
    figures, builds = [], _Builds()
    for i, ((target, mods), archs) in enumerate(groups.items()):
        if target == "amdgpu" and not _have_lld():
            continue  # their tests skip (see _Builds); CI installs ziglang, the GPU machine may not
        out = root / f"{target}-{i}"
        cmd = [sys.executable, "-m", "pykern.cli.main", "build", *mods, "--target", target,
               "--arch", ",".join(archs), "--out", str(out), "-j", "2"]
        start = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO, timeout=3600)
        seconds = time.perf_counter() - start
        assert r.returncode == 0, f"{' '.join(cmd[2:])} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
        manifest = json.loads((out / "manifest.json").read_text())
        for arch in archs:
            builds[target, arch] = (out, manifest)
        figures.append({"target": target, "archs": archs, "modules": list(mods), "seconds": round(seconds, 1)})
    (root / "build-times.json").write_text(json.dumps(figures, indent=1))
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None:
        total = sum(f["seconds"] for f in figures)
        with capture.global_and_fixture_disabled():  # the figures belong in the CI log
            reporter.write_line("")
            reporter.write_line(f"stdlib builds ({_describe_plan()}): {total:.1f}s in all; cache {cache_dir}")
            for f in figures:
                reporter.write_line(f"  {f['target']} {','.join(f['archs'])}: {len(f['modules'])} modules, "
                                    f"{f['seconds']}s")
    return builds


def _entry(builds: dict, target: str, arch: str, module: str) -> dict:
    manifest = builds[target, arch][1]
    found = [e for e in manifest["modules"] if (e["target"], e["arch"], e["module"]) == (target, arch, module)]
    assert len(found) == 1, f"manifest has {len(found)} entries for {module} {target} {arch}"
    return found[0]


def _path(builds: dict, target: str, arch: str, module: str) -> Path:
    return builds[target, arch][0] / _entry(builds, target, arch, module)["file"]


def _artifact(builds: dict, target: str, arch: str, module: str) -> bytes:
    data = _path(builds, target, arch, module).read_bytes()
    e = _entry(builds, target, arch, module)
    assert hashlib.sha256(data).hexdigest() == e["sha256"], f"{e['file']} does not match the manifest"
    return data


def _python_layout(inst, target) -> list[tuple[str, int, int]]:
    """(name, offset, size) of a kernel's parameters from its typed Python signature, natural alignment."""
    layout, off = [], 0
    for name, ty in inst.typed(target).params:
        off = -(-off // ty.align) * ty.align
        layout.append((name, off, ty.nbytes))
        off += ty.nbytes
    return layout


# ---- every kernel builds ------------------------------------------------------------------------------
@pytest.mark.parametrize("target,arch", list(PLAN), ids=[f"{t}-{a}" for t, a in PLAN])
def test_every_kernel_builds(stdlib_build, target, arch):
    builds = stdlib_build
    tgt = registry.make_target(target, arch)
    for name in PLAN[target, arch]:
        module = stdlib_kernels.module(name) if hasattr(stdlib_kernels, "module") else \
            next(m for m in MODULES if m.name == name)
        e = _entry(builds, target, arch, name)
        assert e["target_key"] == tgt.cache_key()
        assert [k["name"] for k in e["kernels"]] == module.names(), f"{name} {arch}: kernel list differs"
        data = _artifact(builds, target, arch, name)
        if target == "cuda":
            text = data.decode()
            assert f".target {arch}" in text
            for k in module.names():
                assert f".entry {k}(" in text, f"{k} missing from {name} {arch} PTX"


def test_the_plan_covers_every_kernel_on_wave32_wave64_and_ptx():
    names = [m.name for m in MODULES]
    assert PLAN["amdgpu", "gfx90a"] == names and ARCHS["gfx90a"].wave_size == 64
    assert PLAN["amdgpu", "gfx1100"] == names and ARCHS["gfx1100"].wave_size == 32
    assert PLAN["cuda", "sm_90"] == names
    assert set(AMD_PLANNED) == set(AMD_ARCHS) and set(PTX_PLANNED) == set(PTX_ARCHS)


# ---- AMDGPU code objects --------------------------------------------------------------------------------
@pytest.mark.parametrize("arch", AMD_PLANNED)
def test_code_objects_read_back(stdlib_build, arch):
    builds = stdlib_build
    tgt = registry.make_target("amdgpu", arch)
    for name in PLAN["amdgpu", arch]:
        module = next(m for m in MODULES if m.name == name)
        data = _artifact(builds, "amdgpu", arch, name)
        co = CodeObject(data)
        assert data[4] == 2, "not ELFCLASS64"
        assert (co.machine, co.elf_type) == (224, 3), f"{name} {arch}: not an EM_AMDGPU ET_DYN object"
        assert co.e_flags & 0xFF == ARCHS[arch].mach and co.arch == arch
        assert co.code_object_version == (6 if ARCHS[arch].is_generic else 5)  # generic targets: v6
        entry = {k["name"]: k for k in _entry(builds, "amdgpu", arch, name)["kernels"]}
        assert sorted(co.kernels) == sorted(module.names())
        for inst in module:
            k = co.kernels[inst.name]
            assert co.symbols[inst.name + ".kd"].size == 64, f"{inst.name}: no 64-byte kernel descriptor"
            want = _python_layout(inst, tgt)
            got = [(a.name, a.offset, a.size) for a in k.explicit_args]
            assert got == want, f"{name}.{inst.name} on {arch}: .args {got} != Python signature {want}"
            assert [(a["name"], a["offset"], a["size"]) for a in entry[inst.name]["args"]] == want
            assert k.wavefront_size == tgt.wave_size


@pytest.mark.parametrize("arch", AMD_PLANNED)
def test_elementwise_kernels_use_no_scratch_and_spill_nothing(stdlib_build, arch):
    builds = stdlib_build
    bad = []
    names = [n for n in PLAN["amdgpu", arch] if n in ELEMENTWISE]
    if not names:
        pytest.skip(f"no elementwise family is built for {arch} this run")
    for name in names:
        for k in CodeObject(_artifact(builds, "amdgpu", arch, name)).kernels.values():
            if (k.scratch, k.vgpr_spill_count, k.sgpr_spill_count) != (0, 0, 0) or k.uses_dynamic_stack:
                bad.append(f"{name}.{k.name}: scratch {k.scratch}, VGPR spills {k.vgpr_spill_count}, "
                           f"SGPR spills {k.sgpr_spill_count}, dynamic stack {k.uses_dynamic_stack}")
    assert not bad, f"{arch}: {len(bad)} elementwise kernels use scratch or spill:\n" + "\n".join(bad)


def _llvm_tool(name: str) -> tuple[str, int] | None:
    """The LLVM tool to use: ``/usr/bin/<name>-19`` (what CI installs), else the newest one found."""
    found = []
    candidates = [f"/usr/bin/{name}-19"] + sorted(Path("/usr/lib").glob(f"llvm-*/bin/{name}")) + \
        [shutil.which(name) or ""]
    for path in map(str, candidates):
        if path and os.path.exists(path):
            ver = re.search(r"LLVM version (\d+)",
                            subprocess.run([path, "--version"], capture_output=True, text=True).stdout)
            if ver:
                found.append((int(ver.group(1)), path))
                if path.endswith("-19"):
                    break
    if not found:
        return None
    pref = [f for f in found if f[1].endswith("-19")]
    major, path = pref[0] if pref else max(found)
    return path, major


def _sample(builds: dict, arch: str) -> list[str]:
    """The two smallest code objects of the arch (by bytes): every kernel in them is disassembled."""
    entries = sorted((e for e in builds["amdgpu", arch][1]["modules"] if (e["target"], e["arch"]) == ("amdgpu", arch)),
                     key=lambda e: e["bytes"])
    return [e["module"] for e in entries[:2]]


@pytest.mark.parametrize("tool", ["llvm-readobj", "llvm-objdump"])
@pytest.mark.parametrize("arch", AMD_PLANNED)
def test_llvm_tools_accept_a_sample(stdlib_build, arch, tool):
    builds = stdlib_build
    found = _llvm_tool(tool)
    if found is None:
        pytest.skip(f"{tool} is not installed (CI: apt-get install llvm-19)")
    path, major = found
    if major < ARCHS[arch].llvm_tools_since:
        pytest.skip(f"{path} is LLVM {major}, which does not know {arch} (needs LLVM >= {ARCHS[arch].llvm_tools_since})")
    for name in _sample(builds, arch):
        file = _path(builds, "amdgpu", arch, name)
        kernels = [k["name"] for k in _entry(builds, "amdgpu", arch, name)["kernels"]]
        if tool == "llvm-readobj":
            r = subprocess.run([path, "--notes", str(file)], capture_output=True, text=True)
            assert r.returncode == 0 and not r.stderr.strip(), f"{path} --notes {file}:\n{r.stderr}"
            assert "NT_AMDGPU_METADATA" in r.stdout and f"amdgcn-amd-amdhsa--{arch}" in r.stdout
            symbols = set(re.findall(r"\.symbol:\s+(\S+)\.kd", r.stdout))
            assert symbols == set(kernels), f"{file}: note lists {sorted(symbols ^ set(kernels))} differently"
        else:
            r = subprocess.run([path, "-d", f"--mcpu={arch}", str(file)], capture_output=True, text=True)
            assert r.returncode == 0 and "error" not in r.stderr.lower(), f"{path} -d {file}:\n{r.stderr}"
            assert "<unknown>" not in r.stdout, f"{file}: instructions {path} cannot decode"
            shown = {k for k in kernels if f"<{k}>:" in r.stdout}
            # candle's second names share their primary's code (pykern/targets/aliases.py): objdump
            # labels shared bytes with one name, so an alias must be a function symbol at the address
            # (and size) of a kernel it did disassemble
            t = subprocess.run([path, "-t", str(file)], capture_output=True, text=True)
            where = {name: addr for name, addr in
                     ((ln.split()[-1], (ln.split()[0], ln.split()[4])) for ln in t.stdout.splitlines()
                      if " F .text" in ln)}
            code_of_shown = {where.get(k) for k in shown}
            missing = [k for k in kernels if k not in shown and (where.get(k) is None or where[k] not in code_of_shown)]
            assert not missing, f"{file}: no disassembly for {missing}"


# ---- PTX ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("arch", PTX_PLANNED)
def test_ptxas_accepts_every_module(stdlib_build, arch):
    if ptxas_path() is None:
        pytest.skip("ptxas is not on PATH (CI has it at /usr/local/bin/ptxas from the CUDA toolkit)")
    builds = stdlib_build

    def check(name: str) -> str | None:
        try:
            ptxas_check(_artifact(builds, "cuda", arch, name), arch)
        except Exception as exc:  # noqa: BLE001 — gathered, reported together
            return f"{name}: {exc}"
        return None

    with ThreadPoolExecutor(2) as pool:  # ptxas runs in its own process: two at once on 2 cores
        failures = [f for f in pool.map(check, PLAN["cuda", arch]) if f]
    assert not failures, "\n".join(failures)


# ---- candle's ABI -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("target,arch", ABI_ARCHS, ids=[a for _, a in ABI_ARCHS])
def test_abi_check_matches_candle(stdlib_build, target, arch):
    if not ABI_CHECK.is_file():
        pytest.skip(f"{ABI_CHECK} is absent (it lives in the shared checkout next to the repository)")
    builds = stdlib_build
    spec = json.loads((ABI_CHECK.parent.parent / "spec" / "candle_abi.json").read_text())["modules"]
    r = subprocess.run([sys.executable, str(ABI_CHECK), str(builds[target, arch][0] / arch), "--verbose"],
                       capture_output=True, text=True)
    assert r.returncode == 0, f"abi_check.py {arch}:\n{r.stdout}\n{r.stderr}"
    ext = ".hsaco" if target == "amdgpu" else ".ptx"
    expected = [n for n in PLAN[target, arch] if n in spec]
    for name in expected:  # every built family was checked, in full
        want = len(spec[name])
        assert re.search(rf"{re.escape(name)}{re.escape(ext)}: {want}/{want} match", r.stdout), \
            f"{name} {arch}: not reported as {want}/{want} matching:\n{r.stdout}"
    total = sum(len(spec[n]) for n in expected)
    assert f"ABI: {total}/{total} kernels match" in r.stdout, r.stdout
