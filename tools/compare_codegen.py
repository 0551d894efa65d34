#!/usr/bin/env python3
"""Compare the code that two revisions of pykern generate for every stdlib kernel.

A refactor of the front end, the lowering or the stdlib's shared device code claims "no change in
generated code"; this checks the claim where it matters, on the final code and not only the LLVM IR
(a change of metadata, attributes or pass order can leave the IR alone and still move registers).
Each side is built with `pykern build` from its own tree (its own pykern on PYTHONPATH, its own empty
cache directory, no prebuilt directory), then, per kernel:

* NVIDIA (``sm_*``): the PTX of the ``.entry`` (identical text or not) and what ``ptxas -v`` reports:
  registers, spill stores/loads, stack frame, shared memory, barriers; PTX instruction count.
* AMDGPU (``gfx*``): the code-object metadata of ``llvm-readobj --notes`` (VGPRs, AGPRs, SGPRs,
  their spills, LDS, scratch, ...) and the disassembly of ``llvm-objdump -d`` (instruction count;
  identical instruction text or not, addresses and encodings left out so that a kernel placed
  elsewhere in the object still compares equal).

Usage::

    tools/compare_codegen.py REV_A REV_B [--targets sm_90,gfx90a,gfx1100] [--modules reduce,unary]
    tools/compare_codegen.py --built DIR_A DIR_B        # two existing `pykern build --out` folders

A REV is a git revision of the repository the script is run from (built in a detached worktree under
``--work``, removed afterwards unless ``--keep``) or a folder holding a checkout (``.`` is the working
tree with its uncommitted changes). Builds run with one process each (``-j``) under ``nice`` so that
a shared machine stays usable. Exit status: 0 when every kernel is identical, 1 when any differs or
is missing on one side, 2 on a usage or build error.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TARGETS = "sm_90,gfx90a,gfx1100"


def tool(names: list[str], env: str) -> str:
    """The first of ``names`` on PATH (or ``$env``): Debian ships LLVM's tools with a version suffix."""
    if os.environ.get(env):
        return os.environ[env]
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    raise SystemExit(f"compare_codegen: none of {', '.join(names)} found (set {env})")


def run(cmd: list[str], **kw) -> str:
    done = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    return done.stdout + done.stderr


# ---- building one side ---------------------------------------------------------------------------

def checkout(rev: str, where: Path) -> tuple[Path, bool]:
    """A tree holding ``rev``: the folder itself when it is one, else a detached worktree (made here)."""
    if Path(rev).is_dir():
        return Path(rev).resolve(), False
    if where.exists():
        run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(where)])
    run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(where), rev])
    return where, True


def extra_file(dotted: str, work: Path) -> Path:
    """A file `pykern build` takes for the ``pykern.Module``s of the package module ``dotted``: a
    family outside candle's eleven (matmul) is in no stdlib list, and its own file has relative
    imports, so it cannot be built as a user file directly."""
    path = work / "extra" / f"{dotted.rsplit('.', 1)[-1]}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("import importlib\nimport pykern\n"
                    f"_m = importlib.import_module({dotted!r})\n"
                    "globals().update({k: v for k, v in vars(_m).items() if isinstance(v, pykern.Module)})\n")
    return path


def build(tree: Path, out: Path, cache: Path, targets: list[str], modules: list[str], extra: list[str],
          jobs: int, log: Path) -> None:
    """`pykern build` of ``tree``'s stdlib (and of the ``extra`` package modules it has: families
    outside candle's eleven, such as matmul) into ``out`` with ``tree``'s own pykern and an unshared
    cache."""
    env = dict(os.environ, PYTHONPATH=str(tree), PYKERN_CACHE_DIR=str(cache))
    env.pop("PYKERN_PREBUILT", None)
    env.pop("PYKERN_CACHE", None)
    cache.mkdir(parents=True, exist_ok=True)
    groups = {"cuda": [t for t in targets if t.startswith("sm_")],
              "amdgpu": [t for t in targets if not t.startswith("sm_")]}
    with open(log, "a") as fh:
        for target, archs in groups.items():
            if not archs:
                continue
            for what in [modules] + [[str(extra_file(m, out.parent))] for m in extra
                                      if tree.joinpath(*m.split(".")).with_suffix(".py").is_file()]:
                cmd = ["nice", "-n", "10", sys.executable, "-m", "pykern.cli.main", "build", *what,
                       "--target", target, "--arch", ",".join(archs), "-j", str(jobs), "--out", str(out)]
                fh.write("$ " + " ".join(cmd) + "\n")
                fh.flush()
                done = subprocess.run(cmd, cwd=tree, env=env, stdout=fh, stderr=subprocess.STDOUT)
                if done.returncode != 0:
                    raise RuntimeError(f"pykern build in {tree} failed ({done.returncode}); see {log}")


