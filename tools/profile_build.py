#!/usr/bin/env python3
"""Where a cold build of stdlib modules spends its CPU time, per phase and per module (issue 29).

Each module x arch is compiled in its own process, the way a `pykern build` worker does it, with
`time.process_time()` around each phase: typing (the front end), lowering to llvmlite IR, rendering
the IR text, parsing + verifying it in LLVM, the optimisation pipeline, code generation. The cache is
not touched. One JSON line per module x arch on stdout; a table at the end. `--jobs` runs that many
processes at once (each figure is its own process's CPU time, so they add up either way); the
"pool" line replays the measured module totals through `pykern build`'s scheduling (`-j 2`) to say
whether one large module sets the wall time.

    python tools/profile_build.py --arch sm_90,gfx90a [--modules quantized,reduce] [--jobs 2]
    python tools/profile_build.py --arch sm_90 --level 2      # the IR pipeline at O2
    python tools/profile_build.py --arch sm_90 --modules unary --time-passes   # LLVM's pass timers
    python tools/profile_build.py --arch sm_90,gfx90a --top 30                 # the largest kernels alone
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def pass_shares(report: str, keep, top: int = 8) -> dict[str, float]:
    """The passes of an LLVM ``-time-passes`` report that ``keep`` selects (by name) with the largest
    user time, summed over their runs (a pass runs once per function and pipeline position), as
    fractions of the selected passes' total."""
    rows: dict[str, float] = {}
    for line in report.splitlines():
        m = re.match(r"\s+([\d.]+) \(\s*[\d.]+%\)(?:\s+[\d.]+ \(\s*[\d.]+%\)){2,3}\s+(.+)$", line)
        if m and "Total" not in m.group(2):
            name = re.sub(r" on .*$", "", m.group(2)).strip()
            if keep(name):
                rows[name] = rows.get(name, 0.0) + float(m.group(1))
    total = sum(rows.values()) or 1.0
    return {k: round(v / total, 3) for k, v in sorted(rows.items(), key=lambda kv: -kv[1])[:top]}


def profile(name: str, arch: str, level: int | None, save: str | None = None,
            options: tuple[str, ...] = (), time_passes: bool = False) -> dict:
    import llvmlite.binding as llvm

    import stdlib_kernels
    from pykern.compiler import collector_paused, lower_module, rendered
    from pykern.targets import registry
    from pykern.targets.aliases import object_with_aliases, ptx_with_aliases

    target = registry.make_target("cuda" if arch.startswith("sm_") else "amdgpu", arch)
    target.target_machine  # noqa: B018 — LLVM set up before the options below
    for opt in options:
        llvm.set_option("", opt)
    module = stdlib_kernels.module(name)
    clock = time.process_time
    with collector_paused():
        c0 = clock()
        for inst in module.kernels:
            inst.typed(target)
        c1 = clock()
        mod, _ = lower_module(module.kernels, target, name)  # what the compiler lowers: aliases once
        c2 = clock()
        text = rendered(mod)  # the compiler's renderer (lower.render)
    c3 = clock()
    ref = llvm.parse_assembly(text)
    ref.verify()
    c4 = clock()
    ref.triple = target.triple
    ref.data_layout = str(target.target_machine.target_data)
    pto = llvm.create_pipeline_tuning_options(speed_level=3 if level is None else level)
    pb = llvm.create_pass_builder(target.target_machine, pto)
    if time_passes:  # LLVM's own timers (they cost a little time themselves)
        llvm.set_time_passes(True)
    pb.getModulePassManager().run(ref, pb)
    c5 = clock()
    passes = {}
    with target.codegen_options(mod):  # the module's LSR choice, as Target.finalize makes it
        if target.name == "cuda":
            data = ptx_with_aliases(target.target_machine.emit_assembly(ref), mod.kernel_aliases).encode()
        else:
            data = object_with_aliases(target.target_machine.emit_object(ref), mod.kernel_aliases)
    c6 = clock()
    if time_passes:
        # one report for both (llvmlite returns the pipeline's timers only after code generation):
        # the pipeline's passes are the new pass manager's (``InstCombinePass``), code
        # generation's the legacy manager's, named in words ("Loop Strength Reduction")
        report = llvm.report_and_reset_timings()
        llvm.set_time_passes(False)
        passes["optimise"] = pass_shares(report, lambda n: re.fullmatch(r"[A-Za-z0-9<>:,]+Pass(<.*>)?", n) is not None)
        passes["codegen"] = pass_shares(report, lambda n: re.fullmatch(r"[A-Za-z0-9<>:,]+Pass(<.*>)?", n) is None)
    if save:
        out = Path(save) / arch / f"{name}{'.ptx' if target.name == 'cuda' else '.o'}"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(data)
    t = {"module": name, "arch": arch, "kernels": len(module.kernels), "typing": c1 - c0, "lowering": c2 - c1,
         "render": c3 - c2, "parse": c4 - c3, "optimise": c5 - c4, "codegen": c6 - c5, "ir_mb": len(text) / 1e6, "aliases": len(mod.kernel_aliases),
         "lsr": mod.loop_strength_reduction}
    t["total"] = c6 - c0
    if passes:
        t["passes"] = passes
    return t


