"""The ``pykern`` commands, each a plain function (``pykern.cli.main`` only parses arguments).

Every command writes its report to ``out`` (stdout by default) and returns an exit status. User
mistakes raise ``UsageError`` (or ``registry.UnknownChoiceError``): one line naming the valid
choices, exit status 2, no traceback.
"""
from __future__ import annotations

import importlib.util
import io
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, TextIO

from .. import build, cache, config, prebuilt
from ..compiler import build_module, compile_kernels, lower_module
from ..ir import printer
from ..ir.types import ALL_DTYPES, DType
from ..lang.kernel import KernelDef, KernelInstance, Module
from ..rust_crate import write_crate
from ..targets.codeobject import CodeObject
from ..errors import PykernError
from ..targets import registry
from ..targets.linker import find_lld

STAGES = ("typed", "ir", "opt", "asm", "meta")


class UsageError(PykernError):
    """A mistake in what the user asked for (the CLI prints it as one line and exits 2)."""


# ---- finding modules and kernels -----------------------------------------------------------------
def _stdlib():
    import stdlib_kernels
    return stdlib_kernels


#: what separates a user file from a module defined in it in a module spec (``my.py::kernels``)
USER_SEP = "::"


def is_user_file(spec: str) -> bool:
    return isinstance(spec, str) and (spec.endswith(".py") or f".py{USER_SEP}" in spec)


def user_modules(path: str, err: TextIO | None = None) -> list:
    """The modules ``pykern build my_kernels.py`` builds from a user's file: each ``pykern.Module``
    defined there, and one module named after the file with every kernel that has no compile-time
    parameters and every instance (``saxpy_f32 = saxpy.instance(...)``) bound to a name there and
    not already in one of those modules. A generic kernel without an instance is skipped, with a note."""
    mod = load_user_file(path)
    found = [v for v in vars(mod).values() if isinstance(v, Module)]
    inside = {id(k) for m in found for k in m}
    loose, generic = [], []
    for name, v in vars(mod).items():
        if isinstance(v, KernelDef) and getattr(v.source.pyfunc, "__module__", None) == mod.__name__:
            if v.source.compile_params:
                generic.append(name)
            elif id(v._default) not in inside:
                loose.append(v.instance(v.name))
        elif isinstance(v, KernelInstance) and id(v) not in inside:
            loose.append(v.kdef.instance(v.name, **v.params))
    for name in generic:
        if not any(k.kdef is vars(mod)[name] for k in loose) and not any(k.kdef is vars(mod)[name] for m in found
                                                                          for k in m):
            (err or sys.stderr).write(f"pykern build: skipping {name}: generic over "
                                      f"{vars(mod)[name].source.compile_params}; bind an instance in the file\n")
    if loose:
        found.append(Module(Path(path).stem).add(*loose))
    if not found:
        raise UsageError(f"{path} defines no kernel to build (decorate a function with @pykern.kernel, "
                         "or bind instances of generic ones)")
    return found


def resolve_module(name: str | int):
    """A stdlib module by name or index (``unary``, ``10``), or ``path.py::module`` for a module of a
    user's file (what ``user_modules`` returns, by name: how build workers find it again)."""
    if isinstance(name, str) and USER_SEP in name:
        path, _, wanted = name.rpartition(USER_SEP)
        for m in user_modules(path, io.StringIO()):
            if m.name == wanted:
                return m
        raise UsageError(f"{path} has no module {wanted!r}")
    std = _stdlib()
    key: str | int = int(name) if isinstance(name, str) and name.isdigit() else name
    for m in std.MODULES:
        if m.name == key or m.index == key:
            return m
    raise UsageError(f"unknown module {name!r}; choose one of: {', '.join(m.name for m in std.MODULES)}")


def _kernel_choices(names: list[str], wanted: str, limit: int = 12) -> str:
    import difflib
    close = difflib.get_close_matches(wanted, names, n=5, cutoff=0.5)
    if close:
        return "did you mean: " + ", ".join(close)
    shown = ", ".join(names[:limit])
    return f"choose one of: {shown}" + (f", ... ({len(names)} in all; see `pykern list MODULE`)"
                                        if len(names) > limit else "")


def resolve_kernel(module, name: str):
    if name not in module:
        if not len(module):
            raise UsageError(f"module {module.name} has no kernels yet")
        raise UsageError(f"module {module.name} has no kernel {name!r}; {_kernel_choices(module.names(), name)}")
    return module.get(name)


