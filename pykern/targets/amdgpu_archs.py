"""The AMDGPU architectures pykern supports, one row each.

Everything arch-specific that the amdgpu target, the code-object reader and the HIP runtime need is a
field of ``ArchInfo``; nothing else in pykern spells an arch name. Adding an arch is one row in
``ARCHS`` (then the test-suite builds and checks its code objects like every other row's).

Sources: the register, LDS and wave limits are LLVM's (``AMDGPUBaseInfo.cpp``: ``getTotalNumVGPRs``,
``getVGPRAllocGranule``, ``getMaxWavesPerEU``, ``getAddressableNumSGPRs``) and AMD's ISA guides; the
e_flags machine values are read back from code objects that LLVM 22 emitted for each arch; the atomic
columns were measured by compiling each atomic with the metadata the amdgpu target attaches
(``!amdgpu.no.fine.grained.memory``/``!amdgpu.no.remote.memory``) and reading the assembly — the test
suite re-checks them.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ArchInfo:
    """The facts about one GPU architecture (one ``gfx`` name)."""

    name: str
    #: "cdna2", "cdna3", "cdna4", "rdna2", "rdna3", "rdna4" (RDNA 3.5 counts as "rdna3")
    generation: str
    #: the native (default) wavefront size; RDNA can also run wave64, CDNA only wave64
    wave_size: int
    #: ``e_flags & EF_AMDGPU_MACH`` in a code object for this arch
    mach: int
    #: VGPRs per lane in one SIMD's register file (what all resident waves share; AGPRs included
    #: on CDNA, where the file is unified), for the native wave size
    vgprs_per_simd: int
    #: VGPR allocation granule (registers per lane), for the native wave size
    vgpr_granule: int
    #: the most VGPRs one wave can address (arch VGPRs; CDNA adds as many AGPRs)
    max_vgprs_per_wave: int
    #: SGPRs per SIMD shared by resident waves; ``None`` where SGPRs never limit occupancy (gfx10+)
    sgprs_per_simd: int | None
    #: the most SGPRs one wave can address
    max_sgprs_per_wave: int
    #: LDS one workgroup may allocate, in bytes
    lds_per_workgroup: int
    #: LDS shared by the workgroups resident on one CU (CDNA) or WGP (RDNA, WGP mode)
    lds_per_cu: int
    #: SIMDs sharing that LDS (4 per CDNA CU, 4 per RDNA WGP)
    simds_per_cu: int
    max_waves_per_simd: int
    #: native fp8 conversion instructions and their encoding: "fnuz", "ocp" or None (software only)
    fp8: str | None
    #: float widths whose atomic fadd on *global* memory is one instruction (others: CAS loop)
    native_fadd_global: frozenset[int]
    #: float widths whose atomic fadd on LDS is one instruction
    native_fadd_shared: frozenset[int]
    #: float widths whose atomic fmin/fmax on global memory is one instruction
    native_fminmax_global: frozenset[int]
    #: the LLVM generic target whose code objects also run on this arch (code object v6), if any
    generic_target: str | None = None
    #: the first LLVM release whose tools (``llvm-objdump``, ``llvm-readobj``) know this arch
    llvm_tools_since: int = 19

    @property
    def is_generic(self) -> bool:
        """An LLVM generic target (``gfx11-generic``...): one object for a family, code object v6+,
        the instructions every member has."""
        return self.name.endswith("-generic")

    @property
    def is_cdna(self) -> bool:
        return self.generation.startswith("cdna")

    @property
    def dot4_mixed_sign(self) -> bool:
        """``v_dot4_i32_iu8`` (``llvm.amdgcn.sudot4``: unsigned x signed bytes) is gfx11+ (RDNA3, RDNA4);
        every listed arch has the signed ``v_dot4(c)_i32_i8`` (``llvm.amdgcn.sdot4``)."""
        return self.generation in ("rdna3", "rdna4")

    @property
    def matrix_core(self) -> str | None:
        """The family of matrix instructions ``pk.mma`` uses (``targets/matrix.py``): "mfma" (CDNA;
        gfx90a's forms differ from gfx942's), "wmma_rdna3", "wmma_rdna4" (wave32 only), or None: RDNA2 has none, and the generic targets get the portable lowering
        (an intrinsic LLVM cannot select for a target ends the process rather than raising)."""
        if self.is_generic:
            return None
        return {"cdna2": "mfma", "cdna3": "mfma", "cdna4": "mfma", "rdna3": "wmma_rdna3",
                "rdna4": "wmma_rdna4"}.get(self.generation)

    def supports_wave(self, size: int) -> bool:
        """CDNA (gfx9) is wave64 only; RDNA runs wave32 natively and wave64 on request."""
        return size == 64 if self.is_cdna else size in (32, 64)


_F32, _F64, _BOTH, _NONE = frozenset({32}), frozenset({64}), frozenset({32, 64}), frozenset()

_GFX9_4, _GFX10_3, _GFX11, _GFX12 = "gfx9-4-generic", "gfx10-3-generic", "gfx11-generic", "gfx12-generic"

ARCHS: dict[str, ArchInfo] = {a.name: a for a in (
    #        name       gen     wave mach  vgpr/simd gran maxv sgpr/simd maxs  lds/wg  lds/cu simds waves fp8
    ArchInfo("gfx90a", "cdna2", 64, 0x3F, 512, 8, 512, 800, 102, 65536, 65536, 4, 8, None,
             native_fadd_global=_BOTH, native_fadd_shared=_BOTH, native_fminmax_global=_F64, llvm_tools_since=13),
    ArchInfo("gfx942", "cdna3", 64, 0x4C, 512, 8, 512, 800, 102, 65536, 65536, 4, 8, "fnuz",
             native_fadd_global=_BOTH, native_fadd_shared=_BOTH, native_fminmax_global=_F64,
             generic_target=_GFX9_4, llvm_tools_since=17),
    # CDNA4 (MI350/MI355): 160 KiB of LDS; fp8 converts in software until its OCP encoding is verified
    ArchInfo("gfx950", "cdna4", 64, 0x4F, 512, 8, 512, 800, 102, 163840, 163840, 4, 8, None,
             native_fadd_global=_BOTH, native_fadd_shared=_BOTH, native_fminmax_global=_F64,
             generic_target=_GFX9_4, llvm_tools_since=20),
    ArchInfo("gfx1030", "rdna2", 32, 0x36, 1024, 8, 256, None, 106, 65536, 131072, 4, 16, None,
             native_fadd_global=_NONE, native_fadd_shared=_F32, native_fminmax_global=_BOTH,
             generic_target=_GFX10_3, llvm_tools_since=12),
    ArchInfo("gfx1100", "rdna3", 32, 0x41, 1536, 24, 256, None, 106, 65536, 131072, 4, 16, None,
             native_fadd_global=_F32, native_fadd_shared=_F32, native_fminmax_global=_F32,
             generic_target=_GFX11, llvm_tools_since=15),
    ArchInfo("gfx1101", "rdna3", 32, 0x46, 1536, 24, 256, None, 106, 65536, 131072, 4, 16, None,
             native_fadd_global=_F32, native_fadd_shared=_F32, native_fminmax_global=_F32,
             generic_target=_GFX11, llvm_tools_since=15),
    # RDNA 3.5 APUs: Strix Point (gfx1150, 1024 VGPRs a SIMD) and Strix Halo (gfx1151, RDNA3's full 1536)
    ArchInfo("gfx1150", "rdna3", 32, 0x43, 1024, 16, 256, None, 106, 65536, 131072, 4, 16, None,
             native_fadd_global=_F32, native_fadd_shared=_F32, native_fminmax_global=_F32,
             generic_target=_GFX11, llvm_tools_since=18),
    ArchInfo("gfx1151", "rdna3", 32, 0x4A, 1536, 24, 256, None, 106, 65536, 131072, 4, 16, None,
             native_fadd_global=_F32, native_fadd_shared=_F32, native_fminmax_global=_F32,
             generic_target=_GFX11, llvm_tools_since=18),
    ArchInfo("gfx1200", "rdna4", 32, 0x48, 1536, 24, 256, None, 106, 65536, 131072, 4, 16, "ocp",
             native_fadd_global=_F32, native_fadd_shared=_F32, native_fminmax_global=_F32,
             generic_target=_GFX12, llvm_tools_since=18),
    ArchInfo("gfx1201", "rdna4", 32, 0x4E, 1536, 24, 256, None, 106, 65536, 131072, 4, 16, "ocp",
             native_fadd_global=_F32, native_fadd_shared=_F32, native_fminmax_global=_F32,
             generic_target=_GFX12, llvm_tools_since=18),
    # LLVM's generic targets: each row is its family's least member (registers, LDS, fp8 in software)
    ArchInfo(_GFX9_4, "cdna3", 64, 0x5F, 512, 8, 512, 800, 102, 65536, 65536, 4, 8, None,
             native_fadd_global=_BOTH, native_fadd_shared=_BOTH, native_fminmax_global=_F64, llvm_tools_since=20),
    ArchInfo(_GFX10_3, "rdna2", 32, 0x53, 1024, 8, 256, None, 106, 65536, 131072, 4, 16, None,
             native_fadd_global=_NONE, native_fadd_shared=_F32, native_fminmax_global=_BOTH, llvm_tools_since=19),
    ArchInfo(_GFX11, "rdna3", 32, 0x54, 1024, 16, 256, None, 106, 65536, 131072, 4, 16, None,
             native_fadd_global=_F32, native_fadd_shared=_F32, native_fminmax_global=_F32, llvm_tools_since=19),
    ArchInfo(_GFX12, "rdna4", 32, 0x59, 1536, 24, 256, None, 106, 65536, 131072, 4, 16, None,
             native_fadd_global=_F32, native_fadd_shared=_F32, native_fminmax_global=_F32, llvm_tools_since=19),
)}

_BY_MACH = {a.mach: a for a in ARCHS.values()}


def base_arch(target_id: str) -> str:
    """``gfx90a`` from a target id such as ``gfx90a:sramecc+:xnack-`` (HIP's ``gcnArchName``) or
    ``amdgcn-amd-amdhsa--gfx942`` (a code object's ``amdhsa.target``)."""
    name = target_id.rsplit("--", 1)[-1]
    return name.split(":", 1)[0].strip()


def arch_info(name: str) -> ArchInfo:
    """The row for ``name`` (a plain arch or any target id); ``KeyError`` lists what exists."""
    try:
        return ARCHS[base_arch(name)]
    except KeyError:
        raise KeyError(f"unsupported AMDGPU arch {name!r}; pykern supports {', '.join(ARCHS)}") from None


def arch_by_mach(mach: int) -> ArchInfo | None:
    return _BY_MACH.get(mach)
