"""Reading AMDGPU code objects (HSACO): the ELF header, symbols, kernel descriptors and the
MessagePack metadata note.

It is small on purpose: a linked HSACO is a little-endian ELF64 shared object, and everything
pykern needs is in the header, ``.dynsym``, the 64-byte ``<kernel>.kd`` descriptors and one
``NT_AMDGPU_METADATA`` note (llvm.org/docs/AMDGPUUsage.html). The compiler uses it to check the
argument ABI after linking, the HIP runtime to match a code object to a device, the CLI to print
register and occupancy reports, and the tests to check what LLVM produced.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

import msgpack

from ..errors import PykernError
from .amdgpu_archs import ArchInfo, arch_by_mach, arch_info, base_arch

EM_AMDGPU = 224
ET_DYN = 3
ELFOSABI_AMDGPU_HSA = 64
NT_AMDGPU_METADATA = 32
SHT_SYMTAB, SHT_NOTE, SHT_DYNSYM = 2, 7, 11
EF_AMDGPU_MACH = 0xFF
#: EI_ABIVERSION -> code object version (v4 = 2, v5 = 3, v6 = 4)
_ABI_TO_COV = {2: 4, 3: 5, 4: 6}
_FEATURE_STATE = {0: "unsupported", 1: "any", 2: "off", 3: "on"}


class CodeObjectError(PykernError):
    """Bytes that are not a linked AMDGPU code object, or one whose parts disagree."""


@dataclass(frozen=True)
class Symbol:
    name: str
    value: int
    size: int
    type: int  # STT_*: 1 object, 2 func
    bind: int  # STB_*: 0 local, 1 global
    section: str


@dataclass(frozen=True)
class KernelArg:
    """One entry of a kernel's ``.args``: explicit parameters first, then the hidden ones."""

    name: str
    offset: int
    size: int
    value_kind: str  # global_buffer, by_value, dynamic_shared_pointer, hidden_*
    address_space: str | None = None  # global, constant, local, generic (pointers only)
    access: str | None = None  # .actual_access when LLVM proved it (read_only, ...)

    @property
    def is_hidden(self) -> bool:
        return self.value_kind.startswith("hidden_")


@dataclass(frozen=True)
class KernelDescriptor:
    """The fields of ``<kernel>.kd`` that the hardware dispatch reads."""

    group_segment_fixed_size: int
    private_segment_fixed_size: int
    kernarg_size: int
    entry_offset: int
    rsrc3: int
    rsrc1: int
    rsrc2: int
    properties: int

    @property
    def wave_size(self) -> int:
        return 32 if self.properties & (1 << 10) else 64  # ENABLE_WAVEFRONT_SIZE32

    @classmethod
    def parse(cls, raw: bytes) -> "KernelDescriptor":
        g, p, ka = struct.unpack_from("<III", raw, 0)
        (entry,) = struct.unpack_from("<q", raw, 16)
        r3, r1, r2 = struct.unpack_from("<III", raw, 44)
        (props,) = struct.unpack_from("<H", raw, 56)
        return cls(g, p, ka, entry, r3, r1, r2, props)


