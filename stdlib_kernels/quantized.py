"""candle's QUANTIZED module: ggml/GGUF block formats (``quantized.cu``, 142 kernels).

Every format is one row of ``QTYPES``: its block size and bytes, and three device functions that read
one block — ``word`` (the quants of elements ``4w .. 4w+3`` as four bytes, in element order), ``scale``
and ``min`` (a 16- or 32-element group's float scale and additive minimum). An element is then
``scale * (quant + qoff) + min``, computed in exactly gguf's (= ggml's) order, so the dequantizers
are bit-exact. Every kernel family is written once over that table:

* ``dequantize_block_{q}_{f32,f16}``, ``get_rows_{t}``, DMMV ``dequantize_mul_mat_vec_*``: the
  elements as above (``dequantize_word``); the dequantizers 16 bytes of output a thread a step
  (``dequantize_span``), and ``dequantize_{q}_{f32,f16}`` under the wrappers' larger blocks.
* ``quantize_q8_1``: activations to q8_1 blocks (candle's CUDA definition: ``d = amax / 127``,
  ``q = roundf(x / d)``, ``s`` the f16 of the float sum).
* MMVQ ``mul_mat_vec_{q}_q8_1_cuda{N}``, MMQ ``mul_mat_{q}``, ``indexed_moe_forward_*``: integer dot
  products of a weight group's quants with the q8_1 quants (``pk.dot4_i8``), then
  ``d8 * (scale * (Σ q·q8 + qoff · Σ q8) + min · Σ q8)``: the dot of the dequantized weights with the
  dequantized activations (``load_chunk`` + ``dot_words``: a weight chunk is loaded once for every
  activation column it meets; the formats whose blocks are only 2-byte aligned read a chunk as
  whole words, ``Q.chunk``). Work is split over every thread of the block, whatever the wave width,
  and rows past ``nrows`` are never read or written. MMQ stages the tile's activations in shared
  memory under candle's block. The wrappers' own launches: ``mul_mat_vec_rows_{q}_q8_1`` (MMVQ at batch 1, more rows a block; for
  q4_K, q5_K and q6_K ``mul_mat_vec_pairs``, a thread two chunks from one load of their shared words) and
  ``mul_mat_planar_{q}`` (their MMQ: MMVQ on 8 columns a block along grid y, the activations from
  ``quantize_q8_1_planar``'s planes so that a warp's loads are coalesced) and, for q4_0, q8_0, q4_K
  and q6_K above 16 columns, ``mul_mat_mma_{q}_*`` (the products on the matrix units through ``pk.mma``).
  Their earlier MMQs (``mul_mat_cols_{q}``: ``mul_mat_planar`` on q8_1 blocks; ``mul_mat_rows_{q}``:
  ``mul_mat_{q}`` on a smaller tile) live with the benchmark that compares against them
  (``benchmarks/quantized.py``), not in the module a build ships.

Where this differs from candle's CUDA kernels (bounded rows, q8_0's MoE expert stride, the legacy
formats' offset term) is listed in docs/compat.md, section "quantized". The host-side API is in
``quantized_api.py``.
"""
from __future__ import annotations

from dataclasses import dataclass

import pykern as pk
import pykern.math as pkm
from pykern import ConstPtr, Ptr, f16, f32, i32, i64, u8, u32, usize

from . import QUANTIZED, kernel_name
from ._reduction import block_sums, block_sums_shared

D = pk.TypeVar("D")
T = pk.TypeVar("T")

#: elements in a q8_1 activation block; bytes of one (f16 d, f16 s, 32 x i8)
Q8_1_QK, Q8_1_BYTES = 32, 36
#: candle pads activation rows to a multiple of this many elements (MATRIX_ROW_PADDING)
ROW_PADDING = 512
#: the most (rows x columns) partial sums one block of MMVQ reduces (candle's 2 rows x 8 columns; the
#: wrappers' MMQ 4 x 8)
MAX_SUMS = 32
#: the largest block any launch of these kernels takes (candle's: 256): declared, it leaves each
#: thread more registers on GPUs (AMDGPU's flat work-group size, NVIDIA's .maxntid)
MAX_BLOCK = 256
#: waves such a block holds at the narrowest wave width
MAX_WAVES = MAX_BLOCK // 32


# ---- reading a block ---------------------------------------------------------------------------------
@pk.func
def word_at(block: ConstPtr[u8], offset: u32) -> u32:
    """The little-endian u32 at byte ``offset``: ggml's blocks of 18, 22, 34, 110 and 210 bytes leave
    their words only 2-byte aligned (two 16-bit loads where the target needs aligned words)."""
    return pk.load(pk.bitcast(block + offset, ConstPtr[u32]), 0, align=2)


@pk.func
def aligned_word_at(block: ConstPtr[u8], offset: u32) -> u32:
    """The u32 at byte ``offset`` of a format whose blocks are 4-byte aligned (Q4_1, Q5_1, Q2_K, Q4_K,
    Q5_K: block sizes that are multiples of 4, as candle's ``get_int_from_uint8_aligned``): one load."""
    return pk.bitcast(block + offset, ConstPtr[u32])[0]


@pk.func
def span_words(block: ConstPtr[u8], offset: u32, out: Ptr[u32], *, n, at):
    """``out[at .. at + n)`` = the ``n`` little-endian words at the 2-aligned byte ``offset``, from
    n - 1 aligned words and three 16-bit loads shifted together (``word_at``'s way is two 16-bit loads
    a word): no branch, and every load inside the span whether it starts mid-word or not."""
    odd = not pk.is_aligned(block + offset, 4)
    halves = pk.bitcast(block + offset, ConstPtr[pk.u16])
    first = u32(halves[0])
    base = pk.bitcast(block + (i64(offset) - pk.select(odd, i64(2), i64(0))), ConstPtr[u32])
    shift = pk.select(odd, pk.u64(16), pk.u64(0))
    lo = pk.select(odd, first << 16, first | (u32(halves[1]) << 16))
    for k in pk.static_range(n):
        # the span's last two bytes (the rest of the last word where it starts mid-word)
        hi = base[k + 1] if k + 1 < n else u32(halves[2 * n - 1])
        out[at + k] = u32(((pk.u64(hi) << 32) | pk.u64(lo)) >> shift)
        lo = hi


@pk.func
def half_at(block: ConstPtr[u8], offset: u32) -> f32:
    """The f16 at an even byte ``offset``, as f32 (every f16 field of every format is 2-byte aligned)."""
    return f32(pk.bitcast(block + offset, ConstPtr[f16])[0])


@pk.func
def byte_at(block: ConstPtr[u8], offset: u32) -> u32:
    return u32(block[offset])