# ---- reading one build ---------------------------------------------------------------------------

@dataclass
class Kernel:
    name: str
    text: str                       # PTX of the entry, or the disassembly without addresses/encodings
    instructions: int
    stats: dict[str, object] = field(default_factory=dict)


ENTRY = re.compile(r"^(?:\.visible\s+|\.weak\s+)?\.(entry|func)\s+(?:\([^)]*\)\s*)?([\w$.]+)")


def ptx_functions(ptx: str) -> tuple[dict[str, str], str]:
    """The PTX of each ``.entry`` and ``.func`` (to its matching closing brace: an inline asm block,
    ``pk.load``'s cache hints, may close at column 0 inside an entry), and the rest."""
    funcs: dict[str, str] = {}
    rest: list[str] = []
    name, body, depth = None, [], 0
    for line in ptx.splitlines():
        if name is None:
            m = ENTRY.match(line)
            if m:
                name, body, depth = ("func " if m.group(1) == "func" else "") + m.group(2), [line], 0
                if line.rstrip().endswith(";"):     # a declaration (a prototype), not a definition
                    rest.append(line)
                    name = None
            else:
                rest.append(line)
        else:
            body.append(line)
            code = line.split("//", 1)[0]
            opened = depth > 0 or "{" in code
            depth += code.count("{") - code.count("}")
            if opened and depth == 0:
                funcs[name] = "\n".join(body)
                name = None
    return funcs, "\n".join(rest)


def ptx_instructions(body: str) -> int:
    count = 0
    for line in body.splitlines():
        s = line.strip()
        if s and line[:1] in "\t " and not s.startswith((".", "//", "{", "}", ")")) and not s.endswith(":"):
            count += 1
    return count


PTXAS_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
PTXAS_PROPS = re.compile(r"Function properties for ([\w$.]+)")
PTXAS_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
PTXAS_USED = re.compile(r"Used (\d+) registers(?:, used (\d+) barriers)?(?:, (\d+) bytes smem)?")


def ptxas_stats(path: Path, arch: str, ptxas: str) -> dict[str, dict[str, int]]:
    """Per entry: what ``ptxas -v`` says (registers, spill bytes, stack frame, static shared memory)."""
    out = run(["nice", "-n", "10", ptxas, "-v", f"-arch={arch}", str(path), "-o", os.devnull])
    stats: dict[str, dict[str, int]] = {}
    current = None
    for line in out.splitlines():
        if m := PTXAS_ENTRY.search(line):
            current = stats.setdefault(m.group(1), {})
        elif m := PTXAS_PROPS.search(line):  # a device function's own properties are not the entry's
            current = stats.get(m.group(1))
        elif current is not None and (m := PTXAS_FRAME.search(line)):
            current.update(stack=int(m[1]), spill_stores=int(m[2]), spill_loads=int(m[3]))
        elif current is not None and (m := PTXAS_USED.search(line)):
            current.update(registers=int(m[1]), barriers=int(m[2] or 0), smem=int(m[3] or 0))
    return stats


def neutral_names(body: str) -> str:
    """An entry's PTX with the names that say where it sits, not what it does, made neutral: LLVM
    numbers basic-block labels by the function's place in the module (``$L__BB12_3``), and a shared
    array demoted into its kernel keeps the name of the kernel it was made for (``k_$_tile``); a
    kernel written under a second name (``targets/aliases.py``) carries its primary's."""
    return re.sub(r"\b\w+_\$_", "K_$_", re.sub(r"\$L__BB\d+_", "$L__BBn_", body))


def read_ptx(path: Path, arch: str, ptxas: str) -> tuple[dict[str, Kernel], str]:
    funcs, rest = ptx_functions(path.read_text())
    stats = ptxas_stats(path, arch, ptxas) if ptxas else {}  # --no-ptxas: the PTX text alone
    kernels = {name: Kernel(name, neutral_names(body), ptx_instructions(body), stats.get(name, {}))
               for name, body in funcs.items() if not name.startswith("func ")}
    # the module's own lines, not their order among the entries or LLVM's comments
    rest = "\n".join(line for line in rest.splitlines() if line.strip() and not line.lstrip().startswith("//"))
    # device functions ptxas kept out of line are part of what every caller runs
    shared = rest + "".join(f"\n{body}" for name, body in sorted(funcs.items()) if name.startswith("func "))
    return kernels, shared


