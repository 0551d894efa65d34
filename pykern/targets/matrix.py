"""Wave-level matrix multiply-accumulate (``pk.mma``): how each target holds a 16x16 tile's fragments
and multiplies them.

A ``MatrixUnit`` is chosen per target, arch and input dtype (``Target.matrix_unit``); the lowering of
``pk.mma`` (``lang/builtins/mma.py``) calls its five operations and never sees a register layout:

* ``LaneMatrixUnit`` — an instruction whose operands are per-lane vectors in a documented layout (AMD
  MFMA, RDNA3/RDNA4 WMMA). Every layout used is affine in the lane's two halves of ``lane_id``: lane
  ``l`` holds, as its element ``i``, tile element ``(row, col)`` with ``row = s_lo * (l % 16) + s_hi *
  (l // 16) + offs[i]`` (likewise ``col``), so one ``Layout`` row describes it and the fragment loads
  and stores are per-lane loads and stores at those addresses, a run of consecutive elements as one
  4- to 16-byte access where aligned (``_LayoutUnit._wide``).
* ``PortableMatrixUnit`` — no matrix instruction (the CPU, RDNA2, the generic AMD targets, RDNA in
  wave64): fragments in a pykern layout as f32 vectors and the product through wave shuffles, the
  sixteen products of each element added to the accumulator in order of ``k``, in f32.
* ``MmaSyncMatrixUnit`` — NVIDIA's ``mma.sync`` m16n8k16 (two a tile), in PTX's documented layout
  (not ``wmma``, whose loads need 32-byte aligned tiles and whose layout is unspecified); from
  shared memory, ``ldmatrix.x4`` where the rows are 16-byte aligned.

All three compute ``D = A @ B + C`` for ``A`` 16 x K (row-major in memory), ``B`` K x 16 (row- or
column-major) and ``C``/``D`` 16x16: K = 16 for f16/bf16 into f32 (each product exact in f32), K = 32
for signed i8 into i32 (exact, wrapping like the hardware's sum).
"""
from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from .llvm_ext import intrinsic

I1, I8, I16, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.IntType(64)
F16, F32 = ir.HalfType(), ir.FloatType()
TILE = 16

#: the fragment roles: A (M x K), B (K x N), the accumulator (M x N)
ROLES = ("a", "b", "acc")


@dataclass(frozen=True)
class Axis:
    """One coordinate of a lane's element ``i``: ``lo * (lane % 16) + hi * (lane // 16) + offs[i]``."""

    lo: int
    hi: int
    offs: tuple[int, ...]


@dataclass(frozen=True)
class Layout:
    """Where a lane's fragment elements sit in the 16x16 tile (A: (m, k), B: (k, n), C: (m, n))."""

    row: Axis
    col: Axis
    #: the lane is split as ``(lane % split, lane // split)`` for ``Axis.lo`` and ``Axis.hi``
    split: int = TILE

    @property
    def count(self) -> int:
        return len(self.row.offs)


def _ramp(n: int, scale: int = 1) -> tuple[int, ...]:
    return tuple(i * scale for i in range(n))


def elem_type(dtype) -> ir.Type:
    """The LLVM type a tile element of ``dtype`` is stored as (bf16 as its i16 bits, like everywhere)."""
    return {"f16": F16, "bf16": I16, "f32": F32, "i32": I32, "i8": I8}[dtype.name]


def depth(dtype) -> int:
    """K of one step: 16 for f16/bf16, 32 for i8 (the shapes every vendor shares, module doc)."""
    return 32 if dtype.name == "i8" else TILE


class MatrixUnit:
    """The operations ``pk.mma`` lowers to (module doc); ``dtype`` is the inputs' element type."""

    #: what docs and ``pykern show`` call this unit on a target ("v_mfma_f32_16x16x16_f16", ...)
    instruction = ""

    def __init__(self, dtype):
        self.dtype = dtype

    def fragment_type(self, role: str, layout: str) -> ir.Type:
        raise NotImplementedError

    def load(self, frame, role: str, layout: str, ptr: ir.Value, ld: ir.Value) -> ir.Value:
        raise NotImplementedError

    def mma(self, frame, a: ir.Value, b: ir.Value, c: ir.Value, b_layout: str) -> ir.Value:
        raise NotImplementedError

    def store(self, frame, ptr: ir.Value, ld: ir.Value, c: ir.Value) -> None:
        raise NotImplementedError

    def zeros(self, role: str, layout: str = "row") -> ir.Constant:
        return ir.Constant(self.fragment_type(role, layout), None)