@pk.func
def nibbles(block: ConstPtr[u8], qs: u32, w: u32) -> u32:
    """Elements 4w..4w+3 of 32 four-bit quants at ``qs``: element j is byte j's low nibble, j + 16 its high."""
    return (word_at(block, qs + 4 * (w % 4)) >> (4 * (w // 4))) & 0x0F0F0F0F


@pk.func
def aligned_nibbles(block: ConstPtr[u8], qs: u32, w: u32) -> u32:
    return (aligned_word_at(block, qs + 4 * (w % 4)) >> (4 * (w // 4))) & 0x0F0F0F0F


@pk.func
def spread_bits(qh: u32, w: u32) -> u32:
    """Bit 4 of elements 4w..4w+3 from ``qh`` (bit e = element e's fifth bit), spread to bytes."""
    bits = (qh >> (4 * w)) & 0xF
    return ((bits & 1) << 4) | ((bits & 2) << 11) | ((bits & 4) << 18) | ((bits & 8) << 25)


@pk.func
def fifth_bits(block: ConstPtr[u8], qh: u32, w: u32) -> u32:
    """Bit 4 of elements 4w..4w+3 from the u32 at ``qh``, spread to bytes."""
    return spread_bits(word_at(block, qh), w)


@pk.func
def k4_scale(block: ConstPtr[u8], scales: u32, j: u32) -> u32:
    """Sub-block j's 6-bit scale of Q4_K/Q5_K's 12 packed bytes (ggml's get_scale_min_k4), from the
    three aligned words of the 12 bytes with no branch (j is a thread's run-time sub-block in MMVQ)."""
    sh = 8 * (j % 4)
    low = aligned_word_at(block, scales) >> sh
    high = aligned_word_at(block, scales + 8) >> sh
    return pk.select(j < 4, low & 63, (high & 0xF) | (((low >> 6) & 3) << 4))


@pk.func
def k4_min(block: ConstPtr[u8], scales: u32, j: u32) -> u32:
    """Sub-block j's 6-bit min of Q4_K/Q5_K's 12 packed bytes (ggml's get_scale_min_k4)."""
    sh = 8 * (j % 4)
    low = aligned_word_at(block, scales + 4) >> sh
    high = aligned_word_at(block, scales + 8) >> sh
    return pk.select(j < 4, low & 63, ((high >> 4) & 0xF) | (((low >> 6) & 3) << 4))


# Each format: word(block, w) -> 4 quants; scale(block, g) / min(block, g) for group g. Element
# orders and byte offsets are ggml's (docs/quantized.md).
@pk.func
def q4_0_word(b: ConstPtr[u8], w: u32) -> u32: return nibbles(b, 2, w)  # noqa: E704
@pk.func
def q4_1_word(b: ConstPtr[u8], w: u32) -> u32: return aligned_nibbles(b, 4, w)  # noqa: E704
@pk.func
def q5_0_word(b: ConstPtr[u8], w: u32) -> u32: return nibbles(b, 6, w) | fifth_bits(b, 2, w)  # noqa: E704
@pk.func
def q5_1_word(b: ConstPtr[u8], w: u32) -> u32:
    return aligned_nibbles(b, 8, w) | spread_bits(aligned_word_at(b, 4), w)
@pk.func
def q8_0_word(b: ConstPtr[u8], w: u32) -> u32: return word_at(b, 2 + 4 * w)  # noqa: E704
@pk.func
def q8_k_word(b: ConstPtr[u8], w: u32) -> u32: return word_at(b, 4 + 4 * w)  # noqa: E704
@pk.func
def d_at_0(b: ConstPtr[u8], g: u32) -> f32: return half_at(b, 0)  # noqa: E704
@pk.func
def m_at_2(b: ConstPtr[u8], g: u32) -> f32: return half_at(b, 2)  # noqa: E704
@pk.func
def q8_k_scale(b: ConstPtr[u8], g: u32) -> f32: return pk.bitcast(b, ConstPtr[f32])[0]  # noqa: E704


@pk.func
def q2_k_word(b: ConstPtr[u8], w: u32) -> u32:
    """e = 128h + 32s + l: bits 2s of qs[32h + l]."""
    return (aligned_word_at(b, 16 + 32 * (w // 32) + 4 * (w % 8)) >> (2 * (w // 8 % 4))) & 0x03030303


@pk.func
def q2_k_scale(b: ConstPtr[u8], g: u32) -> f32: return half_at(b, 80) * f32(byte_at(b, g) & 0xF)  # noqa: E704
@pk.func
def q2_k_min(b: ConstPtr[u8], g: u32) -> f32: return -(half_at(b, 82) * f32(byte_at(b, g) >> 4))  # noqa: E704


@pk.func
def q3_k_word(b: ConstPtr[u8], w: u32) -> u32:
    """Two low bits as Q2_K's (from byte 32), the third from bit 4h + s of hmask[l]; stored value - 4."""
    h = w // 32
    s = w // 8 % 4
    l4 = w % 8
    low = (word_at(b, 32 + 32 * h + 4 * l4) >> (2 * s)) & 0x03030303
    return low | (((word_at(b, 4 * l4) >> (4 * h + s)) & 0x01010101) << 2)


@pk.func
def block_span(block: ConstPtr[u8], offset: u32, odd: bool, out: Ptr[u32], *, n, at):
    """``out[at .. at + n)`` = the ``n`` little-endian words at ``offset`` (a multiple of 4) of a block
    that starts 2 bytes past a word where ``odd`` (the caller tests that once for all its spans): n
    aligned words from the span's first aligned byte and its first two bytes, shifted together.
    ``span_words``' n - 1 words and 3 halves, one load fewer; the last word may read 2 bytes past
    the span, which every caller keeps inside the block. q6_K's MMVQ waited on its load queue (ncu:
    lg/mio throttle), so a load fewer counts there (docs/targets/cuda.md)."""
    first = u32(pk.bitcast(block + offset, ConstPtr[pk.u16])[0])
    words = pk.bitcast(block + offset + pk.select(odd, u32(2), u32(0)), ConstPtr[u32])
    shift = pk.select(odd, pk.u64(16), pk.u64(32))
    prev = words[0]
    out[at] = pk.select(odd, first | (prev << 16), prev)
    for k in pk.static_range(1, n):
        cur = words[k]
        out[at + k] = u32(((pk.u64(cur) << 32) | pk.u64(prev)) >> shift)
        prev = cur


@pk.func
def q3_k_pair_values(b: ConstPtr[u8], w: u32, vals: Ptr[f32]):
    """Elements 4w .. 4w + 7 of a q3_K block (``w`` even: two words of one 16-element group) into
    ``vals``: their two words of qs and of hmask each from one span (``block_span``), their scale
    once; each q - 4 as the 3-bit sign extension of q ^ 4 (the same integer, without a subtraction
    an element). The values are ``dequantize_word``'s, bit for bit. (The f16 dequantize is bound by
    its instruction issue, which these two cuts shorten: docs/targets/cuda.md, quantized.)"""
    h = w // 32
    s = w // 8 % 4
    l4 = w % 8
    odd = not pk.is_aligned(b, 4)  # both spans start a multiple of 4 bytes into the block
    low = pk.local.array(2, u32)
    hm = pk.local.array(2, u32)
    block_span(b, 32 + 32 * h + 4 * l4, odd, low, n=2, at=0)  # to byte 98 at most of 110
    block_span(b, 4 * l4, odd, hm, n=2, at=0)
    a = q3_k_scale(b, w // 4)
    for j in pk.static_range(2):
        q = ((low[j] >> (2 * s)) & 0x03030303) | (((hm[j] >> (4 * h + s)) & 0x01010101) << 2)
        for k in pk.static_range(4):
            vals[4 * j + k] = a * f32(pk.bitcast((q ^ 0x04040404) << (29 - 8 * k), i32) >> 29)


@pk.func
def q3_k_scale(b: ConstPtr[u8], g: u32) -> f32:
    """16 six-bit scales (+32) in 12 bytes: low nibbles from bytes g (g < 8) or g - 8 (high nibble),
    top two bits from byte 8 + g % 4 at bit 2 (g // 4)."""
    packed = byte_at(b, 96 + g % 8)  # one load and a select: lanes of a warp hold groups on both sides of 8
    low = pk.select(g < 8, packed & 0xF, packed >> 4)
    top = (byte_at(b, 104 + g % 4) >> (2 * (g // 4))) & 3
    return half_at(b, 108) * f32(i32(low | (top << 4)) - 32)


@pk.func
def q4_k_word(b: ConstPtr[u8], w: u32) -> u32:
    """e = 64c + 32p + l: nibble p of qs[32c + l]."""
    return (aligned_word_at(b, 16 + 32 * (w // 16) + 4 * (w % 8)) >> (4 * (w // 8 % 2))) & 0x0F0F0F0F


@pk.func
def q5_k_word(b: ConstPtr[u8], w: u32) -> u32:
    """Q4_K's nibbles (from byte 48) and bit e // 32 of qh[l] as the fifth bit."""
    low = (aligned_word_at(b, 48 + 32 * (w // 16) + 4 * (w % 8)) >> (4 * (w // 8 % 2))) & 0x0F0F0F0F
    return low | (((aligned_word_at(b, 16 + 4 * (w % 8)) >> (w // 8)) & 0x01010101) << 4)


@pk.func
def qk_k_scale(b: ConstPtr[u8], g: u32) -> f32: return half_at(b, 0) * f32(k4_scale(b, 4, g))  # noqa: E704
@pk.func
def qk_k_min(b: ConstPtr[u8], g: u32) -> f32: return -(half_at(b, 2) * f32(k4_min(b, 4, g)))  # noqa: E704


@pk.func
def q6_k_word(b: ConstPtr[u8], w: u32) -> u32:
    """e = 128h + 32s + l: nibble s // 2 of ql[64h + 32 (s % 2) + l], bits 2s of qh[32h + l] above it."""
    h = w // 32
    s = w // 8 % 4
    l4 = w % 8
    low = (word_at(b, 64 * h + 32 * (s % 2) + 4 * l4) >> (4 * (s // 2))) & 0x0F0F0F0F
    return low | (((word_at(b, 128 + 32 * h + 4 * l4) >> (2 * s)) & 0x03030303) << 4)


@pk.func
def q6_k_scale(b: ConstPtr[u8], g: u32) -> f32:
    return half_at(b, 208) * f32(pk.bitcast(b, ConstPtr[pk.i8])[192 + g])


# Chunk loaders of the formats whose blocks are only 2-byte aligned: a 32-element chunk's 8 words of
# quants (``Q.word(b, 8 c + k)``) from whole aligned words (``span_words``), for the products.
@pk.func
def q4_0_chunk(b: ConstPtr[u8], c: u32, words: Ptr[u32]):
    span_words(b, 2, words, n=4, at=0)
    for k in pk.static_range(4):
        words[k + 4] = (words[k] >> 4) & 0x0F0F0F0F
        words[k] = words[k] & 0x0F0F0F0F


@pk.func
def q5_0_chunk(b: ConstPtr[u8], c: u32, words: Ptr[u32]):
    raw = pk.local.array(5, u32)  # qh, then the 16 bytes of qs
    span_words(b, 2, raw, n=5, at=0)
    for k in pk.static_range(8):
        words[k] = ((raw[1 + k % 4] >> (4 * (k // 4))) & 0x0F0F0F0F) | spread_bits(raw[0], k)


@pk.func
def q8_0_chunk(b: ConstPtr[u8], c: u32, words: Ptr[u32]):
    span_words(b, 2, words, n=8, at=0)


@pk.func
def q3_k_chunk(b: ConstPtr[u8], c: u32, words: Ptr[u32]):
    h = c // 4
    s = c % 4
    high = pk.local.array(8, u32)
    span_words(b, 32 + 32 * h, words, n=8, at=0)
    span_words(b, 0, high, n=8, at=0)
    for k in pk.static_range(8):
        words[k] = ((words[k] >> (2 * s)) & 0x03030303) | (((high[k] >> (4 * h + s)) & 0x01010101) << 2)


@pk.func
def q6_k_chunk(b: ConstPtr[u8], c: u32, words: Ptr[u32]):
    h = c // 4
    s = c % 4
    high = pk.local.array(8, u32)
    span_words(b, 64 * h + 32 * (s % 2), words, n=8, at=0)
    span_words(b, 128 + 32 * h, high, n=8, at=0)
    for k in pk.static_range(8):
        words[k] = ((words[k] >> (4 * (s // 2))) & 0x0F0F0F0F) | (((high[k] >> (2 * s)) & 0x03030303) << 4)


@pk.func
def q4_k_pair(b: ConstPtr[u8], p: u32, lo: Ptr[u32], hi: Ptr[u32]):
    """Chunks 2p and 2p + 1 of a Q4_K block (p < 4): the low and the high nibbles of the same 32
    bytes of quants, from one load of their 8 words."""
    for k in pk.static_range(8):
        raw = aligned_word_at(b, 16 + 32 * p + 4 * k)
        lo[k] = raw & 0x0F0F0F0F
        hi[k] = (raw >> 4) & 0x0F0F0F0F


@pk.func
def q5_k_pair(b: ConstPtr[u8], p: u32, lo: Ptr[u32], hi: Ptr[u32]):
    """Chunks 2p and 2p + 1 of a Q5_K block (p < 4): Q4_K's low and high nibbles of qs[32p ..], their
    fifth bits 2p and 2p + 1 of the same 8 words of qh, from one load of each."""
    for k in pk.static_range(8):
        raw = aligned_word_at(b, 48 + 32 * p + 4 * k)
        high = aligned_word_at(b, 16 + 4 * k) >> (2 * p)
        lo[k] = (raw & 0x0F0F0F0F) | ((high & 0x01010101) << 4)
        hi[k] = ((raw >> 4) & 0x0F0F0F0F) | (((high >> 1) & 0x01010101) << 4)


@pk.func
def q6_k_pair(b: ConstPtr[u8], p: u32, lo: Ptr[u32], hi: Ptr[u32]):
    """Chunks 4h + s and 4h + s + 2 of a Q6_K block (p = 2h + s < 4): the low and the high nibbles of
    the same 32 bytes of ql, their top two bits 2s and 2s + 4 of the same 32 bytes of qh, from one
    load of each (``block_span``: the block is only 2-byte aligned; both spans start a multiple of 4
    bytes into it and end by byte 194 of 210)."""
    h = p // 2
    s = p % 2
    high = pk.local.array(8, u32)
    odd = not pk.is_aligned(b, 4)
    block_span(b, 64 * h + 32 * s, odd, lo, n=8, at=0)
    block_span(b, 128 + 32 * h, odd, high, n=8, at=0)
    for k in pk.static_range(8):
        q = high[k] >> (2 * s)
        hi[k] = ((lo[k] >> 4) & 0x0F0F0F0F) | (((q >> 4) & 0x03030303) << 4)
        lo[k] = (lo[k] & 0x0F0F0F0F) | ((q & 0x03030303) << 4)


@pk.func
def q6_k_pair_scales(b: ConstPtr[u8], c_lo: u32, c_hi: u32, params_lo: Ptr[f32], params_hi: Ptr[f32]):
    """``chunk_params`` of chunks ``c_lo`` and ``c_hi`` of a Q6_K block: each chunk's two group scales
    (bytes 192 + 2c and 193 + 2c, 2-byte aligned) from one 16-bit load, where ``q6_k_scale`` loads
    a byte a group; the same products."""
    d = half_at(b, 208)
    for h in pk.static_range(2):
        two = u32(pk.bitcast(b + 192 + 2 * (c_lo if h == 0 else c_hi), ConstPtr[pk.u16])[0])
        lo = d * f32(pk.bitcast(two << 24, i32) >> 24)
        hi = d * f32(pk.bitcast(two << 16, i32) >> 24)
        if h == 0:
            params_lo[0] = lo
            params_lo[2] = hi
        else:
            params_hi[0] = lo
            params_hi[2] = hi


@dataclass(frozen=True)
class QType:
    """One ggml block format: an element is ``scale(g) * (quant + qoff) + min(g)`` (no ``min`` where
    ``has_min`` is false), for the ``group`` elements of group g sharing a scale."""

    name: str           #: candle's and gguf's spelling ("q4_0", "q4_K")
    ggml_type: int      #: ggml's type id (= gguf's GGMLQuantizationType)
    qk: int             #: elements in a block
    nbytes: int         #: bytes in a block
    group: int          #: elements sharing a scale and min (16 or 32)
    qoff: int           #: added to the stored quant (e.g. -8 for Q4_0)
    has_min: bool
    signed: bool        #: word()'s bytes are signed (Q8_0, Q8_K); else unsigned, below 64
    word: pk.FuncDef
    scale: pk.FuncDef
    min: pk.FuncDef | None = None
    chunk: pk.FuncDef | None = None  #: the 8 words of a 32-element chunk at once (else 8 ``word`` calls)
    #: two chunks of block-relative pair p from one load (where they share their words): chunks
    #: ``pair_chunk(p)`` and ``pair_chunk(p) + pair_stride``
    pair: pk.FuncDef | None = None
    pair_stride: int = 1
    #: ``chunk_params`` of a pair's two chunks at once (else twice ``chunk_params``)
    pair_scales: pk.FuncDef | None = None


QTYPES = {q.name: q for q in (
    #     name    ggml  qk   bytes group qoff  min    signed  word       scale       min
    QType("q4_0", 2, 32, 18, 32, -8, False, False, q4_0_word, d_at_0, chunk=q4_0_chunk),
    QType("q4_1", 3, 32, 20, 32, 0, True, False, q4_1_word, d_at_0, m_at_2),
    QType("q5_0", 6, 32, 22, 32, -16, False, False, q5_0_word, d_at_0, chunk=q5_0_chunk),
    QType("q5_1", 7, 32, 24, 32, 0, True, False, q5_1_word, d_at_0, m_at_2),
    QType("q8_0", 8, 32, 34, 32, 0, False, True, q8_0_word, d_at_0, chunk=q8_0_chunk),
    QType("q2_K", 10, 256, 84, 16, 0, True, False, q2_k_word, q2_k_scale, q2_k_min),
    QType("q3_K", 11, 256, 110, 16, -4, False, False, q3_k_word, q3_k_scale, chunk=q3_k_chunk),
    QType("q4_K", 12, 256, 144, 32, 0, True, False, q4_k_word, qk_k_scale, qk_k_min, pair=q4_k_pair),
    QType("q5_K", 13, 256, 176, 32, 0, True, False, q5_k_word, qk_k_scale, qk_k_min, pair=q5_k_pair),
    QType("q6_K", 14, 256, 210, 16, -32, False, False, q6_k_word, q6_k_scale, chunk=q6_k_chunk, pair=q6_k_pair,
          pair_stride=2, pair_scales=q6_k_pair_scales),
    QType("q8_K", 15, 256, 292, 32, 0, False, True, q8_k_word, q8_k_scale),
)}
#: the ten formats candle multiplies with (every group but dequantize_block has no q8_K)
MATMUL_TYPES = tuple(q for q in QTYPES.values() if q.name != "q8_K")
FLOAT_ROWS = (pk.f32, pk.f16, pk.bf16)


# ---- shared algorithms -------------------------------------------------------------------------------
@pk.func
def dequantize_word(block: ConstPtr[u8], w: u32, vals: Ptr[f32], *, Q):
    """Elements 4w..4w+3 of a block into ``vals``, in gguf's arithmetic: ``scale * q`` rounded, then
    ``+ min`` rounded (no fused multiply-add), so the values are gguf's bit for bit."""
    q = Q.word(block, w)
    g = 4 * w // Q.group
    a = Q.scale(block, g)
    for k in pk.static_range(4):
        if Q.signed:
            v = a * f32(pk.bitcast(q << (24 - 8 * k), i32) >> 24)
        else:
            v = a * f32(i32((q >> (8 * k)) & 0xFF) + Q.qoff)
        if Q.has_min:
            v = v + Q.min(block, g)
        vals[k] = v


@pk.func
def dequantize_element(vx: ConstPtr[u8], e: usize, *, Q) -> f32:
    """Element ``e`` of the blocks at ``vx``: its word's four values (``dequantize_word``), then its own."""
    vals = pk.local.array(4, f32)
    w = e // 4
    dequantize_word(vx + w // (Q.qk // 4) * Q.nbytes, u32(w % (Q.qk // 4)), vals, Q=Q)
    k = e % 4  # a constant in each copy of a tile; selects keep vals in registers where it is not
    return pk.select(k == 0, vals[0], pk.select(k == 1, vals[1], pk.select(k == 2, vals[2], vals[3])))


@pk.func
def dequantize_pairs(vx: ConstPtr[u8], y: Ptr[D], lo: usize, hi: usize, t: usize, nt: usize, *, Q, D):
    """Elements [lo, hi) (multiples of 4) to ``y``, for spans of fewer than 4 elements a thread: where
    ``y`` is 8-byte aligned, thread ``t`` of ``nt`` writes every nt-th 8 bytes (2 f32 or 4 f16 packed
    in a u64), so every thread has a store; else 4 elements a thread a step."""
    vals = pk.local.array(4, f32)
    words_a_block: u32 = Q.qk // 4
    if pk.is_aligned(y, 8):
        U = u32 if D.nbytes == 4 else pk.u16
        per: usize = 8 // D.nbytes
        out = pk.bitcast(y, Ptr[pk.u64])
        for p in range(lo // per + t, hi // per, nt):
            w = p * per // 4
            dequantize_word(vx + (w // words_a_block) * Q.nbytes, u32(w % words_a_block), vals, Q=Q)
            bits = pk.u64(0)
            if D.nbytes == 4:  # the word's first or second pair
                second = p % 2 == 1
                bits = pk.u64(pk.bitcast(D(pk.select(second, vals[2], vals[0])), U))
                bits |= pk.u64(pk.bitcast(D(pk.select(second, vals[3], vals[1])), U)) << 32
            else:
                for k in pk.static_range(4):
                    bits |= pk.u64(pk.bitcast(D(vals[k]), U)) << (16 * k)
            out[p] = bits
    else:
        for w in range(lo // 4 + t, hi // 4, nt):
            dequantize_word(vx + (w // words_a_block) * Q.nbytes, u32(w % words_a_block), vals, Q=Q)
            for k in pk.static_range(4):
                y[4 * w + k] = D(vals[k])


@pk.func
def dequantize_span(vx: ConstPtr[u8], y: Ptr[D], lo: usize, hi: usize, t: usize, nt: usize, *, Q, D):
    """Elements [lo, hi) (multiples of 4) of consecutive blocks at ``vx`` to ``y``, shared by threads
    ``t`` of ``nt``. With at least 4 elements a thread, ``pk.parallel_range``: where ``y``, ``lo`` and
    the blocks are aligned, each thread takes 16 bytes of output a step (4 f32, 8 f16: one vector
    store), the tile's copies of the element sharing their words' loads and arithmetic (the blocks
    are read through a u32 pointer so that the tile is sized by the output, not by the byte
    pointer); f16 output goes a word (4 values, one u64) a tile copy. With fewer (candle's get_rows of
    32-element formats: 2 a thread), 16-byte tiles would leave threads idle: ``dequantize_pairs``."""
    if hi - lo < 4 * nt:
        dequantize_pairs(vx, y, lo, hi, t, nt, Q=Q, D=D)
        return
    if D.nbytes == 2 and Q.ggml_type == 11 and pk.is_aligned(y, 8) and lo % 8 == 0 and hi % 8 == 0:
        # q3_K's f16: a thread a pair of words (8 values, two u64 stores) from one span of qs, one of
        # hmask and one scale, where the word path below decodes each word alone: issue-bound there
        # (a group of 4 words a thread was slower still: docs/targets/cuda.md, quantized)
        out = pk.bitcast(y, Ptr[pk.u64])
        pair_vals = pk.local.array(8, f32)
        for p in range(lo // 8 + t, hi // 8, nt):
            w = 2 * p
            q3_k_pair_values(vx + (w // 64) * Q.nbytes, u32(w % 64), pair_vals)
            for j in pk.static_range(2):
                bits = pk.u64(0)
                for k in pk.static_range(4):
                    bits |= pk.u64(pk.bitcast(D(pair_vals[4 * j + k]), pk.u16)) << (16 * k)
                out[w + j] = bits
        return
    if D.nbytes == 2 and pk.is_aligned(y, 8):
        # f16: a word's 4 values are one u64, so a tile is whole words. Tiled by element, each of a
        # tile's 8 copies derives its word from its own index, and LLVM does not see that 4 share
        # one: q3_K's copies each re-read their word's bytes (docs/targets/cuda.md). The blocks are
        # read through a u64 pointer too, so that the tile is sized by the output (2 words a step)
        words_a_block: u32 = Q.qk // 4
        vals = pk.local.array(4, f32)
        out = pk.bitcast(y, Ptr[pk.u64])
        blocks = pk.bitcast(vx, ConstPtr[pk.u64])
        for w in pk.parallel_range(lo // 4, hi // 4, t, nt):
            dequantize_word(pk.bitcast(blocks, ConstPtr[u8]) + (w // words_a_block) * Q.nbytes, u32(w % words_a_block),
                            vals, Q=Q)
            bits = pk.u64(0)
            for k in pk.static_range(4):
                bits |= pk.u64(pk.bitcast(D(vals[k]), pk.u16)) << (16 * k)
            out[w] = bits
        return
    words = pk.bitcast(vx, ConstPtr[u32])
    for i in pk.parallel_range(lo, hi, t, nt):
        y[i] = D(dequantize_element(pk.bitcast(words, ConstPtr[u8]), i, Q=Q))


@pk.func
def chunk_params(wb: ConstPtr[u8], chunk: u32, params: Ptr[f32], *, Q):
    """Per group of chunk ``chunk`` of block ``wb``: its scale and min (``params[2 gi]``,
    ``params[2 gi + 1]``), as ``dot_words`` takes them."""
    for gi in pk.static_range(Q8_1_QK // Q.group):
        g = (Q8_1_QK * chunk + gi * Q.group) // Q.group
        params[2 * gi] = Q.scale(wb, g)
        if Q.has_min:
            params[2 * gi + 1] = Q.min(wb, g)


@pk.func
def pair_params(wb: ConstPtr[u8], c_lo: u32, c_hi: u32, params_lo: Ptr[f32], params_hi: Ptr[f32], *, Q):
    """``chunk_params`` of chunks ``c_lo`` and ``c_hi`` of block ``wb`` (``Q.pair_scales`` where the
    format has it)."""
    if Q.pair_scales is not None:
        Q.pair_scales(wb, c_lo, c_hi, params_lo, params_hi)
    else:
        chunk_params(wb, c_lo, params_lo, Q=Q)
        chunk_params(wb, c_hi, params_hi, Q=Q)


@pk.func
def load_chunk(wb: ConstPtr[u8], chunk: u32, words: Ptr[u32], params: Ptr[f32], *, Q):
    """Weight elements ``32 chunk .. 32 chunk + 31`` of block ``wb``: their quants as 8 words, and per
    group of the chunk its scale and min (``params[2 gi]``, ``params[2 gi + 1]``). Loaded once, a
    chunk serves every activation column it meets (``dot_loaded``)."""
    if Q.chunk is not None:
        Q.chunk(wb, chunk, words)
    else:
        for k in pk.static_range(8):
            words[k] = Q.word(wb, 8 * chunk + k)
    chunk_params(wb, chunk, params, Q=Q)


@pk.func
def group_sums(y: ConstPtr[i32], sums: Ptr[i32], *, Q, at):
    """``Σ q8`` of each of a q8_1 block's groups (``y``: its 8 words of quants) into ``sums[at + g]``,
    where the format needs it (an offset or a min)."""
    if Q.qoff != 0 or Q.has_min:
        for gi in pk.static_range(Q8_1_QK // Q.group):
            total = i32(0)
            for k in pk.static_range(Q.group // 4):
                total = pk.dot4_i8(0x01010101, y[gi * (Q.group // 4) + k], total)
            sums[at + gi] = total


@pk.func
def dot_words(words: Ptr[u32], params: Ptr[f32], y: ConstPtr[i32], d8: f32, sums: Ptr[i32], *, Q, y_at, sums_at) -> f32:
    """A loaded weight chunk times a q8_1 block (quants ``y[y_at ..]``, scale ``d8``, ``group_sums``
    at ``sums_at``): per group, the integer dot ``Σ q·q8`` (exact), then ``d8 * Σ_g (scale_g *
    (Σ q·q8 + qoff Σ q8) + min_g Σ q8)`` in f32."""
    total = f32(0)
    for gi in pk.static_range(Q8_1_QK // Q.group):
        dots = i32(0)
        for k in pk.static_range(Q.group // 4):
            dots = pk.dot4_i8(words[gi * (Q.group // 4) + k], y[y_at + gi * (Q.group // 4) + k], dots)
        if Q.qoff != 0:
            dots += Q.qoff * sums[sums_at + gi]
        part = params[2 * gi] * f32(dots)
        if Q.has_min:
            part += params[2 * gi + 1] * f32(sums[sums_at + gi])
        total += part
    return d8 * total


@pk.func
def dot_loaded(words: Ptr[u32], params: Ptr[f32], yb: ConstPtr[u8], *, Q) -> f32:
    """A loaded weight chunk times the q8_1 block at ``yb`` (global memory)."""
    y = pk.bitcast(yb + 4, ConstPtr[i32])  # a q8_1 block's quants are 4-byte aligned
    sums = pk.local.array(2, i32)
    group_sums(y, sums, Q=Q, at=0)
    return dot_words(words, params, y, half_at(yb, 0), sums, Q=Q, y_at=0, sums_at=0)


@pk.func
def chunk_dot(wb: ConstPtr[u8], chunk: u32, yb: ConstPtr[u8], *, Q) -> f32:
    """The dot of weight elements ``32 chunk .. 32 chunk + 31`` of block ``wb`` with the q8_1 block ``yb``."""
    words = pk.local.array(8, u32)
    params = pk.local.array(4, f32)
    load_chunk(wb, chunk, words, params, Q=Q)
    return dot_loaded(words, params, yb, Q=Q)


#: the floats of shared memory ``block_sums`` of n values takes, by n (blocks up to MAX_BLOCK)
SHARED_SUMS = {n: block_sums_shared(n, MAX_WAVES) for n in range(1, MAX_SUMS + 1)}


@pk.func
def flat_thread() -> u32:
    return pk.thread_idx.y * pk.block_dim.x + pk.thread_idx.x


@pk.func
def flat_threads() -> u32:
    return pk.block_dim.x * pk.block_dim.y


@pk.func
def row_dot(wrow: ConstPtr[u8], yrow: ConstPtr[u8], chunks: u32, sm: Ptr[f32], *, Q) -> f32:
    """One weight row times one q8_1 row (``chunks`` blocks of 32), over the whole block; the total
    on thread 0."""
    t = flat_thread()
    nt = flat_threads()
    acc = pk.local.array(1, f32)
    acc[0] = 0.0
    per_block: u32 = Q.qk // Q8_1_QK
    for c in range(t, chunks, nt):
        acc[0] += chunk_dot(wrow + usize(c // per_block) * Q.nbytes, c % per_block, yrow + usize(c) * Q8_1_BYTES, Q=Q)
    return block_sums(acc, sm, t, nt, count=1)


# ---- dequantize_block_{q}_{f32,f16} ------------------------------------------------------------------
@pk.kernel(max_block_size=MAX_BLOCK)
def dequantize_counted(vx: ConstPtr[u8], y: Ptr[D], count: i32, *, Q, D, per_block, count_unit):
    """candle's legacy launches: block b makes elements [per_block b, per_block (b + 1)) of the
    ``count * count_unit`` (q4_0/q4_1/q8_0 pass 32-element blocks, q5_0/q5_1 elements)."""
    if count <= 0:
        return
    n = usize(count) * count_unit
    lo = usize(pk.block_idx.x) * per_block
    dequantize_span(vx, y, lo, min(lo + per_block, n), usize(pk.thread_idx.x), usize(pk.block_dim.x), Q=Q, D=D)


@pk.kernel(max_block_size=MAX_BLOCK)
def dequantize_superblock(vx: ConstPtr[u8], y: Ptr[D], *, Q, D):
    """candle's K-quant launch: block b makes super-block b (the grid is the count)."""
    lo = usize(pk.block_idx.x) * Q.qk
    dequantize_span(vx, y, lo, lo + Q.qk, usize(pk.thread_idx.x), usize(pk.block_dim.x), Q=Q, D=D)


#: candle's dequantize launch per format: (elements a block, block threads, count argument's unit
#: or None for the K formats' two-argument kernels)
DEQUANTIZE_LAUNCH = {"q4_0": (256, 32, 32), "q4_1": (256, 32, 32), "q8_0": (256, 32, 32),
                     "q5_0": (512, 256, 1), "q5_1": (512, 256, 1),
                     "q2_K": (256, 64, None), "q3_K": (256, 64, None), "q5_K": (256, 64, None),
                     "q6_K": (256, 64, None), "q4_K": (256, 32, None), "q8_K": (256, 32, None)}


@pk.kernel(max_block_size=MAX_BLOCK)
def dequantize_all(vx: ConstPtr[u8], y: Ptr[D], count: usize, *, Q, D):
    """The wrappers' launch (``dequantize_{q}_{d}``): ``count`` elements shared by every thread of the
    grid, 16 bytes of output a thread a step. candle's launches give a 2^25-element tensor 131,072
    blocks of 32 to 64 threads, and the rate at which blocks start bounds such a grid (docs/targets/cuda.md,
    "The quantized family"): DEQUANTIZE_WRAPPER_ELEMENTS a block lifts that floor."""
    dequantize_span(vx, y, usize(0), count, usize(pk.global_id()), usize(pk.grid_dim.x) * usize(pk.block_dim.x),
                    Q=Q, D=D)


#: the wrappers' dequantize: threads a block, and elements a block (16 a thread: 4 tiles of f32)
DEQUANTIZE_WRAPPER_BLOCK, DEQUANTIZE_WRAPPER_ELEMENTS = 256, 4096

for _q in QTYPES.values():
    _per, _threads, _unit = DEQUANTIZE_LAUNCH[_q.name]
    for _d in (f32, f16):
        _name = kernel_name("dequantize_block", _q.name, _d)
        QUANTIZED.add(dequantize_superblock.instance(_name, Q=_q, D=_d) if _unit is None else
                      dequantize_counted.instance(_name, Q=_q, D=_d, per_block=_per, count_unit=_unit))
        QUANTIZED.add(dequantize_all.instance(kernel_name("dequantize", _q.name, _d), Q=_q, D=_d))


# ---- get_rows_{t} -----------------------------------------------------------------------------------
@pk.kernel(max_block_size=MAX_BLOCK)
def get_rows_quant(src: ConstPtr[u8], ids: ConstPtr[u32], dst: Ptr[f32], ne00: i64, nb01: usize, *, Q):
    """``dst[r, :]`` = row ``ids[r]`` (``nb01`` bytes apart) dequantized; ``r`` = block x, the row's
    words shared by the threads of every block along y."""
    r = usize(pk.block_idx.x)
    t = usize(pk.block_idx.y) * usize(pk.block_dim.x) + usize(pk.thread_idx.x)
    nt = usize(pk.grid_dim.y) * usize(pk.block_dim.x)
    dequantize_span(src + usize(ids[r]) * nb01, dst + r * usize(ne00), usize(0), usize(ne00), t, nt, Q=Q, D=f32)


@pk.kernel(max_block_size=MAX_BLOCK)
def get_rows_float(src: ConstPtr[T], ids: ConstPtr[u32], dst: Ptr[f32], ne00: i64, nb01: usize, *, T):
    """``dst[r, :]`` = row ``ids[r]`` as f32, its elements shared by the threads of every block along
    y. With 16 or more elements a thread (the wrappers' launch: a block of 256 a row),
    ``pk.parallel_range``: 16 bytes of the source or the output a step. With fewer (candle's launch:
    one element a thread), one element a thread a step: tiles would leave 3 threads in 4 idle."""
    r = usize(pk.block_idx.x)
    row = pk.bitcast(pk.bitcast(src, ConstPtr[u8]) + usize(ids[r]) * nb01, ConstPtr[T])
    out = dst + r * usize(ne00)
    t = usize(pk.block_idx.y) * usize(pk.block_dim.x) + usize(pk.thread_idx.x)
    nt = usize(pk.grid_dim.y) * usize(pk.block_dim.x)
    if usize(ne00) < 16 * nt:
        for c in range(t, usize(ne00), nt):
            out[c] = f32(row[c])
    elif T is pk.bf16 and usize(ne00) % 2 == 0 and pk.is_aligned(row, 4) and pk.is_aligned(out, 8):
        # bf16 a pair at a time: a u32 of two values to a u64 of two f32 by a mask and a shift. The
        # element loop's PRMTs wrote the first store's registers again for the second (ptxas), which
        # then waited, well below f16's speed; this matches it (docs/targets/cuda.md, quantized)
        pairs = pk.bitcast(row, ConstPtr[u32])
        out2 = pk.bitcast(out, Ptr[pk.u64])
        for w in pk.parallel_range(usize(0), usize(ne00) // 2, t, nt):
            v = pairs[w]
            out2[w] = (pk.u64(v & u32(0xFFFF0000)) << 32) | pk.u64(v << 16)
    else:
        for c in pk.parallel_range(usize(0), usize(ne00), t, nt):
            out[c] = f32(row[c])


for _t in FLOAT_ROWS:
    QUANTIZED.add(get_rows_float.instance(kernel_name("get_rows", _t), T=_t))
for _q in MATMUL_TYPES:
    QUANTIZED.add(get_rows_quant.instance(kernel_name("get_rows", _q.name), Q=_q))


# ---- quantize_q8_1 -----------------------------------------------------------------------------------
@pk.func
def q8_1_lane(x: ConstPtr[f32], kx: i32, ix: usize, iy: usize) -> tuple[pk.i8, f32, f32]:
    """Element ``ix`` of row ``iy`` (zero past ``kx``) in q8_1: its quant, its block's ``d = amax /
    127`` and the block's sum of ``x``, by an xor butterfly over the block's 32 lanes (lanes 32 apart
    never meet, so on either wave width). ``q = roundf(x / d)``."""
    xi = x[iy * usize(kx) + ix] if ix < usize(kx) else f32(0)
    amax = pk.fabs(xi)
    total = xi
    for m in pk.static_range(5):
        amax = pk.fmax(amax, pk.wave.shuffle_xor(amax, 16 >> m))
        total += pk.wave.shuffle_xor(total, 16 >> m)
    d = amax / 127.0
    return pk.i8(0) if amax == 0.0 else pk.i8(pkm.round(xi / d)), d, total


@pk.kernel(max_block_size=MAX_BLOCK)
def quantize_q8_1(x: ConstPtr[f32], vy: Ptr[u8], kx: i32, kx_padded: i32):
    """One thread per element of row ``block_idx.y``, quantized by ``q8_1_lane`` (the block's x size
    is a multiple of 32, as candle's 256). The MMVQ after it may start at once (``launch_dependents``:
    its blocks' start then overlaps this kernel; they wait for its q8_1 in ``grid_dependency_wait``)."""
    pk.launch_dependents()
    ix = usize(pk.block_idx.x) * usize(pk.block_dim.x) + usize(pk.thread_idx.x)
    iy = usize(pk.block_idx.y)
    q, d, total = q8_1_lane(x, kx, ix, iy)
    if ix < usize(kx_padded):
        i = iy * usize(kx_padded) + ix
        block = vy + i // Q8_1_QK * Q8_1_BYTES
        block[4 + i % Q8_1_QK] = pk.bitcast(q, u8)
        if i % Q8_1_QK == 0:
            halves = pk.bitcast(block, Ptr[f16])
            halves[0] = f16(d)
            halves[1] = f16(total)


QUANTIZED.add(quantize_q8_1.instance("quantize_q8_1"))


# ---- DMMV: dequantize_mul_mat_vec_* ------------------------------------------------------------------
@pk.func
def dmmv_row(vx: ConstPtr[u8], y: ConstPtr[f32], dst: Ptr[f32], ncols: i32, row: u32, sm: Ptr[f32], *, Q):
    """``dst[row]`` = the dequantized row times ``y`` in f32, over the whole block."""
    t = flat_thread()
    nt = flat_threads()
    words = u32(ncols) // 4
    per_block: u32 = Q.qk // 4
    wrow = vx + usize(row) * usize(u32(ncols) // Q.qk) * Q.nbytes
    vals = pk.local.array(4, f32)
    acc = pk.local.array(1, f32)
    acc[0] = 0.0
    for w in range(t, words, nt):
        dequantize_word(wrow + usize(w // per_block) * Q.nbytes, w % per_block, vals, Q=Q)
        for k in pk.static_range(4):
            acc[0] += vals[k] * y[4 * w + k]
    total = block_sums(acc, sm, t, nt, count=1)
    if t == 0:
        dst[row] = total


@pk.kernel(max_block_size=MAX_BLOCK)
def dmmv(vx: ConstPtr[u8], y: ConstPtr[f32], dst: Ptr[f32], ncols: i32, nrows: i32, *, Q):
    """candle's launch: one row a block (grid = nrows, block 32)."""
    sm = pk.shared.array(MAX_WAVES, f32)
    row = pk.block_idx.x
    if ncols > 0 and i32(row) < nrows:
        dmmv_row(vx, y, dst, ncols, row, sm, Q=Q)


@pk.kernel(max_block_size=MAX_BLOCK)
def dmmv_unbounded(vx: ConstPtr[u8], y: ConstPtr[f32], dst: Ptr[f32], ncols: i32, *, Q):
    """candle's q5_k signature has no row count: the grid is trusted to be nrows."""
    sm = pk.shared.array(MAX_WAVES, f32)
    if ncols > 0:
        dmmv_row(vx, y, dst, ncols, pk.block_idx.x, sm, Q=Q)


for _q in MATMUL_TYPES:
    if _q.qk == 256:
        _root = kernel_name("dequantize_mul_mat_vec", _q.name.lower())
        QUANTIZED.add((dmmv_unbounded if _q.name == "q5_K" else dmmv).instance(_root, Q=_q))
    else:
        QUANTIZED.add(dmmv.instance(kernel_name("dequantize_mul_mat_vec", _q.name, "cuda"), Q=_q))


# ---- MMVQ: mul_mat_vec_{q}_q8_1_cuda{N} --------------------------------------------------------------
@pk.kernel(max_block_size=MAX_BLOCK)
def mul_mat_vec_q8_1(vx: ConstPtr[u8], vy: ConstPtr[u8], dst: Ptr[f32], ncols_x: i32, nrows_x: i32, nrows_y: i32,
                     nrows_dst: i32, *, Q, N, rows, early):
    """``dst[j * nrows_dst + row]`` = row ``row`` of the weights times q8_1 column j, for the ``rows``
    rows of this block (``mmvq_rows``: candle's), rows past ``nrows_x`` skipped, and the N columns
    from ``N * block_idx.y`` (candle's grid has one: the wrappers' MMQ takes N = 8 columns a block
    along y). Every thread of the block takes every nt-th 32-element chunk of the row, for all its
    rows and columns. ``early``: a step loads its rows' weights before ``grid_dependency_wait`` (they
    do not depend on the quantize) and the activations after, holding every row's chunk at once
    (MMVQ_WEIGHTS_FIRST)."""
    sm = pk.shared.array(SHARED_SUMS[rows * N], f32)
    acc = pk.local.array(MAX_SUMS, f32)
    for i in pk.static_range(rows * N):
        acc[i] = 0.0
    t = flat_thread()
    nt = flat_threads()
    first = pk.block_idx.x * rows
    chunks = u32(max(ncols_x, 0)) // Q8_1_QK
    per_block: u32 = Q.qk // Q8_1_QK
    row_bytes = usize(chunks // per_block) * Q.nbytes
    column_bytes = usize(u32(max(nrows_y, 0)) // Q8_1_QK) * Q8_1_BYTES
    first_column = usize(pk.block_idx.y) * N
    vy = vy + first_column * column_bytes
    dst = dst + first_column * usize(nrows_dst)
    words = pk.local.array(8 * rows if early else 8, u32)     # early: every row's chunk held at once
    params = pk.local.array(4 * rows if early else 4, f32)
    yw = pk.local.array(8 * N, i32)       # the chunk's q8_1 quants of each column,
    d8 = pk.local.array(N, f32)           # their scales
    sums = pk.local.array(2 * N, i32)     # and group sums: once for every row
    last = u32(max(nrows_x, 1)) - 1       # a row past the matrix recomputes the last, never stored
    if not early:
        pk.grid_dependency_wait()         # the q8_1 of a programmatic launch's quantize_q8_1 from here
    for c in range(t, chunks, nt):
        if early:
            for r in pk.static_range(rows):
                load_chunk(vx + usize(min(first + r, last)) * row_bytes + usize(c // per_block) * Q.nbytes,
                           c % per_block, words + 8 * r, params + 4 * r, Q=Q)
            pk.grid_dependency_wait()     # the q8_1 from here (a no-op once waited)
        for j in pk.static_range(N):
            yb = vy + usize(j) * column_bytes + usize(c) * Q8_1_BYTES
            y = pk.bitcast(yb + 4, ConstPtr[i32])
            for k in pk.static_range(8):
                yw[8 * j + k] = y[k]
            d8[j] = half_at(yb, 0)
            group_sums(y, sums, Q=Q, at=2 * j)
        for r in pk.static_range(rows):
            if not early:
                load_chunk(vx + usize(min(first + r, last)) * row_bytes + usize(c // per_block) * Q.nbytes,
                           c % per_block, words, params, Q=Q)
            h = r if early else 0
            for j in pk.static_range(N):
                acc[r * N + j] += dot_words(words + 8 * h, params + 4 * h, yw, d8[j], sums, Q=Q, y_at=8 * j,
                                            sums_at=2 * j)
    total = block_sums(acc, sm, t, nt, count=rows * N)
    if t < rows * N and i32(first + t // N) < nrows_x:  # thread t has sum t: row t // N, column t % N
        dst[usize(t % N) * usize(nrows_dst) + usize(first + t // N)] = total


@pk.kernel(max_block_size=MAX_BLOCK)
def mul_mat_vec_pairs(vx: ConstPtr[u8], vy: ConstPtr[u8], dst: Ptr[f32], ncols_x: i32, nrows_x: i32, nrows_y: i32,
                      nrows_dst: i32, *, Q, rows, early):
    """``mul_mat_vec_q8_1`` at one column for a format whose chunks share their quants' words in
    pairs (``Q.pair``: Q4_K's low and high nibbles of 32 bytes, chunks 2p and 2p + 1; Q5_K's also
    their fifth bits; Q6_K's chunks 4h + s and 4h + s + 2, the nibbles of 32 bytes of ql and the
    top bits of the same 32 bytes of qh): every thread of the block takes every nt-th pair of its
    ``rows`` rows from one load of the words, where one thread a chunk has two threads load the same
    words and use half of each (H100, 14336 x 4096 q4_K, q5_K, q6_K: docs/targets/cuda.md). ``nrows_y`` and
    ``nrows_dst`` (one column) are unused. ``early`` as ``mul_mat_vec_q8_1``'s."""
    sm = pk.shared.array(SHARED_SUMS[rows], f32)
    acc = pk.local.array(rows, f32)
    for r in pk.static_range(rows):
        acc[r] = 0.0
    t = flat_thread()
    nt = flat_threads()
    first = pk.block_idx.x * rows
    pairs = u32(max(ncols_x, 0)) // (2 * Q8_1_QK)
    per_block: u32 = Q.qk // (2 * Q8_1_QK)
    row_bytes = usize(pairs // per_block) * Q.nbytes
    last = u32(max(nrows_x, 1)) - 1       # a row past the matrix recomputes the last, never stored
    lo = pk.local.array(8 * rows if early else 8, u32)        # early: every row's pair held at once
    hi = pk.local.array(8 * rows if early else 8, u32)
    params_lo = pk.local.array(4 * rows if early else 4, f32)
    params_hi = pk.local.array(4 * rows if early else 4, f32)
    yw = pk.local.array(16, i32)          # the two q8_1 blocks' quants,
    sums = pk.local.array(4, i32)         # their group sums
    if not early:
        pk.grid_dependency_wait()         # the q8_1 of a programmatic launch's quantize_q8_1 from here
    for p in range(t, pairs, nt):
        pb = p % per_block
        c_lo = pb // Q.pair_stride * (2 * Q.pair_stride) + pb % Q.pair_stride  # block-relative chunks
        c_hi = c_lo + Q.pair_stride
        if early:
            for r in pk.static_range(rows):
                b = vx + usize(min(first + r, last)) * row_bytes + usize(p // per_block) * Q.nbytes
                Q.pair(b, pb, lo + 8 * r, hi + 8 * r)
                pair_params(b, c_lo, c_hi, params_lo + 4 * r, params_hi + 4 * r, Q=Q)
            pk.grid_dependency_wait()     # the q8_1 from here (a no-op once waited)
        first_chunk = usize(p // per_block) * (Q.qk // Q8_1_QK)
        y_lo = vy + (first_chunk + c_lo) * Q8_1_BYTES
        y_hi = vy + (first_chunk + c_hi) * Q8_1_BYTES
        d8_lo = half_at(y_lo, 0)
        d8_hi = half_at(y_hi, 0)
        for h in pk.static_range(2):
            y = pk.bitcast((y_lo if h == 0 else y_hi) + 4, ConstPtr[i32])
            for k in pk.static_range(8):
                yw[8 * h + k] = y[k]
            group_sums(y, sums, Q=Q, at=2 * h)
        for r in pk.static_range(rows):
            if not early:
                b = vx + usize(min(first + r, last)) * row_bytes + usize(p // per_block) * Q.nbytes
                Q.pair(b, pb, lo, hi)
                pair_params(b, c_lo, c_hi, params_lo, params_hi, Q=Q)
            h = r if early else 0
            acc[r] += dot_words(lo + 8 * h, params_lo + 4 * h, yw, d8_lo, sums, Q=Q, y_at=0, sums_at=0)
            acc[r] += dot_words(hi + 8 * h, params_hi + 4 * h, yw, d8_hi, sums, Q=Q, y_at=8, sums_at=2)
    total = block_sums(acc, sm, t, nt, count=rows)
    if t < rows and i32(first + t) < nrows_x:
        dst[usize(first + t)] = total


def mmvq_rows(width: int) -> int:
    """Rows a block of MMVQ computes for ``width`` activation columns (candle's rows_per_block)."""
    return 1 if width == 1 else 2


#: batch widths candle has MMVQ kernels for
MMVQ_WIDTHS = range(1, 9)
#: the formats whose wrappers' batch-1 MMVQ is ``mul_mat_vec_pairs`` (a thread a pair of chunks from
#: one load of their shared words), measured faster than a thread a chunk (docs/targets/cuda.md)
MMVQ_PAIRS = ("q4_K", "q5_K", "q6_K")
#: rows a block of the wrappers' own batch-1 MMVQ (``mul_mat_vec_rows_{q}_q8_1``, MMVQ_WRAPPER_BLOCK)
#: computes: a thread then has a chunk of each row in flight at once, and one reduction serves them
#: all (measured per format, the pair formats' under ``mul_mat_vec_pairs``: docs/targets/cuda.md, "The
#: quantized family")
MMVQ_WRAPPER_ROWS = {q.name: 4 if q.name == "q4_K" else 2 for q in MATMUL_TYPES}
#: the block (32, y) of the wrappers' batch-1 MMVQ: (32, 2) for the pair formats (``mul_mat_vec_pairs``:
#: a 4096-column row's 64 pairs give each thread one), (32, 4) for the others
MMVQ_WRAPPER_BLOCK = {q.name: (32, 2) if q.name in MMVQ_PAIRS else (32, 4) for q in MATMUL_TYPES}
#: the formats whose wrappers' batch-1 MMVQ loads a step's weights before ``grid_dependency_wait`` and
#: the activations after (``early``), measured per format (docs/targets/cuda.md, quantized): faster for
#: q6_K, and for q5_K at 2 rows a block (4 rows held at once took too many registers); slower for q4_0
#: and q8_0, within noise for q4_K
MMVQ_WEIGHTS_FIRST = ("q5_K", "q6_K")


def mmvq_weights_first(qtype: str):
    """The wrappers' batch-1 MMVQ's ``early`` for ``qtype``: MMVQ_WEIGHTS_FIRST's formats on every target
    but AMDGPU, which has no programmatic launch to overlap and where holding every row's weights at
    once took 7-9 more VGPRs (a wave a SIMD fewer on gfx90a and gfx942)."""
    return pk.per_target(amdgpu=False, default=True) if qtype in MMVQ_WEIGHTS_FIRST else False
#: rows longer than this many columns take twice MMVQ_WRAPPER_BLOCK's threads (``mmvq_wrapper_block``)
MMVQ_WIDE_COLUMNS = 4096


def mmvq_wrapper_block(qtype: str, ncols: int) -> tuple[int, int]:
    """The wrappers' batch-1 MMVQ block for rows of ``ncols`` columns: MMVQ_WRAPPER_BLOCK, with twice
    the threads past MMVQ_WIDE_COLUMNS. A thread of (32, 2) has 3.5 trips over a 14336-column row's
    224 pairs, of (32, 4) 3.5 over its 448 chunks, each trip's loads waiting for the last one's
    products; twice the threads leave 1.75, faster for every format there and slower at 4096 columns
    (docs/targets/cuda.md, quantized)."""
    x, y = MMVQ_WRAPPER_BLOCK[qtype]
    return (x, 2 * y) if ncols > MMVQ_WIDE_COLUMNS else (x, y)


for _q in MATMUL_TYPES:
    for _n in MMVQ_WIDTHS:
        QUANTIZED.add(mul_mat_vec_q8_1.instance(f"mul_mat_vec_{_q.name}_q8_1_cuda{_n}", Q=_q, N=_n,
                                                rows=mmvq_rows(_n), early=False))
    _early = mmvq_weights_first(_q.name)
    QUANTIZED.add((mul_mat_vec_pairs.instance(f"mul_mat_vec_rows_{_q.name}_q8_1", Q=_q, rows=MMVQ_WRAPPER_ROWS[_q.name],
                                              early=_early)
                   if _q.name in MMVQ_PAIRS else
                   mul_mat_vec_q8_1.instance(f"mul_mat_vec_rows_{_q.name}_q8_1", Q=_q, N=1,
                                             rows=MMVQ_WRAPPER_ROWS[_q.name], early=_early)))


# ---- the wrappers' MMQ activations: q8_1 as planes --------------------------------------------------
#: bytes of one 32-element chunk in the planar q8_1 layout: 8 quant words, d8 as f32, two 16-element sums
PLANAR_BYTES = 44
#: chunks a group of planes holds (ROW_PADDING / 32: every padded row is whole groups): a load's offset
#: within a group is then a constant, where planes as long as the row took a pointer a load (255
#: registers and spills on sm_90)
PLANAR_GROUP = 16


@pk.kernel(max_block_size=MAX_BLOCK)
def quantize_q8_1_planar(x: ConstPtr[f32], vy: Ptr[u8], kx: i32, kx_padded: i32):
    """``quantize_q8_1``'s values (the same quants and the same f16-rounded d) in planes, so that
    consecutive threads reading consecutive chunks of a column read consecutive words: row
    ``block_idx.y``'s chunks in groups of PLANAR_GROUP, each group word k of its chunks' quants (k <
    8), their d8 as f32, then their two 16-element quant sums (i32), PLANAR_GROUP words a plane. In
    q8_1's 36-byte blocks the same loads sit 36 bytes apart, 9 cache wavefronts a warp a word
    (the wrappers' earlier ``mul_mat_cols``, benchmarks/quantized.py)."""
    ix = usize(pk.block_idx.x) * usize(pk.block_dim.x) + usize(pk.thread_idx.x)
    iy = usize(pk.block_idx.y)
    q, d, total = q8_1_lane(x, kx, ix, iy)
    half_sum = i32(q)
    for m in pk.static_range(4):
        half_sum += pk.wave.shuffle_xor(half_sum, 8 >> m)
    if ix < usize(kx_padded):
        chunks = usize(u32(kx_padded) // Q8_1_QK)
        row = vy + iy * chunks * PLANAR_BYTES
        c = ix // Q8_1_QK
        e = ix % Q8_1_QK
        group = pk.bitcast(row + c // PLANAR_GROUP * (PLANAR_GROUP * PLANAR_BYTES), Ptr[i32]) + c % PLANAR_GROUP
        pk.bitcast(group + e // 4 * PLANAR_GROUP, Ptr[u8])[e % 4] = pk.bitcast(q, u8)
        if e == 0:
            group[8 * PLANAR_GROUP] = pk.bitcast(f32(f16(d)), i32)
        if e % 16 == 0:
            group[(9 + e // 16) * PLANAR_GROUP] = half_sum


@pk.kernel(max_block_size=MAX_BLOCK)
def mul_mat_planar(vx: ConstPtr[u8], vy: ConstPtr[u8], dst: Ptr[f32], ncols_x: i32, nrows_x: i32, ncols_y: i32,
                   nrows_y: i32, nrows_dst: i32, *, Q, N, rows):
    """``dst[col * nrows_dst + row]``: ``mul_mat_vec_q8_1`` on the N columns of planar q8_1
    (``quantize_q8_1_planar``; ``nrows_y`` its padded length) from ``N * block_idx.y``, ``rows`` rows
    a block: every thread takes every nt-th chunk of its rows, loads the chunk of all N columns first
    (a chunk's 8 words, d8 and sums, each load coalesced over the warp; all in flight at once), then
    each row's chunk once for them; the group sums come from the planes, not from dp4a. The planes
    hold whole groups of N columns (the API pads them with zeros: a clamp of each column's index
    measured slower); columns past ``ncols_y`` are not written, rows past
    ``nrows_x`` re-read the last one and are not written."""
    sm = pk.shared.array(SHARED_SUMS[rows * N], f32)
    acc = pk.local.array(MAX_SUMS, f32)
    for i in pk.static_range(rows * N):
        acc[i] = 0.0
    t = flat_thread()
    nt = flat_threads()
    first = pk.block_idx.x * rows
    chunks = u32(max(ncols_x, 0)) // Q8_1_QK
    per_block: u32 = Q.qk // Q8_1_QK
    row_bytes = usize(chunks // per_block) * Q.nbytes
    planes = usize(u32(max(nrows_y, 0)) // Q8_1_QK)   # chunks of a padded activation column
    first_column = pk.block_idx.y * N
    yq = pk.bitcast(vy + usize(first_column) * planes * PLANAR_BYTES, ConstPtr[i32])
    dst = dst + usize(first_column) * usize(nrows_dst)
    words = pk.local.array(8, u32)
    params = pk.local.array(4, f32)
    yw = pk.local.array(8 * N, i32)       # the chunk's q8_1 quants of each column,
    d8 = pk.local.array(N, f32)           # their scales
    sums = pk.local.array(2 * N, i32)     # and group sums: once for every row
    last = u32(max(nrows_x, 1)) - 1       # a row past the matrix recomputes the last, never stored
    stride = planes * (PLANAR_BYTES // 4)  # words between columns
    for c in range(t, chunks, nt):
        at = usize(c // PLANAR_GROUP) * (PLANAR_GROUP * PLANAR_BYTES // 4) + usize(c % PLANAR_GROUP)
        for j in pk.static_range(N):
            col = yq + usize(j) * stride + at
            for k in pk.static_range(8):
                yw[8 * j + k] = col[k * PLANAR_GROUP]
            d8[j] = pk.bitcast(col[8 * PLANAR_GROUP], f32)
            if Q.qoff != 0 or Q.has_min:
                if Q.group == 16:
                    sums[2 * j] = col[9 * PLANAR_GROUP]
                    sums[2 * j + 1] = col[10 * PLANAR_GROUP]
                else:
                    sums[2 * j] = col[9 * PLANAR_GROUP] + col[10 * PLANAR_GROUP]
        for r in pk.static_range(rows):
            load_chunk(vx + usize(min(first + r, last)) * row_bytes + usize(c // per_block) * Q.nbytes,
                       c % per_block, words, params, Q=Q)
            for j in pk.static_range(N):
                acc[r * N + j] += dot_words(words, params, yw, d8[j], sums, Q=Q, y_at=8 * j, sums_at=2 * j)
    total = block_sums(acc, sm, t, nt, count=rows * N)
    # thread t has sum t: row t // N, column t % N
    if t < rows * N and i32(first + t // N) < nrows_x and i32(first_column + t % N) < ncols_y:
        dst[usize(t % N) * usize(nrows_dst) + usize(first + t // N)] = total


#: the wrappers' MMQ (more than 8 activation columns, ``mul_mat_planar_{q}`` after
#: ``quantize_q8_1_planar``): columns and rows a block, and the block (32, MMQ_PLANAR_BLOCK_Y)
#: (H100, 4096 x 4096: docs/targets/cuda.md, "The quantized family")
MMQ_PLANAR_COLUMNS, MMQ_PLANAR_ROWS, MMQ_PLANAR_BLOCK_Y = 8, 4, 2
QUANTIZED.add(quantize_q8_1_planar.instance("quantize_q8_1_planar"))
for _q in MATMUL_TYPES:
    QUANTIZED.add(mul_mat_planar.instance(kernel_name("mul_mat_planar", _q.name), Q=_q, N=MMQ_PLANAR_COLUMNS,
                                          rows=MMQ_PLANAR_ROWS))



# ---- the wrappers' MMQ on pk.mma: mul_mat_mma_{q} (q4_0, q8_0, q4_K, q6_K) --------------------------
#: q8_1 blocks a stage (one K-quant superblock); a stage's shared rows in bytes: MMQ_MMA_STEP * 32
#: quants + 16, so the eight rows of an ldmatrix start in distinct 16-byte bank groups (272-byte rows)
MMQ_MMA_STEP = 8
MMQ_MMA_LD = MMQ_MMA_STEP * 32 + 16
#: a weight row of a stage where each 32-element block is stored as its two halves with 16 zero bytes
#: between them (q6_K: two 16-deep products a block, below): 48 bytes a block, 400 a row (25 bank groups)
MMQ_MMA_LD_HALVES = MMQ_MMA_STEP * 48 + 16
#: waves a block: WR x WC tiles of 16 x 16 times KW slices of a stage's blocks
MMQ_MMA_WAVES = 4


@dataclass(frozen=True)
class MmaWeights:
    """A format's piece of ``mul_mat_mma``: how a stage's weight rows get into shared memory as i8
    quants with their per-row scales. ``load`` issues the stage's global loads into ``regs`` u32
    registers a row (``rw``, before any store: the latency), ``scales`` writes the row scales (f32,
    ``[group][row]``: ``scale_rows`` groups a stage, a K-quant's mins after its scales), ``store``
    the i8 rows (``ld`` bytes a row). ``halves``: each 32-element block is two 16-element groups of
    their own scale (stored ``[lo | 16 zeros | hi]``, ``ld`` = MMQ_MMA_LD_HALVES), so two products a
    block; ``mins``: groups with a min, added as min × d8·Σq8 (Σq8 from a product with a row of
    ones). ``per``, ``nib``: the legacy formats' u16 words of quants a block and q4_0's nibbles."""

    q: QType
    regs: int
    scale_rows: int
    load: pk.FuncDef
    scales: pk.FuncDef
    store: pk.FuncDef
    ld: int = MMQ_MMA_LD
    halves: bool = False
    mins: bool = False
    per: int = 0
    nib: bool = False


@pk.func
def mma_legacy_load(rw: Ptr[u32], vx: ConstPtr[u8], t: i32, r0: i32, b0: i32, nrows_x: i32, blocks_x: i32,
                    wbytes: i32, *, F, WR):
    """q4_0 / q8_0: the stage's u16 words of quants, ``per`` a block (the blocks are 2-byte aligned)."""
    for j in pk.static_range(16 * WR * MMQ_MMA_STEP * F.per // (MMQ_MMA_WAVES * pk.wave_size)):
        e = t + (MMQ_MMA_WAVES * pk.wave_size) * j
        row = min(r0 + e // (MMQ_MMA_STEP * F.per), nrows_x - 1)
        blk = min(b0 + e // F.per % MMQ_MMA_STEP, blocks_x - 1)
        rw[j] = u32(pk.bitcast(vx + row * wbytes + blk * F.q.nbytes + 2 + 2 * (e % F.per), ConstPtr[pk.u16])[0])


@pk.func
def mma_legacy_scales(dw: Ptr[f32], vx: ConstPtr[u8], t: i32, r0: i32, b0: i32, nrows_x: i32, blocks_x: i32,
                      wbytes: i32, *, F, WR):
    """q4_0 / q8_0: each block's d (0 for the blocks of a partial last stage past the row)."""
    for j in pk.static_range((16 * WR * MMQ_MMA_STEP + MMQ_MMA_WAVES * pk.wave_size - 1)
                             // (MMQ_MMA_WAVES * pk.wave_size)):
        e = t + (MMQ_MMA_WAVES * pk.wave_size) * j
        if e < 16 * WR * MMQ_MMA_STEP:
            blk = b0 + e % MMQ_MMA_STEP
            d = f32(0)
            if blk < blocks_x:
                d = f32(pk.bitcast(vx + min(r0 + e // MMQ_MMA_STEP, nrows_x - 1) * wbytes + blk * F.q.nbytes,
                                   ConstPtr[f16])[0])
            dw[e % MMQ_MMA_STEP * (16 * WR) + e // MMQ_MMA_STEP] = d


@pk.func
def mma_legacy_store(sw: Ptr[u32], rw: Ptr[u32], t: i32, *, F, WR):
    sw16 = pk.bitcast(sw, Ptr[pk.u16])
    for j in pk.static_range(16 * WR * MMQ_MMA_STEP * F.per // (MMQ_MMA_WAVES * pk.wave_size)):
        e = t + (MMQ_MMA_WAVES * pk.wave_size) * j
        at = e // (MMQ_MMA_STEP * F.per) * (MMQ_MMA_LD // 2) + e // F.per % MMQ_MMA_STEP * 16 + e % F.per
        v = rw[j]
        if F.nib:   # q4_0: bytes 2h, 2h+1: low nibbles are k 2h, 2h+1, high ones k + 16
            # nibble - 8 in each byte, no borrow between them: (n | 0x80) - 8 = 0x78 + n, then the
            # top bit flipped (adding 128 mod 256) is n - 8 mod 256
            sw16[at] = pk.u16((((v & 0x0F0F) | 0x8080) - 0x0808) ^ 0x8080)
            sw16[at + 8] = pk.u16(((((v >> 4) & 0x0F0F) | 0x8080) - 0x0808) ^ 0x8080)
        else:
            sw16[at] = pk.u16(v)


@pk.func
def mma_q4_k_load(rw: Ptr[u32], vx: ConstPtr[u8], t: i32, r0: i32, b0: i32, nrows_x: i32, blocks_x: i32,
                  wbytes: i32, *, F, WR):
    """q4_K: a stage is one superblock a row; its 128 bytes of qs as 32 aligned words (144-byte
    blocks), 32 consecutive threads a row."""
    for j in pk.static_range(16 * WR * 32 // (MMQ_MMA_WAVES * pk.wave_size)):
        e = t + (MMQ_MMA_WAVES * pk.wave_size) * j
        row = min(r0 + e // 32, nrows_x - 1)
        rw[j] = pk.bitcast(vx + row * wbytes + b0 // MMQ_MMA_STEP * 144 + 16, ConstPtr[u32])[e % 32]


@pk.func
def mma_q4_k_scales(dw: Ptr[f32], vx: ConstPtr[u8], t: i32, r0: i32, b0: i32, nrows_x: i32, blocks_x: i32,
                    wbytes: i32, *, F, WR):
    """q4_K: sub-block g's d·sc[g] in group g, its -dmin·m[g] in group 8 + g (gguf's values)."""
    for j in pk.static_range((16 * WR * 8 + MMQ_MMA_WAVES * pk.wave_size - 1) // (MMQ_MMA_WAVES * pk.wave_size)):
        e = t + (MMQ_MMA_WAVES * pk.wave_size) * j
        if e < 16 * WR * 8:
            b = vx + min(r0 + e // 8, nrows_x - 1) * wbytes + b0 // MMQ_MMA_STEP * 144
            dw[e % 8 * (16 * WR) + e // 8] = qk_k_scale(b, u32(e % 8))
            dw[(8 + e % 8) * (16 * WR) + e // 8] = qk_k_min(b, u32(e % 8))


@pk.func
def mma_q4_k_store(sw: Ptr[u32], rw: Ptr[u32], t: i32, *, F, WR):
    """Word k of qs holds elements 4k % 32 .. + 3 of sub-block 2 (k // 8) (low nibbles) and of the
    next one (high nibbles): unsigned 0..15, already i8."""
    for j in pk.static_range(16 * WR * 32 // (MMQ_MMA_WAVES * pk.wave_size)):
        e = t + (MMQ_MMA_WAVES * pk.wave_size) * j
        k = e % 32
        at = e // 32 * (MMQ_MMA_LD // 4) + k // 8 * 16 + k % 8
        sw[at] = rw[j] & 0x0F0F0F0F
        sw[at + 8] = (rw[j] >> 4) & 0x0F0F0F0F


@pk.func
def mma_q6_k_load(rw: Ptr[u32], vx: ConstPtr[u8], t: i32, r0: i32, b0: i32, nrows_x: i32, blocks_x: i32,
                  wbytes: i32, *, F, WR):
    """q6_K (210-byte blocks, 2-byte aligned): item (row, h, m), m < 16, takes the u16 of ql at 64h +
    2m and at 64h + 32 + 2m and that of qh at 32h + 2m: the 6-bit quants of elements 128h + 32s + 2m
    and + 1 for s < 4."""
    for j in pk.static_range(16 * WR * 32 // (MMQ_MMA_WAVES * pk.wave_size)):
        e = t + (MMQ_MMA_WAVES * pk.wave_size) * j
        row = min(r0 + e // 32, nrows_x - 1)
        h = e % 32 // 16
        m = e % 16
        b = pk.bitcast(vx + row * wbytes + b0 // MMQ_MMA_STEP * 210, ConstPtr[pk.u16])
        rw[3 * j] = u32(b[32 * h + m])
        rw[3 * j + 1] = u32(b[32 * h + 16 + m])
        rw[3 * j + 2] = u32(b[64 + 16 * h + m])


@pk.func
def mma_q6_k_scales(dw: Ptr[f32], vx: ConstPtr[u8], t: i32, r0: i32, b0: i32, nrows_x: i32, blocks_x: i32,
                    wbytes: i32, *, F, WR):
    """q6_K: 16-element group g's d·sc[g] (gguf's value)."""
    for j in pk.static_range((16 * WR * 16 + MMQ_MMA_WAVES * pk.wave_size - 1) // (MMQ_MMA_WAVES * pk.wave_size)):
        e = t + (MMQ_MMA_WAVES * pk.wave_size) * j
        if e < 16 * WR * 16:
            b = vx + min(r0 + e // 16, nrows_x - 1) * wbytes + b0 // MMQ_MMA_STEP * 210
            dw[e % 16 * (16 * WR) + e // 16] = q6_k_scale(b, u32(e % 16))


@pk.func
def mma_q6_k_store(sw: Ptr[u32], rw: Ptr[u32], t: i32, *, F, WR):
    """Quant - 32 in i8 (the byte trick of q4_0's nibbles: (v | 0x80) - 32, top bit flipped), element
    E of the stage at byte 48 (E // 32) + E % 32, + 16 in the block's upper half (its zeros between)."""
    sw16 = pk.bitcast(sw, Ptr[pk.u16])
    for j in pk.static_range(16 * WR * 32 // (MMQ_MMA_WAVES * pk.wave_size)):
        e = t + (MMQ_MMA_WAVES * pk.wave_size) * j
        h = e % 32 // 16
        m = e % 16
        for s in pk.static_range(4):
            v = ((rw[3 * j + s % 2] >> (4 * (s // 2))) & 0x0F0F) | (((rw[3 * j + 2] >> (2 * s)) & 0x0303) << 4)
            sw16[e // 32 * (MMQ_MMA_LD_HALVES // 2) + 24 * (4 * h + s) + m + 8 * (m // 8)] = \
                pk.u16(((v | 0x8080) - 0x2020) ^ 0x8080)


@pk.kernel(max_block_size=MMQ_MMA_WAVES * 64)
def mul_mat_mma(vx: ConstPtr[u8], vy: ConstPtr[u8], dst: Ptr[f32], ncols_x: i32, nrows_x: i32, ncols_y: i32,
                nrows_y: i32, nrows_dst: i32, *, F, WR, WC, KW):
    """``dst[col * nrows_dst + row]`` (mul_mat's contract, plain q8_1 activations of padded length
    ``nrows_y``) for 16 WR weight rows (block x) and 16 WC activation columns (block y) on the matrix
    units' i8 products, block-scaled: why it beats the dot4 MMQ above 16 columns is that one
    ``pk.mma.mma`` does a q8 block of 16 x 16 dots. ``F``: the format's piece (``MmaWeights``: the
    weights' loads, row scales and i8 rows; one kernel for every format). A block is MMQ_MMA_WAVES
    whole waves (any width): WR x WC tiles times KW slices of each stage's blocks, whose partial
    tiles are added in shared memory at the end, in slice order. A stage loads MMQ_MMA_STEP blocks of
    the tile's weights and activations into registers (every load before any store, for the
    latency), then stores the quants as i8 rows and the scales as f32 in shared memory; a wave takes
    every KW-th block: one 32-deep product whose i32 tile ``pk.mma.scale_add`` adds times d8 and the
    weight row's scale (q6_K: two, one a 16-element half; q4_K: also the product with a row of ones,
    Σq8, times d8 and the min). Rows past ``nrows_x`` and columns past ``ncols_y`` read the last valid
    row / column (in bounds; never stored), blocks past ``ncols_x / 32`` (a partial last stage of a
    legacy format) the last valid block with both scales 0, so they add exactly nothing; a partial
    tile is stored through shared memory under a guard. Offsets are i32: the API takes this kernel
    for weights under 2 GiB."""
    sw = pk.shared.array(16 * WR * F.ld // 4, u32)           # weights: a row of i8 quants a weight row
    sy = pk.shared.array(16 * WC * MMQ_MMA_LD // 4, u32)     # activations: a row an activation column
    dw = pk.shared.array(F.scale_rows * 16 * WR, f32)        # [group][weight row]
    dy = pk.shared.array(MMQ_MMA_STEP * 16 * WC, f32)        # [block][activation column]
    red = pk.shared.array(MMQ_MMA_WAVES * 256, f32)          # the waves' tiles, [wave][16][16]
    rw = pk.local.array(16 * WR * F.regs // (MMQ_MMA_WAVES * pk.wave_size), u32)
    ry = pk.local.array(16 * WC * MMQ_MMA_STEP * 8 // (MMQ_MMA_WAVES * pk.wave_size), u32)
    ones = pk.shared.array(8, u32)                           # q4_K: a row of 32 i8 ones
    t = i32(pk.thread_idx.x)
    wave = t // pk.wave_size
    tile = wave % (WR * WC)
    kw = wave // (WR * WC)
    wr = (tile % WR) * 16
    wc = (tile // WR) * 16
    r0 = i32(pk.block_idx.x) * (16 * WR)
    c0 = i32(pk.block_idx.y) * (16 * WC)
    blocks_x = ncols_x // 32
    blocks_y = nrows_y // 32
    wbytes = blocks_x // (F.q.qk // 32) * F.q.nbytes
    ybytes = blocks_y * 36
    if F.halves:   # the zeros between the halves, written once (the first stage's barrier publishes them)
        for j in pk.static_range(16 * WR * MMQ_MMA_STEP * 4 // (MMQ_MMA_WAVES * pk.wave_size)):
            e = t + (MMQ_MMA_WAVES * pk.wave_size) * j
            sw[e // (4 * MMQ_MMA_STEP) * (F.ld // 4) + e % (4 * MMQ_MMA_STEP) // 4 * 12 + 4 + e % 4] = u32(0)
    if F.mins and t < 8:   # published by the first stage's barrier
        ones[t] = u32(0x01010101)
    acc = pk.mma.zeros(f32)
    for b0 in range(0, blocks_x, MMQ_MMA_STEP):
        F.load(rw, vx, t, r0, b0, nrows_x, blocks_x, wbytes, F=F, WR=WR)
        for j in pk.static_range(16 * WC * MMQ_MMA_STEP * 8 // (MMQ_MMA_WAVES * pk.wave_size)):
            e = t + (MMQ_MMA_WAVES * pk.wave_size) * j
            col = min(c0 + e // (MMQ_MMA_STEP * 8), ncols_y - 1)
            blk = min(b0 + e // 8 % MMQ_MMA_STEP, blocks_y - 1)
            ry[j] = pk.bitcast(vy + col * ybytes + blk * 36 + 4, ConstPtr[u32])[e % 8]
        F.scales(dw, vx, t, r0, b0, nrows_x, blocks_x, wbytes, F=F, WR=WR)
        for j in pk.static_range((16 * WC * MMQ_MMA_STEP + MMQ_MMA_WAVES * pk.wave_size - 1)
                                 // (MMQ_MMA_WAVES * pk.wave_size)):
            e = t + (MMQ_MMA_WAVES * pk.wave_size) * j
            if e < 16 * WC * MMQ_MMA_STEP:
                blk = b0 + e % MMQ_MMA_STEP
                d = f32(0)
                if blk < blocks_x and blk < blocks_y:
                    d = f32(pk.bitcast(vy + min(c0 + e // MMQ_MMA_STEP, ncols_y - 1) * ybytes + blk * 36,
                                       ConstPtr[f16])[0])
                dy[e % MMQ_MMA_STEP * (16 * WC) + e // MMQ_MMA_STEP] = d
        F.store(sw, rw, t, F=F, WR=WR)
        for j in pk.static_range(16 * WC * MMQ_MMA_STEP * 8 // (MMQ_MMA_WAVES * pk.wave_size)):
            e = t + (MMQ_MMA_WAVES * pk.wave_size) * j
            sy[e // (MMQ_MMA_STEP * 8) * (MMQ_MMA_LD // 4) + e % (MMQ_MMA_STEP * 8)] = ry[j]
        pk.syncthreads()
        for j in pk.static_range(MMQ_MMA_STEP // KW):
            blk = kw + KW * j
            fa = pk.mma.load_a(pk.bitcast(sy, Ptr[pk.i8]) + wc * MMQ_MMA_LD + 32 * blk, MMQ_MMA_LD)
            if F.halves:
                for h in pk.static_range(2):
                    fb = pk.mma.load_b(pk.bitcast(sw, Ptr[pk.i8]) + wr * F.ld + 48 * blk + 16 * h, F.ld,
                                       layout="col")
                    prod = pk.mma.mma(fa, fb, pk.mma.zeros(pk.i32))
                    acc = pk.mma.scale_add(acc, prod, dy + blk * (16 * WC) + wc, dw + (2 * blk + h) * (16 * WR) + wr)
            else:
                fb = pk.mma.load_b(pk.bitcast(sw, Ptr[pk.i8]) + wr * F.ld + 32 * blk, F.ld, layout="col")
                prod = pk.mma.mma(fa, fb, pk.mma.zeros(pk.i32))
                acc = pk.mma.scale_add(acc, prod, dy + blk * (16 * WC) + wc, dw + blk * (16 * WR) + wr)
                if F.mins:
                    sums = pk.mma.mma(fa, pk.mma.load_b(pk.bitcast(ones, Ptr[pk.i8]), 0, layout="col"),
                                      pk.mma.zeros(pk.i32))
                    acc = pk.mma.scale_add(acc, sums, dy + blk * (16 * WC) + wc,
                                           dw + (MMQ_MMA_STEP + blk) * (16 * WR) + wr)
        pk.syncthreads()
    whole = r0 + 16 * WR <= nrows_x and c0 + 16 * WC <= ncols_y   # the same in the whole block
    if KW == 1 and whole:
        pk.mma.store(dst + ((c0 + wc) * nrows_dst + r0 + wr), nrows_dst, acc)
    else:
        pk.mma.store(red + wave * 256, 16, acc)
        pk.syncthreads()
        for j in pk.static_range((WR * WC * 256 + MMQ_MMA_WAVES * pk.wave_size - 1) // (MMQ_MMA_WAVES * pk.wave_size)):
            e = t + (MMQ_MMA_WAVES * pk.wave_size) * j
            if e < WR * WC * 256:
                tl = e // 256                                    # the tile; its (column, row) within it
                total = red[e]
                for s in pk.static_range(1, KW):
                    total += red[s * (WR * WC * 256) + e]
                row = r0 + tl % WR * 16 + e % 16
                col = c0 + tl // WR * 16 + e % 256 // 16
                if row < nrows_x and col < ncols_y:
                    dst[col * nrows_dst + row] = total


#: each format's piece of mul_mat_mma
MMA_WEIGHTS = {
    "q4_0": MmaWeights(QTYPES["q4_0"], MMQ_MMA_STEP * 8, MMQ_MMA_STEP, mma_legacy_load, mma_legacy_scales,
                       mma_legacy_store, per=8, nib=True),
    "q8_0": MmaWeights(QTYPES["q8_0"], MMQ_MMA_STEP * 16, MMQ_MMA_STEP, mma_legacy_load, mma_legacy_scales,
                       mma_legacy_store, per=16),
    "q4_K": MmaWeights(QTYPES["q4_K"], 32, 2 * MMQ_MMA_STEP, mma_q4_k_load, mma_q4_k_scales, mma_q4_k_store,
                       mins=True),
    "q6_K": MmaWeights(QTYPES["q6_K"], 3 * 32, 2 * MMQ_MMA_STEP, mma_q6_k_load, mma_q6_k_scales, mma_q6_k_store,
                       ld=MMQ_MMA_LD_HALVES, halves=True),
}
#: each format's (largest batch, (WR, WC, KW)) by batch: enough waves (4 a block) for the loads'
#: latency at every width, and only the tiles that measured fastest (benchmarks/quantized.py --only
#: mma at 16 to 128 columns, "tiles alone"; the sweep's figures: docs/targets/cuda.md, quantized)
_LEGACY_TILES = ((32, (1, 1, 4)), (64, (2, 2, 1)), (96, (1, 2, 2)), (None, (2, 2, 1)))
MMQ_MMA_TILES = {"q4_0": _LEGACY_TILES, "q8_0": _LEGACY_TILES, "q4_K": ((None, (1, 2, 2)),),
                 "q6_K": ((32, (1, 2, 2)), (None, (2, 2, 1)))}
#: the formats with a mul_mat_mma kernel, and the batches the wrappers give it (more than 16 columns,
#: where it measured faster than mul_mat_planar; at 16 the planar MMQ is as fast or faster)
MMQ_MMA_TYPES = tuple(MMQ_MMA_TILES)
MMQ_MMA_MIN_BATCH = 17


def mmq_mma_tile(qtype: str, batch: int) -> tuple[int, int, int]:
    """(WR, WC, KW) of ``qtype``'s mul_mat_mma kernel for ``batch`` activation columns."""
    return next(tile for most, tile in MMQ_MMA_TILES[qtype] if most is None or batch <= most)


def mmq_mma_tiles(qtype: str) -> list[tuple[int, int, int]]:
    """Every (WR, WC, KW) ``qtype`` has a mul_mat_mma kernel for."""
    return sorted({tile for _, tile in MMQ_MMA_TILES[qtype]})


def mmq_mma_name(qtype: str, batch: int) -> str:
    return "mul_mat_mma_{}_{}x{}x{}".format(qtype, *mmq_mma_tile(qtype, batch))


for _qname in MMQ_MMA_TYPES:
    for _wr, _wc, _kw in mmq_mma_tiles(_qname):
        QUANTIZED.add(mul_mat_mma.instance(f"mul_mat_mma_{_qname}_{_wr}x{_wc}x{_kw}", F=MMA_WEIGHTS[_qname],
                                           WR=_wr, WC=_wc, KW=_kw))

# ---- MMQ: mul_mat_{q} --------------------------------------------------------------------------------
#: activation columns a thread of the per-thread MMQ carries at once (a loaded weight chunk serves all)
MMQ_COLUMNS = 8
#: the block the staged MMQ is written for (candle's (32, 4)); other blocks take the per-thread path
MMQ_BLOCK = 128
#: q8_1 blocks of each of the tile's columns staged in shared memory a step (two barriers a step)
MMQ_STEP = 4


@pk.func
def mmq_per_thread(vx: ConstPtr[u8], vy: ConstPtr[u8], dst: Ptr[f32], ncols_x: i32, nrows_x: i32, ncols_y: i32,
                   nrows_y: i32, nrows_dst: i32, *, Q, tile_x, tile_y):
    """Any block: each thread takes every nt-th (row, MMQ_COLUMNS columns) of the tile and walks the
    row once for them (a group's columns past ``ncols_y`` recompute the last one instead of branching)."""
    t = flat_thread()
    nt = flat_threads()
    chunks = u32(max(ncols_x, 0)) // Q8_1_QK
    per_block: u32 = Q.qk // Q8_1_QK
    row_bytes = usize(chunks // per_block) * Q.nbytes
    column_bytes = usize(u32(max(nrows_y, 0)) // Q8_1_QK) * Q8_1_BYTES
    words = pk.local.array(8, u32)
    params = pk.local.array(4, f32)
    acc = pk.local.array(MMQ_COLUMNS, f32)
    groups: u32 = tile_x // MMQ_COLUMNS
    for p in range(t, u32(tile_y) * groups, nt):
        row = pk.block_idx.x * tile_y + p % tile_y
        first = pk.block_idx.y * tile_x + p // tile_y * MMQ_COLUMNS
        if i32(row) < nrows_x and i32(first) < ncols_y:
            last = u32(ncols_y) - 1
            wrow = vx + usize(row) * row_bytes
            for j in pk.static_range(MMQ_COLUMNS):
                acc[j] = 0.0
            for c in range(u32(0), chunks):
                load_chunk(wrow + usize(c // per_block) * Q.nbytes, c % per_block, words, params, Q=Q)
                for j in pk.static_range(MMQ_COLUMNS):
                    ycol = vy + usize(min(first + j, last)) * column_bytes
                    acc[j] += dot_loaded(words, params, ycol + usize(c) * Q8_1_BYTES, Q=Q)
            for j in pk.static_range(MMQ_COLUMNS):
                if first + j <= last:
                    dst[usize(first + j) * usize(nrows_dst) + usize(row)] = acc[j]


@pk.func
def mmq_staged(vx: ConstPtr[u8], vy: ConstPtr[u8], dst: Ptr[f32], ncols_x: i32, nrows_x: i32, ncols_y: i32,
               nrows_y: i32, nrows_dst: i32, sq: Ptr[i32], sd: Ptr[f32], ss: Ptr[i32], *, Q, tile_x, tile_y, part):
    """Candle's block of MMQ_BLOCK threads: thread t takes row ``t % tile_y`` of the tile and the
    ``part`` columns of its share (``t // tile_y``, whole waves), all at once in registers. Each step
    the block stages MMQ_STEP q8_1 blocks of every column of the tile in shared memory (quants, d8,
    group sums); each thread then loads its row's chunk once and dots it with each of its columns.
    Rows past the matrix re-read the last row and are not written; columns past it likewise."""
    t = flat_thread()
    chunks = u32(max(ncols_x, 0)) // Q8_1_QK
    per_block: u32 = Q.qk // Q8_1_QK
    row_bytes = usize(chunks // per_block) * Q.nbytes
    column_bytes = usize(u32(max(nrows_y, 0)) // Q8_1_QK) * Q8_1_BYTES
    row = pk.block_idx.x * tile_y + t % tile_y
    first = pk.block_idx.y * tile_x
    mine = t // tile_y * part
    last = u32(ncols_y) - 1
    wrow = vx + usize(min(row, u32(nrows_x) - 1)) * row_bytes
    words = pk.local.array(8, u32)
    params = pk.local.array(4, f32)
    yw = pk.local.array(8, i32)
    sums = pk.local.array(2, i32)
    acc = pk.local.array(part, f32)
    for j in pk.static_range(part):
        acc[j] = 0.0
    for c0 in range(u32(0), chunks, u32(MMQ_STEP)):
        for i in range(t, u32(tile_x * MMQ_STEP), u32(MMQ_BLOCK)):  # stage (column i / STEP, chunk i % STEP)
            c = c0 + i % MMQ_STEP
            if c < chunks:
                yb = vy + usize(min(first + i // MMQ_STEP, last)) * column_bytes + usize(c) * Q8_1_BYTES
                y = pk.bitcast(yb + 4, ConstPtr[i32])
                for k in pk.static_range(8):
                    sq[8 * i + k] = y[k]
                sd[i] = half_at(yb, 0)
                if Q.qoff != 0 or Q.has_min:
                    group_sums(y, sums, Q=Q, at=0)
                    for g in pk.static_range(Q8_1_QK // Q.group):
                        ss[2 * i + g] = sums[g]
        pk.syncthreads()
        for cs in range(u32(0), min(u32(MMQ_STEP), chunks - c0)):
            c = c0 + cs
            load_chunk(wrow + usize(c // per_block) * Q.nbytes, c % per_block, words, params, Q=Q)
            for g in pk.static_range(part // 8):
                if first + mine + 8 * g <= last:  # the same for the share's whole waves
                    for j in pk.static_range(8):
                        i = (mine + 8 * g + j) * MMQ_STEP + cs
                        for k in pk.static_range(8):
                            yw[k] = sq[8 * i + k]
                        if Q.qoff != 0 or Q.has_min:
                            for gi in pk.static_range(Q8_1_QK // Q.group):
                                sums[gi] = ss[2 * i + gi]
                        acc[8 * g + j] += dot_words(words, params, yw, sd[i], sums, Q=Q, y_at=0, sums_at=0)
        pk.syncthreads()
    if i32(row) < nrows_x:
        for j in pk.static_range(part):
            if first + mine + j <= last:
                dst[usize(first + mine + j) * usize(nrows_dst) + usize(row)] = acc[j]


@pk.kernel(max_block_size=MAX_BLOCK)
def mul_mat_q(vx: ConstPtr[u8], vy: ConstPtr[u8], dst: Ptr[f32], ncols_x: i32, nrows_x: i32, ncols_y: i32,
              nrows_y: i32, nrows_dst: i32, *, Q, tile_x, tile_y):
    """``dst[col * nrows_dst + row]`` for the ``tile_y`` rows (block x) and ``tile_x`` q8_1 columns
    (block y) of candle's tile: staged through shared memory under candle's block, per thread under
    any other; outputs outside the matrix are not written."""
    sq = pk.shared.array(tile_x * MMQ_STEP * 8, i32)
    sd = pk.shared.array(tile_x * MMQ_STEP, f32)
    ss = pk.shared.array(tile_x * MMQ_STEP * 2, i32)
    if ncols_x <= 0 or ncols_y <= 0 or nrows_x <= 0:
        return
    if flat_threads() == MMQ_BLOCK:
        mmq_staged(vx, vy, dst, ncols_x, nrows_x, ncols_y, nrows_y, nrows_dst, sq, sd, ss, Q=Q, tile_x=tile_x,
                   tile_y=tile_y, part=tile_x * tile_y // MMQ_BLOCK)
    else:
        mmq_per_thread(vx, vy, dst, ncols_x, nrows_x, ncols_y, nrows_y, nrows_dst, Q=Q, tile_x=tile_x, tile_y=tile_y)


#: candle's (mmq_x, mmq_y) tiles (CUDA_USE_TENSOR_CORES off: the "AMPERE" sizes), block (32, 4)
MMQ_TILES = {"q4_0": (64, 128), "q4_1": (64, 128), "q5_0": (128, 64), "q5_1": (128, 64), "q8_0": (128, 64),
             "q2_K": (64, 128), "q3_K": (128, 128), "q4_K": (64, 128), "q5_K": (64, 128), "q6_K": (64, 64)}
for _q in MATMUL_TYPES:
    _tx, _ty = MMQ_TILES[_q.name]
    QUANTIZED.add(mul_mat_q.instance(kernel_name("mul_mat", _q.name), Q=_q, tile_x=_tx, tile_y=_ty))


# ---- indexed_moe_forward_{q}_q8_1 -------------------------------------------------------------------
@pk.kernel(max_block_size=MAX_BLOCK)
def indexed_moe_forward(all_weights: ConstPtr[u8], all_inputs: ConstPtr[u8], indices: ConstPtr[u32],
                        all_outputs: Ptr[f32], n: i32, k: i32, batch: i32, topk: i32, k_padded: i32,
                        input_dim1: i32, *, Q):
    """``out[task * n + row]`` = row ``row`` (block x) of expert ``indices[task]`` times the q8_1 input
    row (the batch index if ``input_dim1 == 1``, else the task), task = (block y, block z) of the
    (batch, topk) grid. An expert is ``n * k / qk`` blocks of its own format (q8_0's too)."""
    sm = pk.shared.array(MAX_WAVES, f32)
    row = pk.block_idx.x
    task = pk.block_idx.y * pk.grid_dim.z + pk.block_idx.z
    if i32(row) >= n or k <= 0:
        return
    row_bytes = usize(u32(k) // Q.qk) * Q.nbytes
    wrow = all_weights + usize(indices[task]) * usize(n) * row_bytes + usize(row) * row_bytes
    in_row = pk.block_idx.y if input_dim1 == 1 else task
    yrow = all_inputs + usize(in_row) * usize(u32(k_padded) // Q8_1_QK) * Q8_1_BYTES
    total = row_dot(wrow, yrow, u32(k) // Q8_1_QK, sm, Q=Q)
    if flat_thread() == 0:
        all_outputs[usize(task) * usize(n) + usize(row)] = total


#: candle's MoE formats and their spelling in the kernel names
MOE_NAMES = {"q2_K": "q2k", "q3_K": "q3k", "q4_K": "q4k", "q5_K": "q5k", "q6_K": "q6k", "q8_0": "q8_0"}
for _qname, _tag in MOE_NAMES.items():
    QUANTIZED.add(indexed_moe_forward.instance(f"indexed_moe_forward_{_tag}_q8_1", Q=QTYPES[_qname]))


__all__ = ["QType", "QTYPES", "MATMUL_TYPES", "FLOAT_ROWS", "DEQUANTIZE_LAUNCH", "DEQUANTIZE_WRAPPER_BLOCK",
           "DEQUANTIZE_WRAPPER_ELEMENTS", "MMQ_TILES", "MMQ_MMA_STEP", "MMQ_MMA_LD", "MMQ_MMA_WAVES", "MMQ_MMA_TILES", "MMQ_MMA_TYPES",
           "MMQ_MMA_MIN_BATCH", "MMQ_MMA_LD_HALVES", "MMA_WEIGHTS", "MmaWeights", "mmq_mma_tile", "mmq_mma_tiles",
           "mmq_mma_name",
           "MMQ_PLANAR_COLUMNS", "MMQ_PLANAR_ROWS", "MMQ_PLANAR_BLOCK_Y", "PLANAR_BYTES", "PLANAR_GROUP",
           "MOE_NAMES",
           "MMVQ_WIDTHS", "MMVQ_WRAPPER_ROWS", "MMVQ_WRAPPER_BLOCK", "MMQ_COLUMNS", "MMQ_BLOCK", "MMQ_STEP", "Q8_1_QK", "Q8_1_BYTES", "ROW_PADDING", "dequantize_word", "load_chunk",
           "group_sums", "dot_words", "dot_loaded", "chunk_dot"]