#: code-object metadata a kernel is compared by (the rest of its keys must be equal too)
AMD_KEYS = {".vgpr_count": "vgpr", ".agpr_count": "agpr", ".sgpr_count": "sgpr",
            ".vgpr_spill_count": "vgpr_spill", ".sgpr_spill_count": "sgpr_spill",
            ".group_segment_fixed_size": "lds", ".private_segment_fixed_size": "scratch"}
META_LINE = re.compile(r"^(  - |    )(\.[\w]+):\s*(.*)$")


def amd_metadata(path: Path, readobj: str) -> dict[str, dict[str, str]]:
    """Each kernel's scalar metadata from ``llvm-readobj --notes`` (its YAML, read line by line:
    kernel-level keys sit at indent 4, arguments deeper)."""
    text = run([readobj, "--notes", str(path)])
    kernels: list[dict[str, str]] = []
    inside = False
    for line in text.splitlines():
        if line.startswith("amdhsa.kernels:"):
            inside = True
            continue
        if inside and line and not line.startswith(" "):
            inside = False
        if not inside:
            continue
        if line.startswith("  - "):
            kernels.append({})
        m = META_LINE.match(line)
        if m and kernels and m.group(3):
            kernels[-1][m.group(2)] = m.group(3).strip()
    return {k[".name"]: k for k in kernels if ".name" in k}


SYMBOL = re.compile(r"^[0-9a-f]+ <([^>]+)>:$")
FUNC = re.compile(r"^([0-9a-f]+)\s.*\sF\s+\.text\s+([0-9a-f]+)\s+(?:\.\w+\s+)?(\S+)$")
ADDRESS = re.compile(r"//\s*([0-9A-Fa-f]+):")


def amd_disassembly(path: Path, objdump: str) -> dict[str, list[str]]:
    """Each function symbol's instructions from ``llvm-objdump -d``, within the symbol's size (the
    last kernel of a section would otherwise take in the padding and whatever bytes follow), without
    the ``// address: encoding`` comment (a branch's operand is an offset, so identical code reads
    identically wherever it is placed)."""
    sizes = {}
    for line in run([objdump, "-t", str(path)]).splitlines():
        if m := FUNC.match(line):
            sizes[m.group(3)] = (int(m.group(1), 16), int(m.group(2), 16))
    out = run([objdump, "-d", "--no-show-raw-insn", str(path)])
    code: dict[str, list[str]] = {}
    current, span = None, (0, 0)
    for line in out.splitlines():
        if m := SYMBOL.match(line):
            current = code.setdefault(m.group(1), [])
            span = sizes.get(m.group(1), (0, 1 << 64))
        elif current is not None and line.startswith("\t"):
            at = ADDRESS.search(line)
            if at and not span[0] <= int(at.group(1), 16) < span[0] + span[1]:
                continue
            insn = line.split("//", 1)[0].strip()
            if insn:
                current.append(" ".join(insn.split()))
        elif not line.strip():
            current = None
    # two symbols of one function (a kernel and its second name, targets/aliases.py): objdump lists
    # the code under one of them; both are that code
    by_place = {place: name for name, place in sizes.items() if code.get(name)}
    for name, place in sizes.items():
        if not code.get(name) and place in by_place:
            code[name] = code[by_place[place]]
    return code


def read_hsaco(path: Path, readobj: str, objdump: str) -> tuple[dict[str, Kernel], str]:
    meta = amd_metadata(path, readobj)
    code = amd_disassembly(path, objdump)
    kernels = {}
    for name, m in meta.items():
        insns = code.get(name, [])
        stats = {short: int(m[key]) for key, short in AMD_KEYS.items() if key in m}
        stats["meta"] = {k: v for k, v in m.items() if k not in AMD_KEYS}
        kernels[name] = Kernel(name, "\n".join(insns), len(insns), stats)
    # code outside the kernels' symbols (device functions kept out of line)
    shared = "\n".join(f"<{s}>\n" + "\n".join(i) for s, i in sorted(code.items()) if s not in meta)
    return kernels, shared


#: files already read, by content: a module both sides built byte-identically is read (and run
#: through ptxas, minutes for the stdlib) once; the same input gives the tools' same answer
_read: dict[tuple[str, str], tuple[dict[str, Kernel], str]] = {}
#: build folder -> (arch, module) -> the file's sha256
_digests: dict[Path, dict[tuple[str, str], str]] = {}