def load_user_file(path: str):
    """Import a user's ``.py`` file (its directory goes on ``sys.path`` for its own imports). A file
    inside a package (``__init__.py`` beside it) is imported as that package's module, so its
    relative imports work (``pykern build stdlib_kernels/matmul.py``)."""
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"no such file: {path}")
    root, parts = p.resolve().parent, [p.stem]
    while (root / "__init__.py").is_file() and root.parent != root:
        parts.insert(0, root.name)
        root = root.parent
    sys.path.insert(0, str(root))
    name = ".".join(parts) if len(parts) > 1 else f"_pykern_user_{p.stem}"
    try:
        if len(parts) > 1:
            mod = importlib.import_module(name)
        else:
            spec = importlib.util.spec_from_file_location(name, p)
            mod = importlib.util.module_from_spec(spec)
            sys.modules[name] = mod
            spec.loader.exec_module(mod)
    except SyntaxError as exc:  # the user's file, not pykern: its location and the reason, exit 2
        sys.modules.pop(name, None)
        where = f"{path}:{exc.lineno}" + (f":{exc.offset}" if exc.offset else "")
        raise UsageError(f"{where}: {type(exc).__name__}: {exc.msg}") from None
    except (ImportError, NameError, AttributeError, TypeError, ValueError) as exc:
        sys.modules.pop(name, None)
        raise UsageError(f"importing {path} failed: {type(exc).__name__}: {exc}") from None
    found = Path(getattr(mod, "__file__", "") or "").resolve()
    if found != p.resolve():  # the package was imported already, from elsewhere
        raise UsageError(f"{path} imports as {name}, which Python finds at {found}: run pykern from a "
                         f"directory where {parts[0]} is this checkout's")
    return mod


def resolve_user_kernel(path: str, func: str, sig: dict[str, Any] | None = None):
    """The kernel instance ``func`` of the file ``path``: a ``@pykern.kernel`` with no compile-time
    parameters, a generic one with ``sig`` binding them (``--sig T=f32``), or an instance
    (``k.instance(...)``) bound to a name in the file."""
    mod = load_user_file(path)
    found = {k: v for k, v in vars(mod).items() if isinstance(v, (KernelDef, KernelInstance))}
    obj = getattr(mod, func, None)
    if not isinstance(obj, (KernelDef, KernelInstance)):
        choices = ", ".join(found) or "none (decorate a function with @pykern.kernel)"
        raise UsageError(f"{path} has no kernel {func!r}; kernels there: {choices}")
    if isinstance(obj, KernelDef):
        if sig:
            try:
                return obj.instance(func, **sig)
            except TypeError as exc:
                raise UsageError(f"--sig: {exc}") from None
        if obj.source.compile_params:
            inst = [k for k, v in found.items() if isinstance(v, KernelInstance) and v.kdef is obj]
            hint = f"; instances in the file: {', '.join(inst)}" if inst else \
                f"; give its parameters with --sig (e.g. --sig {obj.source.compile_params[0]}=f32)"
            raise UsageError(f"{func} is generic over {obj.source.compile_params}{hint}")
        return obj._only_instance()
    return obj


def _split_archs(values: list[str] | None, target: str) -> list[str]:
    raw = [a for v in (values or []) for a in v.split(",") if a.strip()]
    archs = [registry.check_arch(target, a.strip()) for a in raw] or [registry.default_arch(target)]
    return list(dict.fromkeys(archs))


def make_target(target: str, arch: str | None):
    options = {"wave_size": config.wave_size()} if target == "cpu" else {}
    return registry.make_target(target, arch, **options)


def _dtypes(module) -> list[str]:
    tags = {v.tag for inst in module for v in inst.params.values() if isinstance(v, DType)}
    return sorted(tags)


# ---- list ----------------------------------------------------------------------------------------
def cmd_list(module: str | None = None, out: TextIO = sys.stdout) -> int:
    """The stdlib modules (index, kernel count, dtypes), or one module's kernels and signatures."""
    std = _stdlib()
    if module is None:
        out.write(f"{'#':>2}  {'module':<10} {'kernels':>7}  dtypes\n")
        for m in std.MODULES:
            out.write(f"{m.index:>2}  {m.name:<10} {len(m):>7}  {' '.join(_dtypes(m)) or '-'}\n")
        return 0
    m = resolve_module(module)
    out.write(f"module {m.name} (index {m.index}): {len(m)} kernels\n")
    target = registry.make_target("amdgpu")  # typing needs only the wave size; no LLVM work
    for inst in m:
        fn = inst.typed(target)
        params = ", ".join(f"{n}: {t}" for n, t in fn.params)
        out.write(f"  {inst.name}({params})\n")
    return 0


