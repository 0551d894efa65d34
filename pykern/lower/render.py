"""The LLVM IR text of a module, as ``str(module)`` writes it, in about 60% of llvmlite's time.

Rendering the IR text was a tenth of a cold stdlib build's CPU (sm_90: 16.6 of 168 s; docs/cli.md,
"Cold build time"): llvmlite formats each instruction through several layers of method calls and
string caches. The instructions a kernel is mostly made of (arithmetic, loads, stores, branches,
compares, casts, selects, GEPs, phis) are written here directly, in exactly llvmlite's format; every
other instruction, and every global other than a defined function, is llvmlite's own ``str``. The
text is byte-identical (tests/lang/test_render.py compares whole stdlib modules for each target),
which llvmlite's pin in pyproject.toml keeps true.
"""
from __future__ import annotations

from llvmlite import ir
from llvmlite.ir import instructions as I

from ..targets.llvm_ext import _AllocaAS


def _md(ins) -> str:
    return ins._stringify_metadata(leading_comma=True) if ins.metadata else ""


def _generic(ins) -> str:  # binary operators: ``Instruction.descr``
    opname = " ".join([ins.opname] + ins.flags) if ins.flags else ins.opname
    ops = ", ".join([op.get_reference() for op in ins.operands])
    head = "" if isinstance(ins.type, ir.VoidType) else f"{ins.get_reference()} = "
    return f"{head}{opname} {ins.type} {ops}{_md(ins)}".rstrip()


def _load(ins) -> str:
    val, = ins.operands
    align = f", align {ins.align:d}" if ins.align is not None else ""
    return f"{ins.get_reference()} = load {ins.type}, {val.type} {val.get_reference()}{align}{_md(ins)}".rstrip()


def _store(ins) -> str:
    val, ptr = ins.operands
    align = f", align {ins.align:d}" if ins.align is not None else ""
    return f"store {val.type} {val.get_reference()}, {ptr.type} {ptr.get_reference()}{align}{_md(ins)}".rstrip()


def _branch(ins) -> str:  # ``Terminator.descr``
    ops = ", ".join([f"{op.type} {op.get_reference()}" for op in ins.operands])
    return f"{ins.opname} {ops}{_md(ins)}".rstrip()


def _compare(ins) -> str:
    a, b = ins.operands
    flags = "".join(" " + f for f in ins.flags)
    return (f"{ins.get_reference()} = {ins.opname}{flags} {ins.op} {a.type} {a.get_reference()}, "
            f"{b.get_reference()} {_md(ins)}").rstrip()


def _cast(ins) -> str:
    a, = ins.operands
    return f"{ins.get_reference()} = {ins.opname} {a.type} {a.get_reference()} to {ins.type} {_md(ins)}".rstrip()


def _select(ins) -> str:
    c, a, b = ins.operands
    return (f"{ins.get_reference()} = select {' '.join(ins.flags)} {c.type} {c.get_reference()}, "
            f"{a.type} {a.get_reference()}, {b.type} {b.get_reference()} {_md(ins)}").rstrip()


def _gep(ins) -> str:
    idx = ", ".join([f"{i.type} {i.get_reference()}" for i in ins.indices])
    op = "getelementptr inbounds" if ins.inbounds else "getelementptr"
    p = ins.pointer
    return f"{ins.get_reference()} = {op} {ins.source_etype}, {p.type} {p.get_reference()}, {idx} {_md(ins)}".rstrip()


def _phi(ins) -> str:
    incs = ", ".join([f"[{v.get_reference()}, {b.get_reference()}]" for v, b in ins.incomings])
    return f"{ins.get_reference()} = phi {' '.join(ins.flags)} {ins.type} {incs} {_md(ins)}".rstrip()


def _alloca(ins) -> str:  # ``llvm_ext._AllocaAS``: ``AllocaInstr.descr`` and its address space
    count = "".join([f", {op.type} {op.get_reference()}" for op in ins.operands])
    align = f", align {ins.align}" if ins.align is not None else ""
    space = f", addrspace({ins._as})" if ins._as else ""
    return f"{ins.get_reference()} = alloca {ins.allocated_type}{count}{align}{_md(ins)}{space}".rstrip()


def _call(ins) -> str:  # ``CallInstr._descr``, for calls with no attributes on their arguments
    callee = ins.operands[0]
    args = ", ".join([f"{a.type} {a.get_reference()}" for a in ins.operands[1:]])
    fnty = callee.function_type
    ty = fnty if fnty.var_arg else fnty.return_type
    cconv = f"{ins.cconv} " if ins.cconv else ""
    tail = f"{ins.tail} " if ins.tail else ""
    attrs = " " + " ".join(ins.attributes._to_list(fnty.return_type)) if ins.attributes else ""
    fm = " " + " ".join(ins.fastmath._to_list(fnty.return_type)) if ins.fastmath else ""
    head = "" if isinstance(ins.type, ir.VoidType) else f"{ins.get_reference()} = "
    return f"{head}{tail}{ins.opname}{fm} {cconv}{ty} {callee.get_reference()}({args}){attrs}{_md(ins)}".rstrip()


#: by exact class: a subclass (pykern's own instructions, llvm_ext.py) may format itself otherwise
_FAST = {I.Instruction: _generic, I.LoadInstr: _load, I.StoreInstr: _store, I.Branch: _branch,
         I.ConditionalBranch: _branch, I.ICMPInstr: _compare, I.FCMPInstr: _compare, I.CastInstr: _cast,
         I.SelectInstr: _select, I.GEPInstr: _gep, I.PhiInstr: _phi, _AllocaAS: _alloca}


def function_text(fn: ir.Function) -> str:
    """``str(fn)`` of a function with a body."""
    buf: list[str] = []
    fn.descr_prototype(buf)
    buf.append("{\n")
    fast = _FAST.get
    for blk in fn.blocks:
        buf.append(f"{blk._format_name()}:\n")
        for ins in blk.instructions:
            render = fast(type(ins))
            if render is None and type(ins) is I.CallInstr and not ins.arg_attributes:
                render = _call
            buf.append(f"  {ins if render is None else render(ins)}\n")
    buf.append("}\n")
    return "".join(buf)


def module_text(module: ir.Module) -> str:
    """``str(module)`` (llvmlite's ``Module.__repr__``), its defined functions through ``function_text``."""
    lines = [f'; ModuleID = "{module.name}"', f'target triple = "{module.triple}"',
             f'target datalayout = "{module.data_layout}"', ""]
    lines += [t.get_declaration() for t in module.get_identified_types().values()]
    lines += [(getattr(v, "_pykern_text", None) or function_text(v)) if type(v) is ir.Function and v.blocks else str(v)
              for v in module.globals.values()]
    lines += module._get_metadata_lines()
    return "\n".join(lines)
