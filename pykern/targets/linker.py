"""Linking AMDGPU objects into loadable code objects with a real ``ld.lld``.

LLVM emits a relocatable ELF; HIP loads only a *linked* shared object (the HSACO). Only LLD links
AMDGPU ELF, and pykern does not hand-roll a linker, so we find one, in this order:

1. ``$PYKERN_LLD`` — an explicit choice always wins (and is an error if it does not exist);
2. ``$ROCM_PATH/llvm/bin/ld.lld`` (``/opt/rocm`` when ``ROCM_PATH`` is unset) — ROCm's own LLD;
3. ``ld.lld`` on the ``PATH``, then a versioned ``ld.lld-NN`` (Debian/Ubuntu's ``lld-NN`` packages),
   newest first;
4. the ``ziglang`` wheel's bundled LLD (``<site-packages>/ziglang/zig ld.lld``), the ``pykern[amdgpu]``
   extra, so HSACO links with no ROCm and no system LLD. It is optional (a 411 MB wheel): the CPU
   and CUDA targets and AMDGPU relocatable objects need no linker. The ``zig`` executable is run
   directly: going through ``python -m ziglang`` costs a Python start-up (~30 ms) per link, most of
   a small kernel's compile time.
"""
from __future__ import annotations

import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
import tempfile

from ..errors import CompileError


class LinkerError(CompileError):
    """No usable ``ld.lld``, or ``ld.lld`` rejected the object."""


def _ziglang_lld() -> list[str] | None:
    """``[<ziglang>/zig, "ld.lld"]`` when the wheel is installed (``python -m ziglang`` if its
    executable is not where the wheel puts it)."""
    spec = importlib.util.find_spec("ziglang")
    if spec is None:
        return None
    for location in spec.submodule_search_locations or ():
        exe = os.path.join(location, "zig.exe" if os.name == "nt" else "zig")
        if os.path.isfile(exe) and os.access(exe, os.X_OK):
            return [exe, "ld.lld"]
    return [sys.executable, "-m", "ziglang", "ld.lld"]


def find_lld() -> list[str]:
    """The command (argv prefix) that runs ``ld.lld``, following the search order above."""
    explicit = os.environ.get("PYKERN_LLD")
    if explicit:
        if not (os.path.isfile(explicit) and os.access(explicit, os.X_OK)):
            raise LinkerError(f"PYKERN_LLD={explicit!r} is not an executable file")
        return [explicit]
    rocm = os.environ.get("ROCM_PATH") or "/opt/rocm"
    candidate = os.path.join(rocm, "llvm", "bin", "ld.lld")
    if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
        return [candidate]
    on_path = shutil.which("ld.lld") or _versioned_lld()
    if on_path:
        return [on_path]
    zig = _ziglang_lld()
    if zig is not None:
        return zig
    raise LinkerError(
        "no ld.lld found to link AMDGPU code objects. Looked at $PYKERN_LLD, "
        f"{candidate}, ld.lld / ld.lld-NN on the PATH and the ziglang wheel. Install one of: "
        "ROCm (or set ROCM_PATH to it); your distribution's lld package (e.g. `apt-get install lld`); "
        "or `pip install 'pykern[amdgpu]'` (the ziglang wheel, which bundles LLD). "
        "Or set PYKERN_LLD=/path/to/ld.lld")


def _versioned_lld() -> str | None:
    """The newest ``ld.lld-NN`` on the PATH (what distributions' ``lld-NN`` packages install)."""
    found: dict[int, str] = {}
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        try:
            names = os.listdir(directory or ".")
        except OSError:
            continue
        for name in names:
            version = name[len("ld.lld-"):]
            path = os.path.join(directory, name)
            if name.startswith("ld.lld-") and version.isdigit() and os.access(path, os.X_OK):
                found.setdefault(int(version), path)
    return found[max(found)] if found else None


def link_shared(obj: bytes, timeout: float = 300.0) -> bytes:
    """Link one relocatable AMDGPU object into a shared object (the HSACO) and return its bytes.

    ``--no-undefined`` turns a stray external reference (e.g. a math libcall LLVM could not inline)
    into a build error here rather than a load failure on someone's GPU.
    """
    lld = find_lld()
    with tempfile.TemporaryDirectory(prefix="pykern-lld-") as tmp:
        src, out = os.path.join(tmp, "kernels.o"), os.path.join(tmp, "kernels.hsaco")
        with open(src, "wb") as f:
            f.write(obj)
        cmd = [*lld, "-shared", "--no-undefined", src, "-o", out]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise LinkerError(f"could not run the linker: {shlex.join(cmd)}: {exc}") from exc
        if proc.returncode != 0:
            raise LinkerError(f"ld.lld failed (exit {proc.returncode}): {shlex.join(cmd)}\n"
                              f"{proc.stderr.strip() or proc.stdout.strip()}")
        with open(out, "rb") as f:
            return f.read()