# ---- show ----------------------------------------------------------------------------------------
def parse_sig(sig: str | None) -> dict[str, Any]:
    """``T=f32,W=4`` -> ``{"T": pk.f32, "W": 4}``: dtype names, ints, floats, True/False."""
    dtypes = {d.name: d for d in ALL_DTYPES} | {d.tag: d for d in ALL_DTYPES}
    params: dict[str, Any] = {}
    for item in filter(None, (sig or "").split(",")):
        key, eq, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not eq or not key.isidentifier():
            raise UsageError(f"--sig takes NAME=VALUE pairs separated by commas, got {item!r}")
        if value in dtypes:
            params[key] = dtypes[value]
        elif value in ("True", "False"):
            params[key] = value == "True"
        else:
            try:
                params[key] = int(value)
            except ValueError:
                try:
                    params[key] = float(value)
                except ValueError:
                    raise UsageError(f"--sig {key}={value}: not a dtype ({', '.join(sorted(dtypes))}), "
                                     "an int, a float or True/False") from None
    return params


def cmd_show(module: str, kernel: str | None = None, target: str = "amdgpu", arch: str | None = None,
             stage: str = "asm", out: TextIO = sys.stdout, sig: str | None = None) -> int:
    """One kernel's LLVM IR, optimised IR, assembly or (amdgpu) code-object metadata."""
    if stage not in STAGES:
        raise UsageError(f"unknown stage {stage!r}; choose one of: {', '.join(STAGES)}")
    registry.archs(target)  # validates the target name
    if stage == "meta" and target != "amdgpu":
        raise UsageError(f"--stage meta is for amdgpu code objects; for {target} choose one of: typed, ir, opt, asm")
    if kernel is None and ":" in module:
        path, _, func = module.rpartition(":")
        inst, name = resolve_user_kernel(path, func, parse_sig(sig)), func
    elif module.endswith(".py"):
        if kernel is None:
            raise UsageError(f"name the kernel: pykern show {module}:FUNCTION (or {module} FUNCTION)")
        inst, name = resolve_user_kernel(module, kernel, parse_sig(sig)), kernel
    else:
        if sig:
            raise UsageError("--sig is for generic kernels of your own file; stdlib kernels are instances")
        m = resolve_module(module)
        if kernel is None:
            raise UsageError(f"name a kernel of {m.name}: pykern show {m.name} KERNEL; "
                             f"{_kernel_choices(m.names(), '') if len(m) else 'it has no kernels yet'}")
        inst, name = resolve_kernel(m, kernel), f"{m.name}.{kernel}"
    tgt = make_target(target, arch)
    if stage == "meta":
        hsaco, _ = compile_kernels([inst], tgt, name)
        co = CodeObject(hsaco)
        out.write(co.describe() + "\n")
        k = co.kernels[inst.name]
        out.write(json.dumps(_jsonable(k.raw), indent=1, sort_keys=True) + "\n")
        return 0
    if stage == "typed":
        out.write(printer.function(inst.body(tgt)) + "\n")
        return 0
    ir_module, _ = lower_module([inst], tgt, name)
    if stage == "ir":
        text = str(ir_module)
    elif stage == "opt":
        text = str(tgt.optimize(ir_module))
    else:
        text = tgt.assembly(ir_module)
    out.write(text if text.endswith("\n") else text + "\n")
    return 0


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, bytes):
        return x.hex()
    return x


# ---- resources -----------------------------------------------------------------------------------
_RES_COLUMNS = ("kernel", "arch", "wave", "vgpr", "agpr", "sgpr", "vspill", "sspill", "lds", "scratch",
                "occupancy")