def _address(b: ir.IRBuilder, ptr: ir.Value, elem: ir.Type, row: ir.Value, col: ir.Value, ld: ir.Value,
             col_major: bool) -> ir.Value:
    """``ptr + row * ld + col`` (``col * ld + row`` for a column-major operand), in i64 elements."""
    major, minor = (col, row) if col_major else (row, col)
    off = b.add(b.mul(b.sext(major, I64), b.sext(ld, I64)), b.sext(minor, I64))
    return b.gep(ptr, [off], source_etype=elem)


def get(b: ir.IRBuilder, frag: ir.Value, i: int) -> ir.Value:
    """Element ``i`` of a fragment held as a vector or an array."""
    return b.extract_element(frag, I32(i)) if isinstance(frag.type, ir.VectorType) else b.extract_value(frag, i)


def put(b: ir.IRBuilder, frag: ir.Value, v: ir.Value, i: int) -> ir.Value:
    return b.insert_element(frag, v, I32(i)) if isinstance(frag.type, ir.VectorType) else b.insert_value(frag, v, i)


class _LayoutUnit(MatrixUnit):
    """Fragments as per-lane vectors (arrays on the CPU) in a ``Layout`` per role: loads and stores
    by address."""

    #: role -> Layout
    layouts: dict[str, Layout]

    def vector_type(self, role: str) -> ir.Type:
        raise NotImplementedError

    def fragment_type(self, role: str, layout: str) -> ir.Type:
        return self.vector_type(role)

    def _coords(self, frame, role: str) -> list[tuple[ir.Value, ir.Value]]:
        b = frame.builder
        lane = frame.lane_id()
        lay = self.layouts[role]
        lo, hi = b.urem(lane, I32(lay.split)), b.udiv(lane, I32(lay.split))

        def coord(axis: Axis, i: int) -> ir.Value:
            v = I32(axis.offs[i])
            if axis.lo:
                v = b.add(b.mul(lo, I32(axis.lo)), v)
            if axis.hi:
                v = b.add(b.mul(hi, I32(axis.hi)), v)
            return v
        return [(coord(lay.row, i), coord(lay.col, i)) for i in range(lay.count)]

    def convert_in(self, b: ir.IRBuilder, v: ir.Value, role: str) -> ir.Value:
        """A loaded element as the fragment holds it."""
        return v

    def _elem(self, role: str) -> ir.Type:
        return elem_type(self.dtype) if role != "acc" else self.vector_type("acc").element

    def _wide(self, frame, role: str, col_major: bool, ptr: ir.Value, ld: ir.Value, narrow, wide):
        """``wide(runs)`` where every run of ``runs`` (``_runs``) is aligned to its size in bytes, else
        ``narrow()`` (an element at a time): a run starts at a multiple of its length along the
        contiguous axis for every lane (``_runs`` checks the layout), so it is aligned when the tile's
        first element and the stride in bytes are multiples of the widest run's size. The test is one
        branch a fragment; LLVM folds it where the alignment is known (a shared array, constant
        offsets and ``ld``), leaving only one path."""
        b = frame.builder
        elem = self._elem(role)
        size = _bytes(elem)
        runs = _runs(self.layouts[role], col_major, size)
        width = max(n for _, n in runs) * size
        if width == size:
            return narrow()
        bits = b.or_(b.ptrtoint(ptr, I64), b.mul(b.sext(ld, I64), I64(size)))
        ok = b.icmp_unsigned("==", b.and_(bits, I64(width - 1)), I64(0))
        fast, slow, join = (b.append_basic_block(f"mma.{n}") for n in ("wide", "narrow", "end"))
        b.cbranch(ok, fast, slow)
        out = []
        for bb, fn in ((fast, lambda: wide(runs)), (slow, narrow)):
            b.position_at_end(bb)
            out.append((fn(), b.block))
            b.branch(join)
        b.position_at_end(join)
        if out[0][0] is None:
            return None
        phi = b.phi(out[0][0].type)
        for v, bb in out:
            phi.add_incoming(v, bb)
        return phi

    def load(self, frame, role, layout, ptr, ld):
        b = frame.builder
        elem = self._elem(role)
        col_major = role == "b" and layout == "col"
        coords = self._coords(frame, role)

        def narrow():
            vec = ir.Constant(self.vector_type(role), None)
            for i, (row, col) in enumerate(coords):
                v = b.load(_address(b, ptr, elem, row, col, ld, col_major), typ=elem)
                vec = put(b, vec, self.convert_in(b, v, role), i)
            return vec

        def wide(runs):
            vec = ir.Constant(self.vector_type(role), None)
            for first, n in runs:
                row, col = coords[first]
                at = _address(b, ptr, elem, row, col, ld, col_major)
                if n == 1:
                    vec = put(b, vec, self.convert_in(b, b.load(at, typ=elem), role), first)
                    continue
                v = b.load(at, typ=ir.VectorType(elem, n), align=n * _bytes(elem))
                for j in range(n):
                    vec = put(b, vec, self.convert_in(b, b.extract_element(v, I32(j)), role), first + j)
            return vec
        return self._wide(frame, role, col_major, ptr, ld, narrow, wide)

    def store(self, frame, ptr, ld, c):
        b = frame.builder
        elem = self._elem("acc")
        coords = self._coords(frame, "acc")

        def narrow():
            for i, (row, col) in enumerate(coords):
                b.store(get(b, c, i), _address(b, ptr, elem, row, col, ld, False))

        def wide(runs):
            for first, n in runs:
                row, col = coords[first]
                at = _address(b, ptr, elem, row, col, ld, False)
                if n == 1:
                    b.store(get(b, c, first), at)
                    continue
                v = ir.Constant(ir.VectorType(elem, n), None)
                for j in range(n):
                    v = b.insert_element(v, get(b, c, first + j), I32(j))
                b.store(v, at, align=n * _bytes(elem))
        self._wide(frame, "acc", False, ptr, ld, narrow, wide)

    def scale_add(self, frame, acc: ir.Value, prod: ir.Value, rows: tuple[ir.Value, ir.Type],
                  cols: tuple[ir.Value, ir.Type]) -> ir.Value:
        """``acc[r][c] = fma(rs[r] * cs[c], f32(prod[r][c]), acc[r][c])``: ``pk.mma.scale_add``
        (``rows``/``cols``: a pointer and its element type, f32 or f16; ``prod`` an i32 accumulator
        in the same layout as ``acc``, which every unit's two accumulators share)."""
        b = frame.builder
        out = acc
        for i, (r, c) in enumerate(self._coords(frame, "acc")):
            s = b.fmul(_scale(b, rows, r), _scale(b, cols, c))
            out = put(b, out, _fma(b, s, b.sitofp(get(b, prod, i), F32), get(b, acc, i)), i)
        return out

    def outer_add(self, frame, acc: ir.Value, rows: tuple[ir.Value, ir.Type],
                  cols: tuple[ir.Value, ir.Type]) -> ir.Value:
        """``acc[r][c] = fma(rv[r], cv[c], acc[r][c])``: ``pk.mma.outer_add``."""
        b = frame.builder
        out = acc
        for i, (r, c) in enumerate(self._coords(frame, "acc")):
            out = put(b, out, _fma(b, _scale(b, rows, r), _scale(b, cols, c), get(b, acc, i)), i)
        return out