@dataclass
class Kernel:
    """A kernel as its metadata and descriptor describe it."""

    name: str
    symbol: str
    args: list[KernelArg]
    kernarg_segment_size: int
    kernarg_segment_align: int
    vgpr_count: int
    sgpr_count: int
    agpr_count: int
    vgpr_spill_count: int
    sgpr_spill_count: int
    lds: int  # .group_segment_fixed_size: static LDS bytes
    scratch: int  # .private_segment_fixed_size: scratch bytes per work-item
    wavefront_size: int
    max_flat_workgroup_size: int
    uses_dynamic_stack: bool
    descriptor: KernelDescriptor | None
    arch: ArchInfo | None = field(default=None, repr=False)
    raw: dict = field(default_factory=dict, repr=False)

    @property
    def explicit_args(self) -> list[KernelArg]:
        return [a for a in self.args if not a.is_hidden]

    @property
    def spills(self) -> int:
        return self.vgpr_spill_count + self.sgpr_spill_count

    def occupancy(self, block_size: int | None = None, dynamic_lds: int = 0) -> int:
        """Estimated resident waves per SIMD, limited by VGPRs, SGPRs (gfx9) and LDS, for blocks of
        ``block_size`` work-items (default: the kernel's maximum). An estimate: it ignores scratch,
        barrier slots and the CU-mode/WGP-mode choice (RDNA is taken in WGP mode, HIP's default)."""
        info = self.arch
        if info is None:
            raise CodeObjectError(f"no arch table row for kernel {self.name}; cannot estimate occupancy")
        wave = self.wavefront_size
        scale = 1 if info.is_cdna else wave // 32  # RDNA wave64 halves the per-lane register file
        total, granule = info.vgprs_per_simd // scale, max(1, info.vgpr_granule // scale)
        used = _align(max(self.vgpr_count, 1), 4) + self.agpr_count if info.is_cdna else self.vgpr_count
        limits = [info.max_waves_per_simd, total // _align(max(used, 1), granule)]
        if info.sgprs_per_simd:
            limits.append(info.sgprs_per_simd // _align(max(self.sgpr_count, 1), 16))
        lds = self.lds + dynamic_lds
        if lds:
            block = block_size or self.max_flat_workgroup_size
            waves_per_group = -(-block // wave)
            groups = info.lds_per_cu // lds
            limits.append(groups * waves_per_group // info.simds_per_cu)
        return max(0, min(limits))


class CodeObject:
    """A parsed HSACO. Construction validates it: ELFCLASS64, little-endian, ``EM_AMDGPU``,
    ``ET_DYN`` (linked, as HIP requires), OSABI ``AMDGPU_HSA``, an AMDGPU metadata note, an arch
    that agrees between e_flags and metadata, and a ``.kd`` descriptor symbol per kernel."""

    def __init__(self, data: bytes):
        self.data = bytes(data)
        self._parse_header()
        self.sections = self._parse_sections()
        self.symbols: dict[str, Symbol] = {s.name: s for s in self._parse_symbols() if s.name}
        self.metadata = self._parse_metadata()
        self._parse_target()
        self.kernels: dict[str, Kernel] = {k.name: k for k in map(self._kernel, self.metadata["amdhsa.kernels"])}

    # ---- ELF --------------------------------------------------------------------------------------
    def _parse_header(self) -> None:
        d = self.data
        if len(d) < 64 or d[:4] != b"\x7fELF":
            raise CodeObjectError("not an ELF file")
        if d[4] != 2 or d[5] != 1:
            raise CodeObjectError(f"not a little-endian ELF64 file (class {d[4]}, data {d[5]})")
        self.osabi, self.abi_version = d[7], d[8]
        (self.elf_type, self.machine, _, _, _, self._shoff, self.e_flags, _, _, _, self._shentsize,
         self._shnum, self._shstrndx) = struct.unpack_from("<HHIQQQIHHHHHH", d, 16)
        if self.machine != EM_AMDGPU:
            raise CodeObjectError(f"e_machine is {self.machine}, not EM_AMDGPU ({EM_AMDGPU})")
        if self.osabi != ELFOSABI_AMDGPU_HSA:
            raise CodeObjectError(f"EI_OSABI is {self.osabi}, not ELFOSABI_AMDGPU_HSA (64)")
        if self.elf_type != ET_DYN:
            raise CodeObjectError(f"e_type is {self.elf_type}, not ET_DYN: HIP loads only linked "
                                  "code objects (link with ld.lld -shared)")
        self.code_object_version = _ABI_TO_COV.get(self.abi_version)

    def _parse_sections(self) -> list[dict]:
        raw = [struct.unpack_from("<IIQQQQIIQQ", self.data, self._shoff + i * self._shentsize)
               for i in range(self._shnum)]
        keys = ("name_off", "type", "flags", "addr", "offset", "size", "link", "info", "addralign", "entsize")
        secs = [dict(zip(keys, r)) for r in raw]
        if secs and self._shstrndx < len(secs):
            for s in secs:
                s["name"] = self._cstr(secs[self._shstrndx]["offset"] + s["name_off"])
        return secs

    def _cstr(self, at: int) -> str:
        return self.data[at:self.data.index(b"\0", at)].decode("utf-8", "replace")

    def _parse_symbols(self):
        tables = [s for s in self.sections if s["type"] == SHT_DYNSYM] or \
                 [s for s in self.sections if s["type"] == SHT_SYMTAB]
        for tab in tables:
            strtab = self.sections[tab["link"]]["offset"]
            for off in range(tab["offset"], tab["offset"] + tab["size"], tab["entsize"] or 24):
                name_off, info, _, shndx, value, size = struct.unpack_from("<IBBHQQ", self.data, off)
                sec = self.sections[shndx].get("name", "") if 0 < shndx < len(self.sections) else ""
                yield Symbol(self._cstr(strtab + name_off), value, size, info & 0xF, info >> 4, sec)

    def _notes(self):
        for sec in self.sections:
            if sec["type"] != SHT_NOTE:
                continue
            off, end = sec["offset"], sec["offset"] + sec["size"]
            while off + 12 <= end:
                namesz, descsz, ntype = struct.unpack_from("<III", self.data, off)
                name_at = off + 12
                desc_at = name_at + _align(namesz, 4)
                name = self.data[name_at:name_at + namesz].rstrip(b"\0").decode("ascii", "replace")
                yield name, ntype, self.data[desc_at:desc_at + descsz]
                off = desc_at + _align(descsz, 4)

    def _parse_metadata(self) -> dict:
        for name, ntype, desc in self._notes():
            if name == "AMDGPU" and ntype == NT_AMDGPU_METADATA:
                try:
                    meta = msgpack.unpackb(desc, raw=False, strict_map_key=False)
                except (ValueError, msgpack.UnpackException) as exc:
                    raise CodeObjectError(f"the AMDGPU metadata note is not valid MessagePack: {exc}") from exc
                if "amdhsa.kernels" not in meta or "amdhsa.target" not in meta:
                    raise CodeObjectError("the AMDGPU metadata note lacks amdhsa.kernels/amdhsa.target")
                return meta
        raise CodeObjectError("no NT_AMDGPU_METADATA note (owner AMDGPU, type 32)")

    def _parse_target(self) -> None:
        self.target_id = self.metadata["amdhsa.target"]
        self.arch = base_arch(self.target_id)
        mach = arch_by_mach(self.e_flags & EF_AMDGPU_MACH)
        if mach is not None and mach.name != self.arch:
            raise CodeObjectError(f"e_flags say {mach.name} but the metadata says {self.target_id}")
        try:
            self.arch_info: ArchInfo | None = arch_info(self.arch)
        except KeyError:
            self.arch_info = None

    # ---- kernels ----------------------------------------------------------------------------------
    def _descriptor(self, sym: Symbol) -> KernelDescriptor:
        for sec in self.sections:
            if sec.get("name") == sym.section and sec["addr"] <= sym.value < sec["addr"] + sec["size"]:
                at = sec["offset"] + sym.value - sec["addr"]
                return KernelDescriptor.parse(self.data[at:at + 64])
        raise CodeObjectError(f"descriptor {sym.name} points outside its section {sym.section}")

    def _kernel(self, m: dict) -> Kernel:
        name, kd = m[".name"], m.get(".symbol", m[".name"] + ".kd")
        sym = self.symbols.get(kd)
        if sym is None or not kd.endswith(".kd"):
            raise CodeObjectError(f"kernel {name} has no kernel descriptor symbol {kd!r}")
        args = [KernelArg(a.get(".name", ""), a[".offset"], a[".size"], a[".value_kind"],
                          a.get(".address_space"), a.get(".actual_access")) for a in m.get(".args", [])]
        return Kernel(
            name=name, symbol=kd, args=args,
            kernarg_segment_size=m[".kernarg_segment_size"], kernarg_segment_align=m[".kernarg_segment_align"],
            vgpr_count=m[".vgpr_count"], sgpr_count=m[".sgpr_count"], agpr_count=m.get(".agpr_count", 0),
            vgpr_spill_count=m.get(".vgpr_spill_count", 0), sgpr_spill_count=m.get(".sgpr_spill_count", 0),
            lds=m[".group_segment_fixed_size"], scratch=m[".private_segment_fixed_size"],
            wavefront_size=m[".wavefront_size"], max_flat_workgroup_size=m[".max_flat_workgroup_size"],
            uses_dynamic_stack=bool(m.get(".uses_dynamic_stack", False)),
            descriptor=self._descriptor(sym) if sym.size >= 64 else None, arch=self.arch_info, raw=m)

    # ---- summaries --------------------------------------------------------------------------------
    @property
    def xnack(self) -> str:
        return _FEATURE_STATE[(self.e_flags >> 8) & 3]

    @property
    def sramecc(self) -> str:
        return _FEATURE_STATE[(self.e_flags >> 10) & 3]

    def describe(self) -> str:
        """A plain-text report: one line per kernel (what ``pykern show`` prints)."""
        lines = [f"{self.target_id}  code object v{self.code_object_version}  e_flags {self.e_flags:#x}"]
        for k in self.kernels.values():
            occ = k.occupancy() if k.arch else "?"
            lines.append(
                f"  {k.name}: wave{k.wavefront_size} vgpr {k.vgpr_count} agpr {k.agpr_count} "
                f"sgpr {k.sgpr_count} spills {k.spills} lds {k.lds} scratch {k.scratch} "
                f"max_block {k.max_flat_workgroup_size} kernarg {k.kernarg_segment_size} "
                f"waves/SIMD {occ}")
        return "\n".join(lines)


def _align(n: int, a: int) -> int:
    return -(-n // a) * a