def resources(module, archs: list[str]) -> list[dict]:
    """Per kernel and arch: registers, spills, LDS, scratch, wave size, occupancy (waves/SIMD)."""
    rows = []
    for arch in archs:
        hsaco, _ = build_module(module, registry.make_target("amdgpu", arch))
        for k in CodeObject(hsaco).kernels.values():
            rows.append({"kernel": k.name, "arch": arch, "wave": k.wavefront_size, "vgpr": k.vgpr_count,
                         "agpr": k.agpr_count, "sgpr": k.sgpr_count, "vspill": k.vgpr_spill_count,
                         "sspill": k.sgpr_spill_count, "lds": k.lds, "scratch": k.scratch,
                         "occupancy": k.occupancy() if k.arch else None,
                         "max_block": k.max_flat_workgroup_size})
    return rows


def cmd_resources(module: str, archs: list[str] | None = None, as_json: bool = False,
                  out: TextIO = sys.stdout) -> int:
    m = resolve_module(module)
    arch_list = _split_archs(archs, "amdgpu")
    if not len(m):
        if as_json:
            out.write("[]\n")
        else:
            out.write(f"module {m.name} has no kernels yet\n")
        return 0
    rows = resources(m, arch_list)
    if as_json:
        out.write(json.dumps(rows, indent=1) + "\n")
        return 0
    cells = [[str(r[c]) if r[c] is not None else "?" for c in _RES_COLUMNS] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(_RES_COLUMNS)]
    fmt = lambda row: "  ".join(v.ljust(w) if i < 2 else v.rjust(w) for i, (v, w) in enumerate(zip(row, widths)))
    out.write(fmt(list(_RES_COLUMNS)) + "\n")
    for row in cells:
        out.write(fmt(row) + "\n")
    spills = sum(r["vspill"] + r["sspill"] > 0 for r in rows)
    out.write(f"{len(rows)} kernels; {spills} spill; occupancy = estimated waves per SIMD at the "
              "kernel's max block size\n")
    return 0


# ---- build ---------------------------------------------------------------------------------------
def emit_rust(out_dir: Path, manifest: dict, target: str, archs: list[str]) -> Path:
    """The Rust crate a candle backend depends on, written into ``out_dir`` (``pykern.rust_crate``)."""
    return write_crate(out_dir, manifest, target, archs, _stdlib().MODULES)


class Progress:
    """One line on a terminal, rewritten as work finishes (kernels done / total, the last module and
    arch); nothing at all when ``stream`` is not a terminal (logs, pipes, CI)."""

    def __init__(self, stream: TextIO, total: int):
        self.stream, self.total, self.done, self.shown = stream, total, 0, False
        self.live = bool(getattr(stream, "isatty", lambda: False)())

    def advance(self, kernels: int, what: str) -> None:
        self.done += kernels
        if kernels:
            self.note(what)

    def note(self, what: str) -> None:
        """Rewrite the line without advancing: what is being worked on (the first module takes a
        while to finish, and a silent terminal looks hung)."""
        if self.live:
            self.stream.write(f"\rpykern build: {self.done}/{self.total} kernels  {what}\033[K")
            self.stream.flush()
            self.shown = True

    def close(self) -> None:
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()


def _writable_dir(outp: Path) -> None:
    """Create ``outp`` and prove it takes files, before any compiling: a file in the way or a
    read-only directory is the user's to fix (exit 2 with the reason), not an internal error."""
    if outp.exists() and not outp.is_dir():
        raise UsageError(f"--out {outp} is a file; give a directory")
    try:
        outp.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=outp, prefix=".pykern-write-test-"):
            pass
    except OSError as exc:
        raise UsageError(f"cannot write to --out {outp}: {exc.strerror or exc}") from None


