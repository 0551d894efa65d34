"""One compiled kernel under two names: candle's second names for the same kernel (``upowf_f8e4m3``
for ``upowf_fp8_e4m3``, 72 of the stdlib's 1,103 kernels) were lowered, optimised and code-generated
twice, 9% of a cold sm_90 build. The compiler now compiles the first name only
(``compiler.kernel_aliases``) and the targets write the result under the second name too, after
LLVM, without compiling anything again:

* PTX: the ``.entry`` block is copied with its name (and its parameters' names) changed: the same
  instructions, which the driver JIT-compiles as two kernels.
* AMDGPU: in the relocatable object, before ``ld.lld``, each alias gets two symbols, ``alias`` (at
  the function's code) and ``alias.kd`` (at the function's 64-byte kernel descriptor; its code
  entry offset is relative to the descriptor, so one descriptor serves both names), and its own
  entry in the code object's metadata note (the primary's, with ``.name`` and ``.symbol`` changed).
  The linker sees two global kernels that share their bytes; HIP looks a kernel up by the
  metadata's ``.symbol``, so both load and launch.
"""
from __future__ import annotations

import re
import struct

import msgpack

from ..errors import CompileError

SHT_SYMTAB, SHT_STRTAB, SHT_NOTE = 2, 3, 7
NT_AMDGPU_METADATA = 32
_SHDR = struct.Struct("<IIQQQQIIQQ")
_SYM = struct.Struct("<IBBHQQ")


# ---- PTX -------------------------------------------------------------------------------------------
def _entry_block(ptx: str, name: str) -> str:
    """The text of kernel ``name``'s ``.entry`` from its ``// .globl`` line to its closing brace."""
    m = re.search(rf"^[ \t]*// \.globl\t{re.escape(name)}\n(?:.*\n)*?\.visible \.entry {re.escape(name)}\(", ptx, re.M)
    if m is None:
        m = re.search(rf"^\.visible \.entry {re.escape(name)}\(", ptx, re.M)
    if m is None:
        raise CompileError(f"kernel {name} missing from the PTX: no .entry to alias")
    body = ptx.index("\n{\n", m.end()) + 1
    return ptx[m.start():_matching_brace(ptx, body) + 1] + "\n"


def _matching_brace(ptx: str, at: int) -> int:
    """The index of the ``}`` closing the ``{`` at ``at``. Counted, not found by its column: inline asm
    blocks (``pk.load``'s cache hints) open with an indented ``{`` and may close at column 0."""
    depth = 0
    for line_start, line in _lines_from(ptx, at):
        code = line.split("//", 1)[0]
        for k, ch in enumerate(code):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    return line_start + k
    raise CompileError("unbalanced braces in the PTX: no end to the .entry to alias")


def _lines_from(text: str, at: int):
    while at < len(text):
        nl = text.find("\n", at)
        nl = len(text) if nl < 0 else nl
        yield at, text[at:nl]
        at = nl + 1


def ptx_with_aliases(ptx: str, aliases: dict[str, str]) -> str:
    """``ptx`` with a copy of the primary's ``.entry`` under each alias's name (``{alias: primary}``)."""
    if not aliases:
        return ptx
    out = [ptx.rstrip("\n") + "\n"]
    for alias, primary in aliases.items():
        block = _entry_block(ptx, primary)
        p = re.escape(primary)
        block = re.sub(rf"(// \.globl\t|\.entry ){p}\b", lambda m: m.group(1) + alias, block, count=2)
        block = re.sub(rf"\b{p}_param_(\d+)\b", lambda m: f"{alias}_param_{m.group(1)}", block)
        out.append("\n" + block)
    return "".join(out)


# ---- AMDGPU relocatable object ------------------------------------------------------------------
def _notes(data: bytes):
    off = 0
    while off + 12 <= len(data):
        namesz, descsz, ntype = struct.unpack_from("<III", data, off)
        name_at = off + 12
        desc_at = name_at + (-(-namesz // 4) * 4)
        end = desc_at + (-(-descsz // 4) * 4)
        yield data[name_at:name_at + namesz], ntype, data[desc_at:desc_at + descsz]
        off = end


def _note(name: bytes, ntype: int, desc: bytes) -> bytes:
    pad = lambda b: b + b"\0" * (-len(b) % 4)  # noqa: E731
    return struct.pack("<III", len(name), len(desc), ntype) + pad(name) + pad(desc)


def object_with_aliases(obj: bytes, aliases: dict[str, str]) -> bytes:
    """The relocatable AMDGPU object ``obj`` with each alias (``{alias: primary}``) a kernel of its
    own: symbols ``alias``/``alias.kd`` copied from the primary's, a metadata entry for it. The new
    symbol table, string table and note go at the end of the file and the section headers point at
    them (a relocatable object is read through its section headers only)."""
    if not aliases:
        return obj
    data = bytearray(obj)
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    heads = [list(_SHDR.unpack_from(data, shoff + i * shentsize)) for i in range(shnum)]
    symtabs = [i for i, h in enumerate(heads) if h[1] == SHT_SYMTAB]
    if len(symtabs) != 1:
        raise CompileError(f"AMDGPU object has {len(symtabs)} symbol tables, expected 1")
    st = symtabs[0]
    str_i = heads[st][6]
    strtab = bytearray(data[heads[str_i][4]:heads[str_i][4] + heads[str_i][5]])
    symtab = bytearray(data[heads[st][4]:heads[st][4] + heads[st][5]])

    def cstr(at: int) -> str:
        return strtab[at:strtab.index(b"\0", at)].decode()

    syms = {cstr(s[0]): s for s in (_SYM.unpack_from(symtab, o) for o in range(0, len(symtab), _SYM.size))}
    for alias, primary in aliases.items():
        for suffix in ("", ".kd"):
            src = syms.get(primary + suffix)
            if src is None:
                raise CompileError(f"kernel {primary}: no symbol {primary + suffix} in the object to alias")
            name_off = len(strtab)
            strtab += (alias + suffix).encode() + b"\0"
            symtab += _SYM.pack(name_off, *src[1:])

    note_i = meta = None
    for i, h in enumerate(heads):
        if h[1] == SHT_NOTE:
            for owner, ntype, desc in _notes(bytes(data[h[4]:h[4] + h[5]])):
                if owner.rstrip(b"\0") == b"AMDGPU" and ntype == NT_AMDGPU_METADATA:
                    note_i, meta = i, msgpack.unpackb(desc, raw=False, strict_map_key=False)
    if meta is None:
        raise CompileError("AMDGPU object has no metadata note to alias kernels in")
    kernels = {k[".name"]: k for k in meta["amdhsa.kernels"]}
    for alias, primary in aliases.items():
        entry = dict(kernels[primary])
        entry[".name"], entry[".symbol"] = alias, alias + ".kd"
        meta["amdhsa.kernels"].append(entry)
    h = heads[note_i]
    notes = b"".join(_note(owner, ntype, msgpack.packb(meta, use_bin_type=True)
                           if owner.rstrip(b"\0") == b"AMDGPU" and ntype == NT_AMDGPU_METADATA else desc)
                     for owner, ntype, desc in _notes(bytes(data[h[4]:h[4] + h[5]])))

    for i, blob in ((str_i, strtab), (st, symtab), (note_i, notes)):
        data += b"\0" * (-len(data) % 8)
        heads[i][4], heads[i][5] = len(data), len(blob)
        data += blob
    for i, h in enumerate(heads):
        _SHDR.pack_into(data, shoff + i * shentsize, *h)
    return bytes(data)
