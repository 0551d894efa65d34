"""The emulator's known limits, each naming the instruction behind it.

* ``LIMITS``: launches the emulator refuses or dies in; such a launch is an expected failure only
  when its error matches a row.
* ``MISMATCHES``: instructions the emulator computes differently from the hardware, found by a
  disagreement with the CPU target and traced to the emulator's own pseudocode; a disagreement is an
  expected failure only in the kernels a row names, on the archs it names.

Anything else fails the test. Both tables are listed in ``docs/targets/amdgpu.md``
(test_docs_list_every_limit keeps them in step).
"""
from __future__ import annotations

import dataclasses
import re


@dataclasses.dataclass(frozen=True)
class Limit:
    archs: tuple[str, ...]
    #: a regular expression searched in the emulator's error
    pattern: str
    instruction: str
    why: str
    #: a regular expression matched against the whole kernel name (None: any kernel)
    kernels: str | None = None

    def matches(self, arch: str, kernel: str, detail: str) -> bool:
        return (arch in self.archs and re.search(self.pattern, detail) is not None
                and (self.kernels is None or re.fullmatch(self.kernels, kernel) is not None))


LIMITS: tuple[Limit, ...] = (
    Limit(("gfx90a",), r"V_MAD_F32|v_mad_f32|unknown cdna format word=0xd1c1", "v_mad_f32",
          "gfx90a runs on the emulator's CDNA4 (gfx950) tables, which no longer have CDNA2's v_mad_f32 "
          "(VOP3 opcode 0x1c1: 'unknown cdna format word=0xd1c1....')"),
    Limit(("gfx90a",), r"unknown cdna format word=0xe0fc", "buffer_wbinvl1_vol",
          "gfx90a's device-scope fences invalidate L1 with buffer_wbinvl1_vol (MUBUF opcode 0x3f), which the "
          "CDNA4 tables do not decode and run_hsaco does not turn into a no-op"),
    Limit(("gfx942",), r"emulator process died", "buffer_wbl2",
          "gfx942's device- and system-scope fences (pk.threadfence / threadfence_system) write back L2 "
          "with buffer_wbl2 and invalidate with buffer_inv; the emulator process dies (SIGSEGV) in the "
          "only kernel that has them", kernels=r"cache_policies"),
    Limit(("gfx942",), r"emulator process died|exceeded 1M instructions", "v_mul_hi_i32_i24",
          "the emulator's V_MUL_HI_I32_I24 multiplies the whole 32-bit registers, unsigned, instead of their "
          "low 24 bits sign-extended (the MISMATCHES row, reproduced by lang/mul24). im2col1d's staged path "
          "on gfx942 forms its write loop's trip count from v_mul_hi_i32_i24 of 64 (the wave size) and -1 "
          "(the first wave's index less one): the high word comes out 0x3f instead of 0xffffffff, the count "
          "2^32 + 1 instead of 1, and the loop stores past the output until the emulator process dies "
          "(SIGSEGV at a global_store_dword on its 18th pass; traced register by register) or stops the "
          "wave after 1M instructions (the worker then restarts: the stores may have corrupted it). gfx90a's "
          "launches of that path are refused before it (v_mad_f32)",
          kernels=r"im2col1d_\w+"),
    Limit(("gfx90a",), r"unknown cdna format word=0xd3e7", "v_mfma_f32_16x16x16bf16_1k",
          "gfx90a's v_mfma_f32_16x16x16bf16_1k (pk.mma on bf16; spelt v_mfma_f32_16x16x16_bf16 on gfx940+) is "
          "not in the emulator's CDNA4 tables ('unknown cdna format word=0xd3e7....'); gfx90a's f16 form "
          "(v_mfma_f32_16x16x16f16) and gfx942's bf16 one run and agree",
          kernels=r"mma_\w+_bf16"),
    Limit(("gfx942",), r"Failed to compile v_mfma_i32_16x16x32_i8", "v_mfma_i32_16x16x32_i8",
          "the emulator cannot build its runner for v_mfma_i32_16x16x32_i8 (pk.mma on i8; its C source for "
          "the instruction fails to compile: 'Failed to compile v_mfma_i32_16x16x32_i8(...)'), so the launch "
          "is refused", kernels=r"mma_\w+_i8|mul_mat_mma_\w+"),
    Limit(("gfx90a",), r"emulator process died", "v_mfma_i32_16x16x16i8",
          "the emulator process dies (SIGSEGV) in every launch of gfx90a's v_mfma_i32_16x16x16i8 (pk.mma on "
          "i8, two a 32-deep step), on its CDNA4 tables", kernels=r"mma_\w+_i8|mul_mat_mma_\w+"),
    Limit(("gfx1201",), r"exceeded 1M instructions", "global_atomic_cmpswap_b64",
          "f64 atomic add on RDNA4 is LLVM's compare-and-swap loop around global_atomic_cmpswap_b64, which "
          "never succeeds on the emulator: the loop runs until the emulator stops it",
          kernels=r"sum_f64|atomics|(ia|sa)_atomic_\w+_f64"),
)