def load_build(out: Path, tools: dict[str, str], targets: list[str]) -> dict[tuple[str, str], tuple[dict[str, Kernel], str]]:
    """(arch, module) -> (kernels by name, the module's code outside its kernels) for a build folder,
    for the archs in ``targets``."""
    manifest = json.loads((out / "manifest.json").read_text())
    result = {}
    digests = _digests.setdefault(out.resolve(), {})
    for entry in manifest["modules"]:
        if entry["arch"] not in targets:
            continue
        path = out / entry["file"]
        key = (hashlib.sha256(path.read_bytes()).hexdigest(), entry["arch"])
        if key not in _read:
            if entry["target"] == "cuda":
                _read[key] = read_ptx(path, entry["arch"], tools["ptxas"])
            else:
                _read[key] = read_hsaco(path, tools["readobj"], tools["objdump"])
        result[(entry["arch"], entry["module"])] = _read[key]
        digests[(entry["arch"], entry["module"])] = key[0]
    return result


# ---- comparing -------------------------------------------------------------------------------------

def numbers(k: Kernel) -> dict[str, int]:
    row = {k2: v for k2, v in k.stats.items() if isinstance(v, int)}
    row["instructions"] = k.instructions
    return row


def totals(kernels: list[Kernel]) -> dict[str, int]:
    """Figures over an arch's kernels, to show what was read (and where two sides differ, by how much)."""
    rows = [numbers(k) for k in kernels]
    spills = ("spill_stores", "spill_loads", "vgpr_spill", "sgpr_spill")
    out = {"kernels": len(rows), "instructions": sum(r["instructions"] for r in rows),
           "with_spills": sum(any(r.get(s, 0) for s in spills) for r in rows)}
    for key in ("registers", "vgpr", "sgpr", "agpr", "smem", "lds", "scratch", "stack"):
        if any(key in r for r in rows):
            out[f"max_{key}"] = max(r.get(key, 0) for r in rows)
    return out


def compare(a: dict, b: dict, targets: list[str], digests: tuple[dict, dict] = ({}, {})) -> dict:
    report: dict = {"archs": {}, "identical": True}
    for arch in targets:
        rows = {"kernels": 0, "identical": 0, "different": [], "only_a": [], "only_b": [], "shared_code": [],
                "modules": 0, "files_identical": 0}
        modules = sorted({m for (t, m) in a if t == arch} | {m for (t, m) in b if t == arch})
        for module in modules:
            rows["modules"] += 1
            da, db = digests[0].get((arch, module)), digests[1].get((arch, module))
            rows["files_identical"] += da is not None and da == db
            ka, sa = a.get((arch, module), ({}, ""))
            kb, sb = b.get((arch, module), ({}, ""))
            if sa != sb:
                rows["shared_code"].append(module)
            rows["only_a"] += [f"{module}/{n}" for n in sorted(set(ka) - set(kb))]
            rows["only_b"] += [f"{module}/{n}" for n in sorted(set(kb) - set(ka))]
            for name in sorted(set(ka) & set(kb)):
                rows["kernels"] += 1
                x, y = ka[name], kb[name]
                if x.text == y.text and x.stats == y.stats:
                    rows["identical"] += 1
                    continue
                na, nb = numbers(x), numbers(y)
                rows["different"].append({
                    "kernel": f"{module}/{name}", "code_identical": x.text == y.text,
                    "changed": {key: [na.get(key), nb.get(key)] for key in sorted(set(na) | set(nb))
                                if na.get(key) != nb.get(key)},
                    "metadata_changed": sorted(key for key in set(x.stats.get("meta", {})) | set(y.stats.get("meta", {}))
                                               if x.stats.get("meta", {}).get(key) != y.stats.get("meta", {}).get(key))})
        rows["totals"] = [totals([k for (t, _), (ks, _) in side.items() if t == arch for k in ks.values()])
                          for side in (a, b)]
        if not modules:
            rows["missing"] = True
        if rows["different"] or rows["only_a"] or rows["only_b"] or rows["shared_code"] or not modules:
            report["identical"] = False
        report["archs"][arch] = rows
    return report


