"""``pykern`` — inspect generated code, report kernel resources, build code objects.

Argument parsing only; every command is a function in ``pykern.cli.commands``.
"""
from __future__ import annotations

import argparse
import sys

from .. import config
from ..errors import CompileError
from ..targets.registry import UnknownChoiceError
from ..version import __version__
from . import commands


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line (``pykern: error: ...``) and exit status 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}\n")


def _global_flags(p: argparse.ArgumentParser, default) -> None:
    """-v and --debug, before the command or after it (``pykern build ... -v``)."""
    p.add_argument("-v", "--verbose", action="store_true", default=default,
                   help="log cache hits/misses and compile times (pykern.compiler, pykern.cache)")
    p.add_argument("--debug", action="store_true", default=default, help="show Python tracebacks on errors")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="pykern", description="pykern's command line: list, show, resources, build, info, cache.")
    p.add_argument("--version", action="version", version=f"pykern {__version__}")
    _global_flags(p, False)
    after = argparse.ArgumentParser(add_help=False)
    _global_flags(after, argparse.SUPPRESS)  # absent after the command: the value before it stands
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    _add = sub.add_parser
    sub.add_parser = lambda *a, **k: _add(*a, parents=[after], **k)  # type: ignore[method-assign]

    s = sub.add_parser("list", help="the stdlib modules, or one module's kernels and signatures")
    s.add_argument("module", nargs="?", help="module name or index")

    s = sub.add_parser("show", help="a kernel's LLVM IR, optimised IR, assembly or code-object metadata")
    s.add_argument("module", help="stdlib module, or path/to/file.py:function for your own kernel")
    s.add_argument("kernel", nargs="?", help="kernel name (omit with file.py:function)")
    s.add_argument("--target", default="amdgpu", help="amdgpu (default), cuda or cpu")
    s.add_argument("--arch", help="e.g. gfx90a (amdgpu default), sm_90 (cuda default)")
    s.add_argument("--stage", default="asm", help="typed, ir, opt, asm (default) or meta (amdgpu)")
    s.add_argument("--sig", help="compile-time parameters of a generic kernel of your file, e.g. T=f32,W=4")

    s = sub.add_parser("resources", help="per-kernel registers, spills, LDS, scratch, occupancy (amdgpu)")
    s.add_argument("module", help="module name or index")
    s.add_argument("--arch", action="append", help="amdgpu arch (repeat or comma-separate; default gfx90a)")
    s.add_argument("--json", action="store_true", help="machine-readable output")

    s = sub.add_parser("build", help="compile modules to DIR/<arch>/<module>.hsaco|.ptx plus manifest.json")
    s.add_argument("modules", nargs="*",
                   help="stdlib modules, or your .py files (their kernels and pykern.Modules); default: the stdlib")
    s.add_argument("--target", default="amdgpu", help="amdgpu (default) or cuda")
    s.add_argument("--arch", action="append", help="comma-separated archs (default: the target's default)")
    s.add_argument("--out", required=True, help="output directory")
    s.add_argument("--emit-rust", action="store_true",
                   help="also make DIR a Rust crate (Cargo.toml, src/lib.rs) with candle-kernels' API")
    s.add_argument("-j", "--jobs", type=int, help="worker processes (default: every core)")
    s.add_argument("--force", action="store_true", help="rebuild entries the manifest says are up to date")

    sub.add_parser("info", help="versions, targets and archs, linker, GPUs, cache")

    s = sub.add_parser("cache", help="the compiled-artifact cache: ls, stats, clear, prune")
    s.add_argument("action", choices=("ls", "stats", "clear", "prune"))
    s.add_argument("--max", dest="max_size", help="prune: the size to prune to, e.g. 2G (default PYKERN_CACHE_MAX)")
    return p


def _setup_logging(verbose: bool) -> None:
    if verbose or config.verbose():
        config.enable_logging()


def run(args: argparse.Namespace) -> int:
    c = args.command
    if c == "list":
        return commands.cmd_list(args.module)
    if c == "show":
        return commands.cmd_show(args.module, args.kernel, args.target, args.arch, args.stage, sig=args.sig)
    if c == "resources":
        return commands.cmd_resources(args.module, args.arch, args.json)
    if c == "build":
        return commands.cmd_build(args.modules, args.target, args.arch, args.out, args.emit_rust, args.jobs,
                                  args.force)
    if c == "info":
        return commands.cmd_info()
    if c == "cache":
        return commands.cmd_cache(args.action, max_size=args.max_size)
    raise AssertionError(c)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    _setup_logging(args.verbose)
    try:
        return run(args)
    except (commands.UsageError, UnknownChoiceError) as exc:
        if args.debug:
            raise
        print(f"pykern: error: {exc}", file=sys.stderr)
        return 2
    except CompileError as exc:  # the kernel's own mistake: the message points at its source line
        if args.debug:
            raise
        print(f"pykern: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # `pykern show ... | head`
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # noqa: BLE001
        if args.debug:
            raise
        print(f"pykern: internal error: {type(exc).__name__}: {exc} (run with --debug for the traceback)",
              file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