def _one(args):
    return profile(*args)


def kernel_sizes(name: str, arch: str) -> list[tuple[int, str, str, str]]:
    """(IR bytes, module, kernel, arch) of each kernel of module ``name`` that is compiled (second
    names are not), from the module's lowering."""
    import stdlib_kernels
    from pykern.compiler import collector_paused, lower_module
    from pykern.lower.render import function_text
    from pykern.targets import registry

    target = registry.make_target("cuda" if arch.startswith("sm_") else "amdgpu", arch)
    with collector_paused():
        mod, _ = lower_module(stdlib_kernels.module(name).kernels, target, name)
        return [(len(function_text(f)), name, f.name, arch) for f in mod.functions if f.blocks]


def kernel_alone(size: int, name: str, kernel: str, arch: str) -> dict:
    """The CPU seconds of compiling one kernel alone (lowering to code), as a first use does."""
    import stdlib_kernels
    from pykern.compiler import collector_paused, lower_module, rendered
    from pykern.targets import registry

    target = registry.make_target("cuda" if arch.startswith("sm_") else "amdgpu", arch)
    inst = next(k for k in stdlib_kernels.module(name).kernels if k.name == kernel)
    c0 = time.process_time()
    with collector_paused():
        inst.typed(target)
        mod, sigs = lower_module([inst], target, name)
        rendered(mod)
    c1 = time.process_time()
    ref = target.optimize(mod)
    c2 = time.process_time()
    with target.codegen_options(mod):
        (target.target_machine.emit_assembly if target.name == "cuda" else target.target_machine.emit_object)(ref)
    c3 = time.process_time()
    return {"module": name, "kernel": kernel, "arch": arch, "ir_kb": size / 1e3, "front": c1 - c0,
            "optimise": c2 - c1, "codegen": c3 - c2, "total": c3 - c0}


def top_kernels(archs: list[str], modules: list[str], top: int, jobs: int) -> None:
    """The ``top`` kernels by IR size of each arch, each compiled alone: where a build's CPU goes
    kernel by kernel (a module's passes cannot be timed per function)."""
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(jobs, maxtasksperchild=1) as pool:
        sizes = [row for rows in pool.starmap(kernel_sizes, [(m, a) for a in archs for m in modules]) for row in rows]
    for arch in archs:
        mine = sorted((r for r in sizes if r[3] == arch), reverse=True)
        total = sum(r[0] for r in mine)
        with ctx.Pool(jobs, maxtasksperchild=4) as pool:
            rows = pool.starmap(kernel_alone, mine[:top])
        print(f"\n{arch}: {len(mine)} kernels compiled, {total / 1e6:.1f} MB of IR; the {top} largest "
              f"({sum(r[0] for r in mine[:top]) / 1e6:.1f} MB) alone, CPU s (front = typing+lowering+render):")
        for r in sorted(rows, key=lambda r: -r["total"]):
            print(f"  {r['module']:10s} {r['kernel']:32s} {r['ir_kb']:8.0f} kB  front {r['front']:5.2f}  "
                  f"opt {r['optimise']:6.2f}  codegen {r['codegen']:6.2f}  total {r['total']:6.2f}", flush=True)
        print(f"  sum {sum(r['total'] for r in rows):.1f} s")