def render(report: dict, label_a: str, label_b: str) -> str:
    lines = [f"codegen {label_a} -> {label_b}", "",
             "| arch | modules (files byte-identical) | kernels in both | identical | different | only in A "
             "| only in B | modules whose shared code differs |",
             "|---|---|---|---|---|---|---|---|"]
    for arch, r in report["archs"].items():
        lines.append(f"| {arch} | {r['modules']} ({r['files_identical']}) | {r['kernels']} | {r['identical']} "
                     f"| {len(r['different'])} | {len(r['only_a'])} | {len(r['only_b'])} "
                     f"| {', '.join(r['shared_code']) or '-'} |")
    for arch, r in report["archs"].items():
        ta, tb = r["totals"]
        lines.append(f"{arch} A: " + ", ".join(f"{k} {v}" for k, v in ta.items())
                     + ("" if ta == tb else "\n" + f"{arch} B: " + ", ".join(f"{k} {v}" for k, v in tb.items())))
    lines.append("")
    for arch, r in report["archs"].items():
        if r.get("missing"):
            lines.append(f"\n{arch}: no module built on either side")
        for d in r["different"]:
            what = ", ".join(f"{k} {v[0]} -> {v[1]}" for k, v in d["changed"].items()) or "same numbers"
            code = "same code" if d["code_identical"] else "code differs"
            meta = f"; metadata {', '.join(d['metadata_changed'])}" if d["metadata_changed"] else ""
            lines.append(f"{arch} {d['kernel']}: {code}; {what}{meta}")
        for side, key in (("A", "only_a"), ("B", "only_b")):
            if r[key]:
                lines.append(f"{arch} only in {side}: {' '.join(r[key])}")
    lines.append("")
    lines.append("every kernel identical" if report["identical"] else "DIFFERENCES (see above)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("a", metavar="REV_A", help="git revision or checkout folder (before)")
    p.add_argument("b", metavar="REV_B", help="git revision or checkout folder (after)")
    p.add_argument("--built", action="store_true",
                   help="REV_A and REV_B are existing `pykern build --out` folders: compare, build nothing")
    p.add_argument("--targets", default=DEFAULT_TARGETS, help=f"archs (default {DEFAULT_TARGETS})")
    p.add_argument("--modules", default="", help="comma-separated stdlib modules (default: all)")
    p.add_argument("--extra", default="stdlib_kernels.matmul",
                   help="package modules holding modules outside candle's eleven, built too where a "
                        "side has them (default stdlib_kernels.matmul; '' for none)")
    p.add_argument("--work", default=str(ROOT / "build" / "compare_codegen"),
                   help="where worktrees, caches and builds go (default build/compare_codegen)")
    p.add_argument("-j", "--jobs", type=int, default=1, help="build processes a side (default 1)")
    p.add_argument("--keep", action="store_true", help="keep the worktrees made for revisions")
    p.add_argument("--json", metavar="FILE", help="also write the full report as JSON")
    p.add_argument("--no-ptxas", action="store_true",
                   help="compare PTX by its text only, without ptxas's figures (ptxas -v of the whole "
                        "stdlib takes many minutes; identical PTX assembles identically)")
    args = p.parse_args(argv)
    targets = [t for t in args.targets.split(",") if t]
    modules = [m for m in args.modules.split(",") if m]
    tools = {"ptxas": tool(["ptxas"], "PTXAS") if any(t.startswith("sm_") for t in targets) and not args.no_ptxas else "",
             "readobj": tool(["llvm-readobj-19", "llvm-readobj"], "LLVM_READOBJ"),
             "objdump": tool(["llvm-objdump-19", "llvm-objdump"], "LLVM_OBJDUMP")}
    try:
        if args.built:
            outs = [Path(args.a), Path(args.b)]
        else:
            work = Path(args.work).resolve()
            outs, made = [], []
            for side, rev in (("a", args.a), ("b", args.b)):
                tree, is_new = checkout(rev, work / f"tree-{side}")
                if is_new:
                    made.append(tree)
                out = work / side / "out"
                if out.exists():
                    shutil.rmtree(out)
                cache = work / side / "cache"
                if cache.exists():
                    shutil.rmtree(cache)
                print(f"building {rev} ({tree}) for {','.join(targets)} ...", file=sys.stderr, flush=True)
                build(tree, out, cache, targets, modules, [f for f in args.extra.split(",") if f], args.jobs,
                      work / f"build-{side}.log")
                outs.append(out)
            if not args.keep:
                for tree in made:
                    run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)])
        sides = [load_build(o, tools, targets) for o in outs]
    except (RuntimeError, FileNotFoundError) as exc:
        print(f"compare_codegen: {exc}", file=sys.stderr)
        return 2
    if modules:  # --built folders may hold more; the extra files' modules are named after them
        keep = set(modules) | {m.rsplit(".", 1)[-1] for m in args.extra.split(",") if m}
        sides = [{k: v for k, v in s.items() if k[1] in keep} for s in sides]
    report = compare(sides[0], sides[1], targets, tuple(_digests.get(o.resolve(), {}) for o in outs))
    print(render(report, args.a, args.b))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    return 0 if report["identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