def cmd_build(modules: list[str] | None, target: str = "amdgpu", archs: list[str] | None = None,
              out_dir: str | None = None, emit_rust_file: bool = False, jobs: int | None = None,
              force: bool = False, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """Compile modules × archs to ``out_dir/<arch>/<module>.<ext>`` plus ``manifest.json``
    (``pykern.build.build``); this checks what was asked for and reports."""
    registry.archs(target)
    if target == "cpu":
        raise UsageError("build: the cpu target is not applicable (the CPU runtime JIT-compiles at load); "
                         "choose one of: amdgpu, cuda")
    if not out_dir:
        raise UsageError("build needs --out DIR")
    arch_list = _split_archs(archs, target)
    if jobs is not None and jobs < 1:
        raise UsageError(f"-j/--jobs takes a positive number of worker processes, got {jobs}")
    specs: dict[str, str] = {}  # module name -> what a worker resolves to find it again
    mods = []
    for spec in modules or [m.name for m in _stdlib().MODULES]:
        if is_user_file(spec):
            path = spec.split(USER_SEP)[0]
            for m in user_modules(path, err):
                specs[m.name] = f"{Path(path).resolve()}{USER_SEP}{m.name}"
                mods.append(m)
        else:
            m = resolve_module(spec)
            specs[m.name] = m.name
            mods.append(m)
    mods = list({m.name: m for m in mods}.values())
    outp = Path(out_dir)
    _writable_dir(outp)
    empty = [m.name for m in mods if not len(m)]
    for name in empty:
        err.write(f"pykern build: skipping {name}: no kernels yet\n")
    progress: Progress | None = None
    count = {"done": 0, "total": 0}

    def on_start(total_kernels: int, current: list) -> None:
        nonlocal progress
        count["done"] = len(current)
        count["total"] = len(arch_list) * (len(mods) - len(empty))
        progress = Progress(err, total_kernels)
        progress.advance(sum(b.kernels for b in current), f"{len(current)} up to date")
        todo = count["total"] - count["done"]
        if todo:
            progress.note(f"[{count['done']}/{count['total']}] building {todo} module{'s' * (todo != 1)} x arch "
                          f"({', '.join(arch_list)})")

    def on_built(b) -> None:
        count["done"] += 1
        e = b.entry
        how = "cache" if b.cached else "compiled"
        progress.advance(b.kernels, f"[{count['done']}/{count['total']}] {e['module']} {e['arch']} ({how}, "
                                    f"{b.seconds:.1f}s)")

    report = build.build([(m, specs[m.name]) for m in mods if len(m)], target, arch_list, outp,
                         resolve=resolve_module, jobs=jobs, force=force, on_start=on_start, on_built=on_built)
    if progress is not None:
        progress.close()
    rust = emit_rust(outp, report.manifest, target, arch_list) if emit_rust_file else None
    built = len({b.entry["module"] for b in report.built})
    out.write(f"built {built} modules ({report.kernels} kernels) for {target} {','.join(arch_list)} into {outp} "
              f"in {report.seconds:.2f}s: {report.compiled} compiled, {report.from_cache} from "
              f"cache, {report.up_to_date} up to date"
              + (f"; skipped (no kernels yet): {', '.join(empty)}" if empty else "") + "\n")
    for b in sorted(report.built, key=lambda b: (b.entry["arch"], b.entry["index"] or 0)):
        e = b.entry
        out.write(f"  {e['file']:<24} {len(e['kernels']):>4} kernels  {e['bytes']:>9} bytes  sha256 {e['sha256'][:16]}\n")
    out.write("  manifest.json" + (f", {rust.name}" if rust else "") + "\n")
    return 0


# ---- info ----------------------------------------------------------------------------------------
_PROBE = r"""
import json, sys
out = {}
try:
    from pykern.runtime import hip
    n = hip.device_count()
    devs = []
    for i in range(n):
        try:
            import pykern
            d = pykern.device(f"hip:{i}")
            devs.append(f"hip:{i} {d.name} ({d.arch_name})")
        except Exception as e:
            devs.append(f"hip:{i} ({type(e).__name__}: {e})")
    out["hip"] = devs or ["none (ROCm reports no AMD GPU)"]
except Exception as e:
    out["hip"] = [f"not available: {e}"]
try:
    from pykern.runtime import cuda
    drv = cuda._driver()
    drv.cuInit(0)
    err, n = drv.cuDeviceGetCount()
    if int(err) != 0:
        raise RuntimeError(cuda._error_name(drv, err))
    devs = []
    for i in range(n):
        _, dev = drv.cuDeviceGet(i)
        _, name = drv.cuDeviceGetName(64, dev)
        _, major = drv.cuDeviceGetAttribute(drv.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)
        _, minor = drv.cuDeviceGetAttribute(drv.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)
        name = name.split(b"\0")[0].decode()
        arch = cuda.arch_for_capability(major, minor)
        devs.append(f"cuda:{i} {name} (sm_{major}{minor}; PTX for {arch})")
    out["cuda"] = devs or ["none (the driver reports no device)"]
except Exception as e:
    out["cuda"] = [f"not available: {type(e).__name__}: {e}"]
print(json.dumps(out))
"""


def probe_gpus(timeout: float = 60.0) -> dict[str, list[str]]:
    """HIP and CUDA devices, probed in a child process so a broken driver cannot crash pykern."""
    try:
        r = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=timeout)
        return json.loads(r.stdout.strip().splitlines()[-1])
    except Exception as exc:  # noqa: BLE001 — a crash or hang of the probe is a report, not a failure
        why = f"probe failed ({type(exc).__name__})"
        return {"hip": [why], "cuda": [why]}