def replay(times: list[tuple[float, int]], jobs: int) -> float:
    """The wall time of `pykern build`'s pool given each task's seconds, submitted in its order."""
    free = [0.0] * jobs
    for sec, _ in times:
        i = free.index(min(free))
        free[i] += sec
    return max(free)


def main() -> int:
    import stdlib_kernels

    p = argparse.ArgumentParser()
    p.add_argument("--arch", default="sm_90")
    p.add_argument("--modules", default=",".join(m.name for m in stdlib_kernels.MODULES))
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--level", type=int, default=None, help="the IR pipeline's O level (default: the target's)")
    p.add_argument("--save", help="write each module's PTX / relocatable object to SAVE/<arch>/")
    p.add_argument("--llvm-option", action="append", default=[], help="an LLVM command-line option (repeatable)")
    p.add_argument("--time-passes", action="store_true",
                   help="LLVM's pass timers: each module's largest passes, as shares of its optimisation and code generation")
    p.add_argument("--top", type=int, default=0,
                   help="instead: the N largest kernels of each arch (by IR size) compiled alone, CPU seconds each")
    a = p.parse_args()
    if a.top:
        top_kernels(a.arch.split(","), a.modules.split(","), a.top, a.jobs)
        return 0
    work = [(m, arch, a.level, a.save, tuple(a.llvm_option), a.time_passes) for arch in a.arch.split(",") for m in a.modules.split(",")]
    work.sort(key=lambda w: -len(stdlib_kernels.module(w[0]).kernels))
    if a.save:  # what `pykern build --out` writes about its files, so that compare_codegen --built reads them
        manifest = [{"module": m, "arch": arch, "target": "cuda" if arch.startswith("sm_") else "amdgpu",
                     "file": f"{arch}/{m}{'.ptx' if arch.startswith('sm_') else '.o'}"} for m, arch, *_ in work]
        Path(a.save).mkdir(parents=True, exist_ok=True)
        Path(a.save, "manifest.json").write_text(json.dumps({"modules": manifest}, indent=1))
    ctx = multiprocessing.get_context("fork")
    rows = []
    with ctx.Pool(a.jobs, maxtasksperchild=1) as pool:
        for r in pool.imap_unordered(_one, work):
            print(json.dumps(r), flush=True)
            rows.append(r)
    phases = ("typing", "lowering", "render", "parse", "optimise", "codegen", "total", "ir_mb")
    for arch in a.arch.split(","):
        mine = [r for r in rows if r["arch"] == arch]
        print(f"\n{arch}: " + "  ".join(f"{ph} {sum(r[ph] for r in mine):.1f}" for ph in phases))
        for r in sorted(mine, key=lambda r: -r["total"]):
            print(f"  {r['module']:10s} {r['kernels']:4d} " + " ".join(f"{r[ph]:6.1f}" for ph in phases))
            for stage, shares in r.get("passes", {}).items():
                print(f"      {stage}: " + ", ".join(f"{k} {100 * v:.0f}%" for k, v in shares.items()))
        order = sorted(mine, key=lambda r: -r["kernels"])  # pykern build's order: most kernels first
        print(f"  pool -j2 (kernel-count order): {replay([(r['total'], 0) for r in order], 2):.1f} s; "
              f"cost order: {replay([(r['total'], 0) for r in sorted(mine, key=lambda r: -r['total'])], 2):.1f} s; "
              f"ideal {sum(r['total'] for r in mine) / 2:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
