"""The HSACO reader: fields per kernel for every arch, validation errors, occupancy arithmetic, and a
cross-check of the ELF parsing against pyelftools where it is installed."""
from __future__ import annotations

import io
import struct

import msgpack
import pytest
from llvmlite import ir

from pykern.targets.amdgpu import AmdgpuTarget
from pykern.targets.amdgpu_archs import ARCHS
from pykern.targets.base import I32, KernelSignature
from pykern.targets.codeobject import CodeObject, CodeObjectError, Kernel

F32, PTR = ir.FloatType(), ir.PointerType()
COPY = KernelSignature("copy", (("src", 8, 8, "ptr"), ("dst", 8, 8, "ptr"), ("n", 4, 4, "value")),
                       max_block_size=512)
TILE = KernelSignature("tile", (("x", 8, 8, "ptr"),))


def build(arch: str) -> tuple[AmdgpuTarget, bytes]:
    t = AmdgpuTarget(arch)
    m = t.new_module("co")
    f = t.begin_kernel(m, COPY, [PTR, PTR, I32], False)
    b = f.builder
    i = b.add(b.mul(f.block_idx(0), f.block_dim(0)), f.thread_idx(0))
    with b.if_then(b.icmp_signed("<", i, f.args[2])):
        b.store(b.load(b.gep(f.args[0], [i], source_etype=F32), typ=F32), b.gep(f.args[1], [i], source_etype=F32))
    f.ret()
    f = t.begin_kernel(m, TILE, [PTR], True)
    b = f.builder
    tile = f.shared_array("t", F32, 1024, 16)  # 4 KiB of LDS
    tid = f.thread_idx(0)
    b.store(b.load(b.gep(f.args[0], [tid], source_etype=F32), typ=F32), b.gep(tile, [tid], source_etype=F32))
    f.barrier(None)
    b.store(b.load(b.gep(tile, [b.xor(tid, I32(5))], source_etype=F32), typ=F32),
            b.gep(f.args[0], [tid], source_etype=F32))
    f.ret()
    return t, t.finalize(m, [COPY, TILE])


@pytest.fixture(scope="module", params=list(ARCHS))
def code(request):
    t, hsaco = build(request.param)
    return t, hsaco, CodeObject(hsaco)


def test_header_and_target(code):
    t, _, co = code
    cov = 6 if ARCHS[t.arch].is_generic else 5  # generic targets exist from code object v6
    assert (co.elf_type, co.machine, co.osabi, co.code_object_version) == (3, 224, 64, cov)
    assert co.arch == t.arch and co.arch_info is ARCHS[t.arch]
    assert co.e_flags & 0xFF == ARCHS[t.arch].mach
    # unset xnack/sramecc ("any") on CDNA, which has them; RDNA has neither
    assert (co.xnack, co.sramecc) == (("any", "any") if ARCHS[t.arch].is_cdna else ("unsupported", "unsupported"))


def test_kernel_fields(code):
    t, _, co = code
    assert set(co.kernels) == {"copy", "tile"}
    k = co.kernels["copy"]
    assert [(a.name, a.offset, a.size, a.value_kind, a.address_space) for a in k.explicit_args] == [
        ("src", 0, 8, "global_buffer", "global"), ("dst", 8, 8, "global_buffer", "global"),
        ("n", 16, 4, "by_value", None)]
    assert k.kernarg_segment_align == 8 and k.kernarg_segment_size >= 20
    assert k.kernarg_segment_size == k.descriptor.kernarg_size
    assert 0 < k.vgpr_count <= ARCHS[t.arch].max_vgprs_per_wave and 0 < k.sgpr_count <= 106
    assert (k.spills, k.scratch, k.lds) == (0, 0, 0)
    assert k.agpr_count == 0 and ("agpr_count" in str(k.raw)) == ARCHS[t.arch].is_cdna
    assert k.wavefront_size == ARCHS[t.arch].wave_size and k.max_flat_workgroup_size == 512
    tile = co.kernels["tile"]
    assert tile.lds == 4096 == tile.descriptor.group_segment_fixed_size
    assert co.symbols["tile.kd"].size == 64
    assert co.symbols["tile"].value == co.symbols["tile.kd"].value + tile.descriptor.entry_offset


def test_occupancy_estimate(code):
    t, _, co = code
    info = ARCHS[t.arch]
    assert co.kernels["copy"].occupancy() == info.max_waves_per_simd  # few registers, no LDS
    assert 1 <= co.kernels["tile"].occupancy() <= info.max_waves_per_simd
    assert all(name in co.describe() for name in ("copy", "tile", t.arch))


def _kernel(arch: str, vgpr=8, sgpr=16, agpr=0, lds=0, wave=None, max_block=1024) -> Kernel:
    info = ARCHS[arch]
    return Kernel("k", "k.kd", [], 0, 8, vgpr, sgpr, agpr, 0, 0, lds, 0, wave or info.wave_size, max_block,
                  False, None, info)