def _bytes(t: ir.Type) -> int:
    return {F16: 2, I16: 2, F32: 4, I32: 4, I8: 1}[t]


def _scale(b: ir.IRBuilder, vec: tuple[ir.Value, ir.Type], index: ir.Value) -> ir.Value:
    """``vec[index]`` of a (pointer, element type) pair as f32 (f16 widened: exact)."""
    ptr, elem = vec
    v = b.load(b.gep(ptr, [b.sext(index, I64)], source_etype=elem), typ=elem)
    return b.fpext(v, F32) if elem == F16 else v


def _fma(b: ir.IRBuilder, x: ir.Value, y: ir.Value, z: ir.Value) -> ir.Value:
    """``x * y + z`` rounded once, on every target (llvm.fma, never a contractible fmul + fadd)."""
    fn = intrinsic(b.module, "llvm.fma.f32", F32, [F32, F32, F32])
    return b.call(fn, [x, y, z])


def _runs(lay: Layout, col_major: bool, size: int) -> list[tuple[int, int]]:
    """A lane's elements as (first, count) runs at consecutive addresses, count a power of two (at
    most 16 bytes) that divides the run's start along the contiguous axis for every lane (its lane
    coefficients and offset), so one alignment test covers every lane; greedy from element 0."""
    minor, major = (lay.row, lay.col) if col_major else (lay.col, lay.row)
    out, i = [], 0
    while i < lay.count:
        n = max(1, 16 // size)
        while n > 1 and not (
                i + n <= lay.count and minor.lo % n == 0 and minor.hi % n == 0 and minor.offs[i] % n == 0
                and all(minor.offs[i + j] == minor.offs[i] + j and major.offs[i + j] == major.offs[i]
                        for j in range(n))):
            n //= 2
        out.append((i, n))
        i += n
    return out


class LaneMatrixUnit(_LayoutUnit):
    """One AMD matrix instruction (module doc): ``intrinsic`` takes (A vector, B vector, C vector) and
    ``extra`` constant i32 operands after them (MFMA's cbsz, abid, blgp)."""

    def __init__(self, dtype, instruction: str, intrinsic_name: str, layouts: dict[str, Layout],
                 operand: ir.Type, acc: ir.Type, extra: int = 0):
        super().__init__(dtype)
        self.instruction, self.intrinsic_name, self.layouts = instruction, intrinsic_name, layouts
        self._types = {"a": operand, "b": operand, "acc": acc}
        self.extra = extra

    def vector_type(self, role):
        return self._types[role]

    def mma(self, frame, a, b, c, b_layout):
        args = [a, b, c] + [I32(0)] * self.extra
        fn = intrinsic(frame.builder.module, self.intrinsic_name, c.type, [x.type for x in args])
        return frame.builder.call(fn, args)


def _piece(b: ir.IRBuilder, vec: ir.Value, first: int, count: int, ty: ir.Type) -> ir.Value:
    """Elements ``first .. first + count`` of a vector fragment, bit-cast to an instruction operand."""
    sub = ir.Constant(ir.VectorType(vec.type.element, count), None)
    for j in range(count):
        sub = b.insert_element(sub, b.extract_element(vec, I32(first + j)), I32(j))
    return b.bitcast(sub, ty)


class SplitLaneUnit(LaneMatrixUnit):
    """A step made of ``pieces`` instructions, each on the next ``1 / pieces`` of A's and B's elements
    (the k slices of an i8 step where the arch's instruction is 16 deep), chained through C;
    ``operand`` is the type each slice is bit-cast to, ``call_args(a, b, c)`` the instruction's
    operands in order."""

    def __init__(self, dtype, instruction, intrinsic_name, layouts, vector, acc, operand, pieces, call_args):
        super().__init__(dtype, instruction, intrinsic_name, layouts, vector, acc)
        self.operand, self.pieces, self.call_args = operand, pieces, call_args

    def mma(self, frame, a, bv, c, b_layout):
        b = frame.builder
        n = self.layouts["a"].count // self.pieces
        for p in range(self.pieces):
            args = self.call_args(_piece(b, a, p * n, n, self.operand), _piece(b, bv, p * n, n, self.operand), c)
            fn = intrinsic(b.module, self.intrinsic_name, c.type, [x.type for x in args])
            c = b.call(fn, args)
        return c


def _mfma_args(a, b, c):
    return [a, b, c, I32(0), I32(0), I32(0)]


def _wmma_iu8_args(a, b, c):
    return [I1(1), a, I1(1), b, c, I1(0)]  # both signed, no clamp (the sum wraps)


def mfma_i8(dtype, gfx942: bool) -> LaneMatrixUnit:
    """CDNA's i8 MFMA, 16x16x32 a step: gfx942+ ``v_mfma_i32_16x16x32_i8`` (lane ``l`` holds
    ``A[l % 16][8 (l // 16) + i]``, B by column likewise, C as the f16 form's), gfx90a two
    ``v_mfma_i32_16x16x16i8`` (``k = 4 (l // 16) + (i & 3) + 16 (i >> 2)``)."""
    ks = _ramp(8) if gfx942 else tuple((i & 3) + 16 * (i >> 2) for i in range(8))
    hi = 8 if gfx942 else 4
    a = Layout(Axis(1, 0, (0,) * 8), Axis(0, hi, ks))
    b = Layout(Axis(0, hi, ks), Axis(1, 0, (0,) * 8))
    c = Layout(Axis(0, 4, _ramp(4)), Axis(1, 0, (0,) * 4))
    if gfx942:
        return SplitLaneUnit(dtype, "v_mfma_i32_16x16x32_i8", "llvm.amdgcn.mfma.i32.16x16x32.i8",
                             {"a": a, "b": b, "acc": c}, ir.VectorType(I8, 8), ir.VectorType(I32, 4), I64, 1,
                             _mfma_args)
    return SplitLaneUnit(dtype, "v_mfma_i32_16x16x16i8 (x2)", "llvm.amdgcn.mfma.i32.16x16x16i8",
                         {"a": a, "b": b, "acc": c}, ir.VectorType(I8, 8), ir.VectorType(I32, 4), I32, 2, _mfma_args)


def wmma_i8(dtype, rdna4: bool) -> LaneMatrixUnit:
    """RDNA's ``v_wmma_i32_16x16x16_iu8`` twice a 32-deep step (both operands signed): RDNA3 gives a
    lane a whole row of A / column of B (``k = i``, i < 32), RDNA4 half of one (``k = (i & 3) + 4 (l // 16)
    + 8 ((i >> 2) & 1) + 16 (i >> 3)``, i < 16); C as the f16 forms'."""
    if rdna4:
        ks = tuple((i & 3) + 8 * ((i >> 2) & 1) + 16 * (i >> 3) for i in range(16))
        a = Layout(Axis(1, 0, (0,) * 16), Axis(0, 4, ks))
        b = Layout(Axis(0, 4, ks), Axis(1, 0, (0,) * 16))
        c = Layout(Axis(0, 8, _ramp(8)), Axis(1, 0, (0,) * 8))
        n = 16
    else:
        a = Layout(Axis(1, 0, (0,) * 32), Axis(0, 0, _ramp(32)))
        b = Layout(Axis(0, 0, _ramp(32)), Axis(1, 0, (0,) * 32))
        c = Layout(Axis(0, 1, _ramp(8, 2)), Axis(1, 0, (0,) * 8))
        n = 32
    words = n // 8  # 32-bit words of one 16-deep half
    name = f"llvm.amdgcn.wmma.i32.16x16x16.iu8.v8i32.v{words}i32"
    return SplitLaneUnit(dtype, "v_wmma_i32_16x16x16_iu8 (x2)", name, {"a": a, "b": b, "acc": c},
                         ir.VectorType(I8, n), ir.VectorType(I32, 8), ir.VectorType(I32, words), 2, _wmma_iu8_args)


def mfma_16x16x16(dtype, gfx942_names: bool) -> LaneMatrixUnit:
    """CDNA's ``v_mfma_f32_16x16x16{f16,bf16}`` (wave64, four elements a lane): lane ``l`` holds
    ``A[l % 16][4 * (l // 16) + i]``, ``B[4 * (l // 16) + i][l % 16]`` and ``C[4 * (l // 16) + i][l % 16]``
    (AMD's matrix instruction calculator; verified on the emulator)."""
    a = Layout(Axis(1, 0, (0,) * 4), Axis(0, 4, _ramp(4)))
    kn = Layout(Axis(0, 4, _ramp(4)), Axis(1, 0, (0,) * 4))
    bf = dtype.name == "bf16"
    name = "llvm.amdgcn.mfma.f32.16x16x16bf16.1k" if bf else "llvm.amdgcn.mfma.f32.16x16x16f16"
    instr = ("v_mfma_f32_16x16x16_bf16" if gfx942_names else "v_mfma_f32_16x16x16bf16_1k") if bf else \
        ("v_mfma_f32_16x16x16_f16" if gfx942_names else "v_mfma_f32_16x16x16f16")
    return LaneMatrixUnit(dtype, instr, name, {"a": a, "b": kn, "acc": kn},
                          ir.VectorType(I16 if bf else F16, 4), ir.VectorType(F32, 4), extra=3)


def wmma_rdna3(dtype) -> LaneMatrixUnit:
    """RDNA3's ``v_wmma_f32_16x16x16_{f16,bf16}`` in wave32: lane ``l`` holds a whole row of A
    (``A[l % 16][i]``, i < 16; lanes 16-31 repeat lanes 0-15) and a whole column of B
    (``B[i][l % 16]``), and ``C[2 * i + l // 16][l % 16]``, i < 8 (RDNA3 ISA guide §7.9)."""
    bf = dtype.name == "bf16"
    a = Layout(Axis(1, 0, (0,) * 16), Axis(0, 0, _ramp(16)))
    b = Layout(Axis(0, 0, _ramp(16)), Axis(1, 0, (0,) * 16))
    c = Layout(Axis(0, 1, _ramp(8, 2)), Axis(1, 0, (0,) * 8))
    op = ir.VectorType(I16 if bf else F16, 16)
    name = f"llvm.amdgcn.wmma.f32.16x16x16.{'bf16' if bf else 'f16'}.v8f32.v16{'i16' if bf else 'f16'}"
    return LaneMatrixUnit(dtype, f"v_wmma_f32_16x16x16_{'bf16' if bf else 'f16'}", name,
                          {"a": a, "b": b, "acc": c}, op, ir.VectorType(F32, 8))


def wmma_rdna4(dtype) -> LaneMatrixUnit:
    """RDNA4's ``v_wmma_f32_16x16x16_{f16,bf16}`` in wave32: eight elements a lane; lane ``l`` holds
    ``A[l % 16][k]`` for ``k = 4 * (l // 16) + (i & 3) + 8 * (i >> 2)`` (lanes 0-15 take k 0-3 and
    8-11, lanes 16-31 k 4-7 and 12-15), B likewise by column, and ``C[8 * (l // 16) + i][l % 16]``
    (RDNA4 ISA guide; verified on the emulator)."""
    bf = dtype.name == "bf16"
    ks = tuple((i & 3) + 8 * (i >> 2) for i in range(8))
    a = Layout(Axis(1, 0, (0,) * 8), Axis(0, 4, ks))
    b = Layout(Axis(0, 4, ks), Axis(1, 0, (0,) * 8))
    c = Layout(Axis(0, 8, _ramp(8)), Axis(1, 0, (0,) * 8))
    op = ir.VectorType(I16 if bf else F16, 8)
    name = f"llvm.amdgcn.wmma.f32.16x16x16.{'bf16' if bf else 'f16'}.v8f32.v8{'i16' if bf else 'f16'}"
    return LaneMatrixUnit(dtype, f"v_wmma_f32_16x16x16_{'bf16' if bf else 'f16'}", name,
                          {"a": a, "b": b, "acc": c}, op, ir.VectorType(F32, 8))


class PortableMatrixUnit(_LayoutUnit):
    """No matrix instruction: with ``E = 256 / wave_size`` accumulator elements and ``F = 16 K /
    wave_size`` input elements a lane, lane ``l`` holds ``A[l % 16][F (l // 16) + i]``, ``B[F (l // 16) +
    i][l % 16]`` and ``C[E (l // 16) + i][l % 16]`` (at wave64 and K = 16 this is MFMA's layout). Inputs
    are widened to f32 (i8: i32) at the load, so each shuffle moves one element; for each k a lane
    pulls ``B[k][n]`` and the E values ``A[m][k]`` of its rows, and adds the products to its sums in
    order of k: in f32 for f16/bf16 (the products are exact: 11 + 11 or 8 + 8 significand bits), so
    the result is the sequential sum; in wrapping i32 for i8 (exact)."""

    instruction = "portable (wave shuffles)"

    def __init__(self, dtype, wave_size: int):
        super().__init__(dtype)
        self.k = k = depth(dtype)
        self.per_lane = e = TILE * TILE // wave_size
        self.per_lane_in = f = TILE * k // wave_size
        self.int = dtype.name == "i8"
        self.layouts = {"a": Layout(Axis(1, 0, (0,) * f), Axis(0, f, _ramp(f))),
                        "b": Layout(Axis(0, f, _ramp(f)), Axis(1, 0, (0,) * f)),
                        "acc": Layout(Axis(0, e, _ramp(e)), Axis(1, 0, (0,) * e))}

    def vector_type(self, role):
        # an array, not a vector: the CPU target's coroutine frames (a kernel with barriers or wave
        # operations) keep a variable live across a suspend at 16-byte alignment, and a <8 x float>
        # slot is accessed with 32-byte aligned vector moves (a segfault)
        return ir.ArrayType(I32 if self.int else F32, self.per_lane if role == "acc" else self.per_lane_in)

    def convert_in(self, b, v, role):
        if role == "acc":
            return v
        if self.int:
            return b.sext(v, I32)
        if self.dtype.name == "bf16":  # the bf16 bits are the high half of the f32's
            return b.bitcast(b.shl(b.zext(v, I32), I32(16)), F32)
        return b.fpext(v, F32)

    def mma(self, frame, a, bv, c, b_layout):
        b, e, f = frame.builder, self.per_lane, self.per_lane_in
        lane = frame.lane_id()
        lo, hi = b.urem(lane, I32(TILE)), b.udiv(lane, I32(TILE))

        def pull(vec: ir.Value, i: int, src: ir.Value) -> ir.Value:
            word = get(b, vec, i) if self.int else b.bitcast(get(b, vec, i), I32)
            got = frame.shuffle("idx", word, src, None)
            return got if self.int else b.bitcast(got, F32)
        # k outermost: B[k][n = lane % 16] (element k % F of lane n + 16 (k // F)), then for each of
        # the lane's rows m = E (lane // 16) + i, A[m][k] (element k % F of lane m + 16 (k // F));
        # only the E sums stay live
        mul, add = (b.mul, b.add) if self.int else (b.fmul, b.fadd)
        acc = [get(b, c, i) for i in range(e)]
        rows = [b.add(b.mul(hi, I32(e)), I32(i)) for i in range(e)]
        for k in range(self.k):
            bk = pull(bv, k % f, b.add(lo, I32(TILE * (k // f))))
            for i in range(e):
                acc[i] = add(acc[i], mul(pull(a, k % f, b.add(rows[i], I32(TILE * (k // f)))), bk))
        out = c
        for i in range(e):
            out = put(b, out, acc[i], i)
        return out


class MmaSyncMatrixUnit(_LayoutUnit):
    """NVIDIA's ``mma.sync.aligned`` (sm_80+), twice a step: one for each 8-column half of the tile.
    With ``g = lane // 4`` and ``t = lane % 4`` (PTX ISA, "Matrix fragments for mma.m16n8k16 /
    m16n8k32"), f16/bf16 (``m16n8k16.row.col.f32``): lane element ``i`` of A is ``A[g + 8 ((i >> 1) &
    1)][2 t + (i & 1) + 8 (i >> 2)]``, of B (``j = i % 4``, half ``h = i // 4``) ``B[2 t + (j & 1) + 8 (j >>
    1)][g + 8 h]``; i8 (``m16n8k32.row.col.s32.s8.s8``): A ``[g + 8 ((i >> 2) & 1)][4 t + (i & 3) + 16 (i
    >> 3)]``, B (``j = i % 8``, ``h = i // 8``) ``[4 t + (j & 3) + 16 (j >> 2)][g + 8 h]``; C (both) ``[g + 8
    ((i & 3) >> 1)][2 t + (i & 1) + 8 (i >> 2)]``. Loads and stores are per-lane accesses, so a fragment
    needs only its elements' alignment (``wmma.load`` needs 32-byte aligned tiles)."""

    def __init__(self, dtype):
        super().__init__(dtype)
        self.kind = dtype.name
        c = Layout(Axis(0, 1, tuple(8 * ((i & 3) >> 1) for i in range(8))),
                   Axis(2, 0, tuple((i & 1) + 8 * (i >> 2) for i in range(8))), split=4)
        if self.kind == "i8":
            self.instruction = "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"
            a = Layout(Axis(0, 1, tuple(8 * ((i >> 2) & 1) for i in range(16))),
                       Axis(4, 0, tuple((i & 3) + 16 * (i >> 3) for i in range(16))), split=4)
            b = Layout(Axis(4, 0, tuple((i & 3) + 16 * ((i & 7) >> 2) for i in range(16))),
                       Axis(0, 1, tuple(8 * (i >> 3) for i in range(16))), split=4)
        else:
            self.instruction = f"mma.sync.aligned.m16n8k16.row.col.f32.{self.kind}"
            a = Layout(Axis(0, 1, tuple(8 * ((i >> 1) & 1) for i in range(8))),
                       Axis(2, 0, tuple((i & 1) + 8 * (i >> 2) for i in range(8))), split=4)
            b = Layout(Axis(2, 0, tuple((i & 1) + 8 * ((i & 3) >> 1) for i in range(8))),
                       Axis(0, 1, tuple(8 * (i >> 2) for i in range(8))), split=4)
        self.layouts = {"a": a, "b": b, "acc": c}

    def load(self, frame, role, layout, ptr, ld):
        """From shared memory, one ``ldmatrix.x4`` a fragment (``.trans`` for a row-major f16/bf16 B)
        where every 8-element row starts 16-byte aligned (a run-time test, folded where known);
        otherwise, and from global memory, per-lane loads (``_LayoutUnit.load``)."""
        trans = role == "b" and layout == "row"
        if role == "acc" or ptr.type.addrspace != 3 or (trans and self.kind == "i8"):
            return super().load(frame, role, layout, ptr, ld)
        b = frame.builder
        elem = elem_type(self.dtype)
        size = _bytes(elem)
        bits = b.or_(b.ptrtoint(ptr, I64), b.mul(b.sext(ld, I64), I64(size)))
        ok = b.icmp_unsigned("==", b.and_(bits, I64(15)), I64(0))
        fast, slow, join = (b.append_basic_block(f"ldmatrix.{n}") for n in ("x4", "lanes", "end"))
        b.cbranch(ok, fast, slow)
        b.position_at_end(fast)
        # lane l gives the address of row l % 8 of matrix q = l // 8; the four matrices are the
        # operand's four registers in order: A and a row-major B (transposed) hold (rows + 8 (q & 1),
        # 16 bytes (q >> 1)), a column-major B (columns + 8 (q >> 1), 16 bytes (q & 1))
        lane = frame.lane_id()
        q, r = b.udiv(lane, I32(8)), b.urem(lane, I32(8))
        low, high = b.and_(q, I32(1)), b.lshr(q, I32(1))
        major_step, minor_step = (high, low) if role == "b" and layout == "col" else (low, high)
        major = b.add(r, b.mul(major_step, I32(8)))
        minor = b.mul(minor_step, I32(16 // size))
        at = _address(b, ptr, elem, major, minor, ld, False)
        name = f"llvm.nvvm.ldmatrix.sync.aligned.m8n8.x4{'.trans' if trans else ''}.b16"
        fn = intrinsic(b.module, name, ir.LiteralStructType([I32] * 4), [at.type])
        regs = b.call(fn, [at])
        words = ir.Constant(ir.VectorType(I32, 4), None)
        for j in range(4):
            words = b.insert_element(words, b.extract_value(regs, j), I32(j))
        wide = b.bitcast(words, self.vector_type(role))
        fast_end = b.block
        b.branch(join)
        b.position_at_end(slow)
        narrow = super().load(frame, role, layout, ptr, ld)
        slow_end = b.block
        b.branch(join)
        b.position_at_end(join)
        phi = b.phi(wide.type)
        phi.add_incoming(wide, fast_end)
        phi.add_incoming(narrow, slow_end)
        return phi

    def vector_type(self, role):
        if role == "acc":
            return ir.VectorType(I32 if self.kind == "i8" else F32, 8)
        return ir.VectorType(elem_type(self.dtype), self.layouts[role].count)

    def mma(self, frame, a, bv, c, b_layout):
        b = frame.builder
        per = 4 if self.kind == "i8" else 2  # elements a 32-bit register holds
        pair = ir.VectorType(elem_type(self.dtype), per)

        def regs(vec, first, n):  # n registers of `per` elements each, as mma.sync takes them
            out = []
            for r in range(n):
                p = ir.Constant(pair, None)
                for h in range(per):
                    p = b.insert_element(p, b.extract_element(vec, I32(first + per * r + h)), I32(h))
                out.append(p if self.kind == "f16" else b.bitcast(p, I32))
            return out
        a_regs = regs(a, 0, 4)
        # LLVM names the f16 form by its D and C types, the bf16 and s8 ones by their inputs
        name = {"f16": "llvm.nvvm.mma.m16n8k16.row.col.f32.f32", "bf16": "llvm.nvvm.mma.m16n8k16.row.col.bf16",
                "i8": "llvm.nvvm.mma.m16n8k32.row.col.s8"}[self.kind]
        half_b = self.layouts["b"].count // 2
        out = c
        for half in range(2):
            b_regs = regs(bv, half_b * half, 2)
            acc = [b.extract_element(c, I32(4 * half + j)) for j in range(4)]
            args = a_regs + b_regs + acc
            fn = intrinsic(b.module, name, ir.LiteralStructType([acc[0].type] * 4), [x.type for x in args])
            d = b.call(fn, args)
            for j in range(4):
                out = b.insert_element(out, b.extract_value(d, j), I32(4 * half + j))
        return out