def _human(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def cmd_info(out: TextIO = sys.stdout, gpus: bool = True) -> int:
    v = prebuilt.versions()
    out.write(f"pykern {v['pykern']}  llvmlite {v['llvmlite']}  LLVM {v['llvm']}  Python {sys.version.split()[0]}\n")
    out.write("targets:\n")
    for t in registry.TARGETS:
        archs = registry.archs(t)
        out.write(f"  {t:<7} archs {', '.join(archs)} (default {registry.default_arch(t)})\n")
    try:
        lld = " ".join(find_lld())
    except Exception as exc:  # noqa: BLE001
        lld = f"NOT FOUND: {exc}"
    out.write(f"ld.lld: {lld}\n")
    if gpus:
        found = probe_gpus()
        for kind in ("hip", "cuda"):
            out.write(f"{kind.upper()} GPUs: {'; '.join(found.get(kind, ['?']))}\n")
    count, size = cache.stats()
    state = "enabled" if config.cache_enabled() else "disabled (PYKERN_CACHE=0)"
    out.write(f"cache: {config.cache_dir()} ({state}): {count} entries, {_human(size)}\n")
    dirs = prebuilt.search_dirs()
    pre = config.prebuilt_dir()
    out.write(f"prebuilt: {', '.join(map(str, dirs)) if dirs else 'none'}"
              + (f" (PYKERN_PREBUILT={pre} has no manifest.json)" if pre and pre not in dirs else "") + "\n")
    return 0


# ---- cache ---------------------------------------------------------------------------------------
def _age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"


def cmd_cache(action: str, out: TextIO = sys.stdout, max_size: str | None = None) -> int:
    """``ls``: a table of the entries (what they hold, target and arch, size, time since last use),
    most recent first; ``stats``; ``clear``; ``prune``: down to the size cap (``--max`` or
    ``PYKERN_CACHE_MAX``), least recently used first."""
    actions = ("ls", "stats", "clear", "prune")
    if action not in actions:
        raise UsageError(f"unknown cache action {action!r}; choose one of: {', '.join(actions)}")
    root = config.cache_dir() / cache.NAMESPACE
    if action == "ls":
        rows, now = [], time.time()
        for k in cache.entries():
            try:
                st = (root / k[:2] / f"{k}.bin").stat()
            except FileNotFoundError:
                continue
            what, _, where = (cache.label(k) or "?  ?").partition(" ")
            rows.append((st.st_mtime, what, where, st.st_size, k))
        out.write(f"{'kernels':<40} {'target / arch':<28} {'size':>9} {'used':>6}  key\n")
        for mtime, what, where, size, k in sorted(rows, reverse=True):
            out.write(f"{what[:40]:<40} {where[:28]:<28} {_human(size):>9} {_age(now - mtime):>6}  {k[:12]}\n")
        total = sum(r[3] for r in rows)
        out.write(f"{len(rows)} entries, {_human(total)} of {_human(config.cache_max_bytes())} "
                  f"(PYKERN_CACHE_MAX) in {config.cache_dir()}\n")
        return 0
    count, size = cache.stats()
    if action == "stats":
        state = "enabled" if config.cache_enabled() else "disabled (PYKERN_CACHE=0)"
        out.write(f"cache dir: {config.cache_dir()}\nstate: {state}\nentries: {count}\nsize: {_human(size)} ({size} bytes)\n"
                  f"size cap: {_human(config.cache_max_bytes())} (PYKERN_CACHE_MAX)\n")
        return 0
    if action == "prune":
        try:
            cap = config.parse_size(max_size) if max_size is not None else config.cache_max_bytes()
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        removed, freed = cache.prune(cap)
        out.write(f"removed {removed} least recently used entries ({_human(freed)}); "
                  f"{_human(size - freed)} left, cap {_human(cap)}\n")
        return 0
    cache.clear()
    out.write(f"removed {count} entries ({_human(size)}) from {config.cache_dir()}\n")
    return 0