@pytest.mark.parametrize("arch,kw,waves", [
    ("gfx90a", dict(vgpr=128), 4),                       # 512 unified VGPRs / 128
    ("gfx90a", dict(vgpr=64, agpr=64), 4),               # AGPRs share the unified file
    ("gfx942", dict(vgpr=8, sgpr=100), 7),               # 800 SGPRs / 112
    ("gfx1030", dict(vgpr=64), 16),                      # 1024 / 64
    ("gfx1030", dict(vgpr=100), 9),                      # 1024 / 104 (granule 8)
    ("gfx1100", dict(vgpr=163), 9),                      # 1536 / 168 (granule 24)
    ("gfx1201", dict(vgpr=256), 5),                      # 1536 / 264 (256 rounded up to 24s)
    ("gfx1100", dict(vgpr=96, wave=64), 8),              # wave64 on RDNA: 768 / 96
    ("gfx90a", dict(lds=32768), 8),                      # 2 blocks of 1024 = 32 waves / 4 SIMDs
    ("gfx90a", dict(lds=32768, max_block=256), 2),       # 2 blocks of 256 = 8 waves / 4 SIMDs
    ("gfx1100", dict(lds=65536, max_block=128), 2),      # a WGP holds 2 such blocks: 8 waves / 4 SIMDs
])
def test_occupancy_arithmetic(arch, kw, waves):
    assert _kernel(arch, **kw).occupancy() == waves


def test_llvm_agrees_on_register_budgets():
    """``amdgpu-waves-per-eu`` makes LLVM cap VGPRs at (VGPRs per SIMD / waves): the table's
    register-file sizes must give the same caps (96 on gfx11/12 at 16 waves, 64 on gfx1030)."""
    for arch, waves, cap in (("gfx1100", 16, 96), ("gfx1201", 16, 96), ("gfx1030", 16, 64), ("gfx90a", 8, 64)):
        t = AmdgpuTarget(arch)
        m = t.new_module("pressure")
        sig = KernelSignature("k", (("p", 8, 8, "ptr"),), max_block_size=256)
        f = t.begin_kernel(m, sig, [PTR], False)
        f.function.attributes.add(f'"amdgpu-waves-per-eu"="{waves},{waves}"')
        b, tid = f.builder, f.thread_idx(0)
        vals = [b.load(b.gep(f.args[0], [b.add(tid, I32(i * 1024))], source_etype=F32), typ=F32) for i in range(160)]
        acc = F32(0.0)
        for i, v in enumerate(vals):
            acc = b.fadd(b.fmul(acc, vals[-1 - i]), v)
        b.store(acc, f.args[0])
        f.ret()
        k = CodeObject(t.finalize(m, [sig])).kernels["k"]
        info = ARCHS[arch]
        assert k.vgpr_count == cap == info.vgprs_per_simd // waves, arch
        assert k.occupancy() == waves


# ---- validation ---------------------------------------------------------------------------------
def _patched(data: bytes, offset: int, fmt: str, value) -> bytes:
    buf = bytearray(data)
    struct.pack_into(fmt, buf, offset, value)
    return bytes(buf)


def test_rejects_what_hip_cannot_load():
    t, hsaco = build("gfx1100")
    with pytest.raises(CodeObjectError, match="not an ELF"):
        CodeObject(b"\x7fELG" + hsaco[4:])
    with pytest.raises(CodeObjectError, match="ELF64"):
        CodeObject(_patched(hsaco, 4, "<B", 1))
    with pytest.raises(CodeObjectError, match="EM_AMDGPU"):
        CodeObject(_patched(hsaco, 18, "<H", 62))
    with pytest.raises(CodeObjectError, match="OSABI"):
        CodeObject(_patched(hsaco, 7, "<B", 0))
    with pytest.raises(CodeObjectError, match="ld.lld -shared"):  # an unlinked object
        m = t.new_module("rel")
        f = t.begin_kernel(m, TILE, [PTR], False)
        f.ret()
        CodeObject(t.target_machine.emit_object(t.optimize(m)))
    e_flags_at = 48
    other = ARCHS["gfx90a"].mach | (CodeObject(hsaco).e_flags & ~0xFF)
    with pytest.raises(CodeObjectError, match="e_flags say gfx90a"):
        CodeObject(_patched(hsaco, e_flags_at, "<I", other))


def test_missing_descriptor_and_note_are_errors():
    _, hsaco = build("gfx942")
    co = CodeObject(hsaco)
    # rename the copy.kd symbol's string so the metadata's .symbol no longer resolves
    at = hsaco.index(b"copy.kd\0")
    with pytest.raises(CodeObjectError, match="kernel descriptor symbol 'copy.kd'"):
        CodeObject(hsaco[:at] + b"cope.kd\0" + hsaco[at + 8:])
    # corrupt the note owner so no AMDGPU metadata note is found
    at = hsaco.index(b"AMDGPU\0")
    with pytest.raises(CodeObjectError, match="NT_AMDGPU_METADATA"):
        CodeObject(hsaco[:at] + b"XMDGPU\0" + hsaco[at + 7:])
    assert co.metadata["amdhsa.target"] == "amdgcn-amd-amdhsa--gfx942"


def test_matches_pyelftools():
    elftools = pytest.importorskip("elftools.elf.elffile", reason="pyelftools is not installed")
    _, hsaco = build("gfx90a")
    co = CodeObject(hsaco)
    elf = elftools.ELFFile(io.BytesIO(hsaco))
    assert elf.header["e_flags"] == co.e_flags and elf.header["e_machine"] in ("EM_AMDGPU", 224)
    theirs = {s.name: (s["st_value"], s["st_size"]) for s in elf.get_section_by_name(".dynsym").iter_symbols() if s.name}
    assert theirs == {n: (s.value, s.size) for n, s in co.symbols.items()}
    for sec in elf.iter_sections():
        if sec["sh_type"] == "SHT_NOTE":
            for note in sec.iter_notes():
                if note["n_name"] == "AMDGPU":
                    desc = note["n_descdata"]
                    desc = desc.encode("latin1") if isinstance(desc, str) else desc
                    assert msgpack.unpackb(desc, raw=False, strict_map_key=False) == co.metadata