@dataclasses.dataclass(frozen=True)
class Mismatch:
    archs: tuple[str, ...]
    #: a regular expression matched against the whole kernel name
    kernels: str
    instruction: str
    why: str

    def matches(self, arch: str, kernel: str) -> bool:
        return arch in self.archs and re.fullmatch(self.kernels, kernel) is not None


ALL = ("gfx1100", "gfx1201", "gfx942", "gfx90a")
MISMATCHES: tuple[Mismatch, ...] = (
    Mismatch(ALL, r"bdiv_(f32|f64|bf16)|urecip_(f32|f64|bf16)|usilu_(f32|f64)|math_lib_f(32|64)",
             "v_div_scale_f32",
             "the emulator's V_DIV_SCALE_F32/F64 pseudocode is rewritten for flushed denormals (emu.py "
             "_fix_div_scale: a denormal divisor gives NaN, a quotient that would be denormal is not "
             "scaled), while pykern's kernel descriptors keep denormals (FLOAT_DENORM_MODE 3) and LLVM's "
             "division expects the hardware's scaling: x/y with a denormal operand or quotient comes out "
             "inf, 0 or 2^-64 off (denormal/denormal = 1 on the CPU, inf on the emulator)"),
    Mismatch(ALL, r"math_lib_f(32|64)", "v_fma_f32",
             "the emulator's pseudocode function fma(a, b, c) is a * b + c (pcode.py): V_FMA_F32/F64 and "
             "V_FMAC_* round twice, so error-free products (pk.fma(a, b, -a*b)) come out 0 (an earlier build "
             "of unormcdf_f32/f64 was 14 / 220 ulps off through its double-word argument; the current one "
             "agrees, so the row names the math-library case only)"),
    Mismatch(("gfx1100", "gfx1201"), r"atomics|sum_f64|(ia|sa)_atomic_\w+_f64", "global_atomic_cmpswap_b64",
             "f64 atomic add on RDNA is LLVM's compare-and-swap loop around global_atomic_cmpswap_b64; on "
             "the emulator the loop leaves the value unchanged (0 after every add), while the 32-bit "
             "cmpswap, u64 add/max and f32 add of the same kernel agree with the CPU"),
    Mismatch(("gfx1201",), r"sum_f16|sum_bf16|half_atomics|(ia|sa)_atomic_\w+_(f16|bf16)", "global_atomic_cmpswap_b32",
             "16-bit float atomic adds on RDNA4 are LLVM's compare-and-swap loops around "
             "global_atomic_cmpswap_b32 (with v_add_f16 on the half shifted out of the word); on the emulator "
             "the add repeats until the value stops changing (1.0 added to an f16 ends at 2048, to a bf16 at "
             "256), as if the returned pre-op value never matched the expected one (CDNA's row below shows "
             "the same loop failing because cmpswap returns the new value); RDNA3 agrees"),
)


MISMATCHES += (
    Mismatch(("gfx942", "gfx90a"), r"atomics|sum_f16|sum_bf16|half_atomics|(ia|sa)_atomic_\w+_(f16|bf16)",
             "global_atomic_cmpswap",
             "on the emulator's CDNA4 tables global_atomic_cmpswap returns the value it tried to store instead "
             "of the memory's old value (pk.atomic.cas returns 7, 8, 9 to three blocks where the CPU gives "
             "0, 7, 7; the memory itself is right), so LLVM's compare-and-swap loops for 16-bit float atomic "
             "adds repeat the add until the value stops changing (1.0 added to an f16 ends at 2048)"),
)


def known_mismatch(arch: str, kernel: str) -> Mismatch | None:
    return next((m for m in MISMATCHES if m.matches(arch, kernel)), None)


def known_limit(arch: str, kernel: str, detail: str) -> Limit | None:
    return next((lim for lim in LIMITS if lim.matches(arch, kernel, detail)), None)


MISMATCHES += (
    Mismatch(ALL, r"gather_shared_u8_(f16|bf16|u8|f8_e4m3)|im2col_(f16|bf16)|sa_rows_\w+_bf16|lds_d16"
                  r"|col2im1d_staged_(f16|bf16)|col2im1d_rows_(f16|bf16)",
             "ds_load_u16_d16_hi",
             "the emulator runs the DS d16 loads (ds_load_u16_d16 / ds_load_u16_d16_hi / ds_load_u8_d16 / "
             "ds_load_u8_d16_hi; gfx9's ds_read_*_d16*) as plain zero-extending loads of the whole register: "
             "the other half is lost and the _hi forms put the value in the low half (a hand-assembled "
             "kernel loading 0x1234 into a register holding 0xAAAABBBB gets 0x00001234 from all four, on "
             "RDNA3, RDNA4 and CDNA tables alike; the hardware gives 0xAAAA1234 / 0x1234BBBB). LLVM uses them "
             "to pack 8- and 16-bit values read back from shared memory: gather_shared's u8 ids beside "
             "16-bit values, im2col's staged 16-bit pixels, sa_rows' bf16 destination row, col2im1d_staged's "
             "16-bit columns, col2im1d_rows' 16-bit taps packed into words"),
)


MISMATCHES += (
    Mismatch(("gfx942", "gfx90a"),
             r"mul_mat_planar_(q2_K|q3_K|q5_K|q6_K)|mul_mat_q3_K"
             r"|mul_mat_vec_(q5_1|q2_K|q5_K|q6_K)_q8_1_cuda8|mul_mat_vec_q3_K_q8_1_cuda7",
             "v_cvt_f32_f16",
             "on the CDNA tables the emulator reads a 16-bit VOP1 source in v128-v255 as the high half of "
             "v0-v127, RDNA3's true16 encoding: v_cvt_f32_f16 v3, v150 converts the high half of v22 (a "
             "hand-assembled gfx942 kernel gets 2.0 from v22 = 0x40000000 where v150 holds 1.0). Only kernels "
             "with more than 128 VGPRs meet it: quantized's mul_mat_q3_K (203), "
             "the wrappers' mul_mat_planar_* of q2_K, q3_K, q5_K, q6_K (146-174: 1-4 such conversions each), "
             "whose f16 block scales are converted from v149-v167, and since the products' block sums "
             "(e72af19) candle's 8-column MMVQ of q5_1, q2_K, q5_K, q6_K and q3_K's 7-column one "
             "(130-140 VGPRs, 2-9 such conversions each)"),
)


MISMATCHES += (
    Mismatch(ALL, r"mul24", "v_mul_hi_i32_i24",
             "the emulator's V_MUL_HI_I32_I24 and V_MUL_I32_I24 multiply the whole 32-bit registers, unsigned, "
             "instead of their low 24 bits sign-extended (the pseudocode's S0.i24 * S1.i24): the language "
             "case lang/mul24, whose kernel LLVM compiles to exactly these two instructions on every arch, "
             "gets hi 63 for 64 x -1 (the hardware and the CPU: -1) and lo 0x3fffffc0 for 64 x 0x00ffffff "
             "(-64). The same defect kills im2col1d's staged path on gfx942 (the LIMITS row)"),
)


MISMATCHES += (
    Mismatch(("gfx1100",), r"mma_gemm_row_(f16|bf16|i8)", "ds_load_u16_d16_hi",
             "the DS d16 loads' defect (the ds_load_u16_d16_hi row): pk.mma's B fragment read row-major from "
             "shared memory is 16 (f16/bf16) or 32 (i8) narrow loads a lane on RDNA3 (a column of B), which "
             "LLVM packs with ds_load_u16_d16 / _hi and ds_load_u8_d16 / _hi; the column-major GEMM "
             "(ds_load_b128) and the tiles read from global memory agree with the CPU on the same WMMA "
             "(lang/lds_d16 reproduces the loads alone)"),
    Mismatch(("gfx1201",), r"mma_gemm_(row|col)_(f16|bf16)", "ds_load_u16_d16_hi",
             "the DS d16 loads' defect (the ds_load_u16_d16_hi row): on RDNA4 both of pk.mma's fragments read "
             "from shared memory pack 16-bit halves with ds_load_u16_d16_hi; the tiles read from global memory "
             "agree with the CPU on the same v_wmma_f32_16x16x16_*"),
)


MISMATCHES += (
    Mismatch(("gfx1201",), r"mul_mat_mma_(q4_0_1x2x2|q4_0_2x2x1|q8_0_\w+|q4_K_\w+|q6_K_\w+)", "v_cvt_f32_f16",
             "the v_cvt_f32_f16 row's register misread on RDNA4's VOP3 form: the wrappers' MMQ on pk.mma "
             "converts its f16 block scales with v_cvt_f32_f16_e64 from v141-v228 in these tiles (131-230 "
             "VGPRs; q4_K_1x2x2 from v131, q6_K_1x2x2 v153/v165, q6_K_2x2x1 v216-v236), and the outputs "
             "are off by 10^4-10^6 (the scales read from other registers; q6_K_2x2x1: 188 of 399, some "
             "by less); gfx1100 runs the same kernels bit-exact; "
             "mul_mat_mma_q4_0_1x1x4, the same code with its conversions from v92/v94, agrees with the CPU "
             "bit for bit on the same v_wmma_i32_16x16x16_iu8, as do lang/mma's and lang/mma_scaled's i8 "
             "products and scales"),
    Mismatch(("gfx90a",), r"mul_mat_mma_\w+", "v_mfma_i32_16x16x16i8",
             "the v_mfma_i32_16x16x16i8 row: the launches of the wrappers' MMQ on pk.mma that the emulator "
             "survives (no high-register conversions on gfx90a: v55-v99) return values near 1e17; the "
             "instruction's lane layout is checked against AMD's documentation only, as for lang/mma's i8"),
)
