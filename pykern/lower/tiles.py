"""``pk.grid_stride`` loops in tiles: several adjacent elements per thread and step.

A GPU reaches its memory bandwidth only with enough bytes in flight per SM; one 4-byte load per
thread is a third of what an H100 needs, and candle launches exactly one thread per element. The
iterations of a grid-stride loop are independent and unordered (``nodes.ForRange``), so the lowering
may give each thread a *tile* of ``tile_bytes`` (16 on NVIDIA: one ``ld.v4``) of every array the body
indexes, and may hoist and batch the tile's loads and stores:

* streaming bodies (small straight-line code): the copies of the body sit in one basic block
  and LLVM merges their accesses into vector loads and stores by itself;
* bigger loop-free bodies (inlined math: exp, tanh, erf ...): the unconditional ``p[i]`` loads of all
  copies are issued first (merged into vector loads), the copies compute, and a final ``q[i] = ...``
  of every copy is stored last (merged into a vector store);
* bodies with loops (strided indexing) keep one element per step: their cost is not the memory.

Under candle's launch (``ceil(n/1024)`` blocks of 1024 threads) the threads past ``n/width`` find
no tile and return: the busy blocks come first. Measured on an H200 (``benchmarks/gpu.py``,
``benchmarks/candle_shape_probe.py``), that beats spreading the busy blocks over the grid, and beats
keeping every block on its own elements with a quarter of its threads; under that shape even an
empty kernel takes 0.8x the time PyTorch needs to fill the buffer.
"""
from __future__ import annotations

from llvmlite import ir

from ..ir import nodes as N
from ..ir import types as T
from .convert import I1, I32, I64, storage_type

#: tiles of a body that needs its loads hoisted take at most this many elements, and their copies
#: at most this many typed-IR nodes together: compile time grows with the copies, and bodies that big
#: (sin, pow) are bound by their arithmetic, not by memory
MAX_STAGED = 8
STAGED_BUDGET = 3000


def _size(stmts) -> int:
    """Typed-IR nodes under ``stmts``, callees counted where they are called (they are inlined)."""
    total = 0
    for node in N.walk(stmts):
        total += 1 + (_callee_size(node.func) if isinstance(node, N.Call) else 0)
    return total


def _callee_size(fn: N.Function) -> int:
    """``_size`` of a device function's body, kept on the function (typed IR does not change once
    typed; like ``ssa_locals``): a math body's callees were walked again at every call site, their
    callees at each of theirs."""
    size = fn.__dict__.get("_tile_size")
    if size is None:
        size = fn._tile_size = _size(fn.body)
    return size


def _has_loops(body) -> bool:
    return any(isinstance(n, (N.While, N.ForRange)) or (isinstance(n, N.Call) and _callee_has_loops(n.func))
               for n in N.walk(body))


def _callee_has_loops(fn: N.Function) -> bool:
    found = fn.__dict__.get("_tile_loops")
    if found is None:
        found = fn._tile_loops = _has_loops(fn.body)
    return found


def _streaming(body) -> bool:
    """Small straight-line code (callees included; ``and``/``or``/``x if c else y`` become selects):
    LLVM merges its copies' accesses into vector loads and stores by itself."""
    return _size(body) <= 250 and not any(
        isinstance(n, (N.If, N.While, N.ForRange, N.Return, N.Break, N.Continue)) or
        (isinstance(n, N.Call) and not _callee_streaming(n.func)) for n in N.walk(body))


def _callee_streaming(fn: N.Function) -> bool:
    found = fn.__dict__.get("_tile_streaming")
    if found is None:
        found = fn._tile_streaming = _streaming(fn.body)
    return found


def _stageable(body) -> bool:
    """Every copy of a loop-free body runs to its end: no break, continue or return leaves the body
    (returns inside inlined callees stay inside them), so hoisted loads and deferred stores are safe."""
    return not any(isinstance(n, (N.Break, N.Continue, N.Return)) for n in N.walk(body))


def _is_element(e: N.Expr, var: str, pointers: set[str]) -> bool:
    """``p[var]`` for a tile pointer ``p`` (not ``pk.load``'s: its cache policy stays on its own access)."""
    return (not e.eviction and not getattr(e, "align", 0) and isinstance(e.ptr, N.Var) and e.ptr.name in pointers
            and isinstance(e.index, N.Var) and e.index.name == var)


def _writes(node) -> bool:
    """Whether ``node`` may write memory: a store, a built-in given a pointer (atomics, ``pk.store``;
    ``pk.load`` too, conservatively), or a call of a device function that does either."""
    if isinstance(node, N.Store):
        return True
    if isinstance(node, N.Intrinsic):
        return any(isinstance(a.ty, T.PtrType) for a in node.args)
    return isinstance(node, N.Call) and any(_writes(n) for n in N.walk(node.func.body))


def _unconditional_loads(body: list[N.Stmt], var: str, pointers: set[str]) -> list[N.Load]:
    """The ``p[var]`` loads every pass through ``body`` performs, safe to issue before the body: in
    the statements before the first control flow, outside short-circuit and conditional expressions
    (reading those early could touch memory the body never reads, e.g. behind a null check), and
    before any write to ``p`` (a load after ``p[i] = ...`` in the same pass must see that store:
    ``q[i], r[i] = f(i); q[i] += 1``). A statement that writes through a built-in or a call ends the
    search, since its loads and its write are not ordered by the statement's shape alone."""
    found: list[N.Load] = []
    written: set[str] = set()

    def visit(e):
        if isinstance(e, (N.Logical, N.IfExp)):
            return visit(e.lhs if isinstance(e, N.Logical) else e.cond)
        if isinstance(e, N.Load) and _is_element(e, var, pointers) and e.ptr.name not in written:
            found.append(e)
        for name in getattr(e, "__dataclass_fields__", ()):
            child = getattr(e, name) if name not in ("loc", "ty", "func") else None
            if isinstance(child, N.Expr):
                visit(child)
            elif isinstance(child, list):
                for c in child:
                    if isinstance(c, N.Expr):
                        visit(c)

    for s in body:
        if not isinstance(s, (N.Assign, N.Store, N.ExprStmt)):
            break
        if any(_writes(n) for n in N.walk([s]) if n is not s):
            break
        visit(s)  # a Store's value and index are read before it writes
        if isinstance(s, N.Store):
            written.add(s.ptr.name if isinstance(s.ptr, N.Var) else "")
            if not isinstance(s.ptr, N.Var):
                break  # a computed pointer may be any of them
    return found


def _final_stores(body: list[N.Stmt], var: str, pointers: set[str]) -> list[N.Store]:
    """The body's trailing ``q[var] = ...`` statements (of a stageable body, so every copy reaches
    them): their stores can wait until all copies have computed, one statement's at a time. Stores
    to several rows of one output (``out0[e] = a; out1[e] = b``) are merged into vector stores only
    so: interleaved, a store to a row that may be the other row stops each row's run of stores."""
    found: list[N.Store] = []
    for s in reversed(body):
        if not (isinstance(s, N.Store) and _is_element(s, var, pointers)):
            break
        found.append(s)
        if _reads(s):  # an earlier store, deferred, would not be there yet for this one to read
            break
    return found[::-1]


def _reads(s: N.Store) -> bool:
    """Whether computing ``s``'s index or value may read memory (conservatively: any call)."""
    return any(isinstance(n, (N.Load, N.Call)) or (isinstance(n, N.Intrinsic) and any(
        isinstance(a.ty, T.PtrType) for a in n.args)) for n in N.walk([s.value, s.index]))


class GridTiles:
    """The grid-stride part of ``FunctionLowering`` (a mixin: it uses the lowering's builder,
    scope and statement lowering)."""

    tile_offset: ir.Value | None = None
    #: id(Load) -> its value in each copy of the current tile (hoisted loads)
    staged_loads: dict[int, list[ir.Value]] = {}
    #: (the final Store, where its copies' (address, value) pairs are collected)
    #: id(Store) -> the (address, value, elem) of each copy, for the tile's trailing stores
    deferred_stores: dict[int, list] = {}
    tile_copy: int = 0
    tile_streaming: bool = False

    def tile_width(self, s: N.ForRange) -> int:
        """Elements per tile for this loop on this target: 1 means a plain grid-stride loop."""
        pointers = self.tile_pointers(s)
        if not self.target.tile_bytes or not pointers or _has_loops(s.body):
            return 1
        # grid_loop makes the same choice from this (tiled bodies have no loops, so no nesting)
        self.tile_streaming = streaming = _streaming(s.body)
        if not streaming and not _stageable(s.body):
            return 1
        width = self.target.tile_bytes // min(ty.elem.nbytes for _, ty in pointers)
        if not streaming:
            width = min(width, MAX_STAGED, STAGED_BUDGET // _size(s.body))
        return 1 << (max(1, min(width, 16)).bit_length() - 1)  # a power of two

    def grid_tiles(self, s: N.ForRange, ilp: int, offset) -> None:
        """``grid_stride(n)`` in tiles of ``ilp`` adjacent elements, when every pointer the body
        indexes is aligned to a tile (checked once): whole tiles ``[ilp*j, ilp*j + ilp)`` as ``ilp``
        copies of the body whose accesses are vector accesses, then the last ``n % ilp`` elements
        one at a time. Unaligned pointers take the one-at-a-time loop for every element: it is the
        same loop (one more copy of the body in all), entered at 0 instead of the tail."""
        b = self.b
        n, first, step = self.expr(s.stop), self.expr(s.start), self.expr(s.step)
        # the vector path needs the offset (parallel_range's lo) and every pointer tile-aligned;
        # llvm.ptrmask tells LLVM the low bits of the pointers it uses there are zero
        aligned = ir.Constant(I1, 1) if offset is None else b.icmp_unsigned(
            "==", b.and_(offset, ir.Constant(offset.type, ilp - 1)), ir.Constant(offset.type, 0))
        masked = []
        for name, pty in self.tile_pointers(s):
            slot = self.scope[name][0]
            p = b.load(slot)
            mask = ir.Constant(I64, -(ilp * pty.elem.nbytes))
            fn = self.b.module.globals.get(f"llvm.ptrmask.{p.type.intrinsic_name}.i64") or ir.Function(
                self.b.module, ir.FunctionType(p.type, [p.type, I64]), f"llvm.ptrmask.{p.type.intrinsic_name}.i64")
            masked.append((slot, p, b.call(fn, [p, mask])))
            # test the low bits, not p == pa: an equality would let GVN put p back in pa's place
            low = b.and_(b.ptrtoint(p, I64), ir.Constant(I64, ilp * pty.elem.nbytes - 1))
            aligned = b.and_(aligned, b.icmp_unsigned("==", low, ir.Constant(I64, 0)))
        self.tile_offset = offset
        tiles = b.udiv(n, ir.Constant(n.type, ilp))
        # aligned, a worker at or past both the whole tiles and the tail's elements has nothing to
        # do: it leaves at once (under candle's launch most threads do, and the instructions they
        # run before leaving bound the kernel: 30 SASS instructions instead of 39 for badd_f32)
        tail = b.urem(n, ir.Constant(n.type, ilp))
        idle = b.and_(aligned, b.icmp_unsigned(">=", first, b.select(b.icmp_unsigned(">", tiles, tail), tiles, tail)))
        vec_bb, tail_bb, done, busy = (b.append_basic_block(f"grid.{x}") for x in ("vector", "tail", "end", "busy"))
        b.cbranch(idle, done, busy)
        b.position_at_end(busy)
        entry = b.block
        b.cbranch(aligned, vec_bb, tail_bb)
        # --- whole tiles, through the aligned copies of the pointers
        b.position_at_end(vec_bb)
        for slot, _, pa in masked:
            b.store(pa, slot)
        vec_end = b.append_basic_block("grid.vector.end")
        self.grid_loop(s, first, tiles, step, ilp, vec_end, self.mirror(s, tiles, ir.Constant(n.type, 0)))
        b.position_at_end(vec_end)
        for slot, p, _ in masked:
            b.store(p, slot)
        tail_start = b.mul(tiles, ir.Constant(n.type, ilp))
        b.branch(tail_bb)
        # --- one element at a time: the tail after the tiles, or everything (unaligned)
        b.position_at_end(tail_bb)
        start = b.phi(n.type)
        start.add_incoming(ir.Constant(n.type, 0), entry)
        start.add_incoming(tail_start, vec_end)
        self.grid_loop(s, b.add(start, first), n, step, 1, done, self.mirror(s, n, start))
        b.position_at_end(done)
        self.tile_offset = None

    def tile_pointers(self, s: N.ForRange) -> list[tuple[str, T.PtrType]]:
        """Pointer variables the loop body reads but never reassigns: the ones tiles can align."""
        used, assigned = set(), set()
        for node in N.walk(s.body):
            if isinstance(node, N.Var):
                used.add(node.name)
            elif isinstance(node, N.Assign):
                assigned.add(node.name)
        return [(name, ty) for name, (_, ty) in self.scope.items()
                if name in used and name not in assigned and isinstance(ty, T.PtrType) and ty.space == "global"]

    def mirror(self, s: N.ForRange, stop, start):
        """``top`` for a descending loop over [start, stop): its counted j stands for top - j."""
        return self.b.sub(self.b.add(stop, start), ir.Constant(stop.type, 1)) if s.descending else None

    def grid_loop(self, s: N.ForRange, first, stop, step, ilp: int, done, top=None) -> None:
        """for j in range(first, stop, step): the body for elements ilp*j ... ilp*j + ilp - 1, or for
        tile ``top - j`` instead of j (``descending``)."""
        b = self.b
        slot = self.frame.alloca(self.ltype(s.start.ty), s.var + ".tile")
        b.store(first, slot)
        head, body, nxt = (b.append_basic_block(f"grid.{x}") for x in ("cond", "body", "next"))
        b.branch(head)
        b.position_at_end(head)
        b.cbranch(b.icmp_unsigned("<", b.load(slot), stop), body, done)
        b.position_at_end(body)
        j = b.load(slot) if top is None else b.sub(top, b.load(slot))
        if ilp == 1:
            self.grid_copies(s, [j], nxt, done)
        else:
            base = b.mul(j, ir.Constant(stop.type, ilp))
            indices = [b.add(base, ir.Constant(stop.type, k)) for k in range(ilp)]
            if self.tile_streaming:
                self.grid_copies(s, indices, nxt, done)
            else:
                self.staged_copies(s, indices, nxt)
        b.position_at_end(nxt)
        b.store(b.add(b.load(slot), step), slot)
        b.branch(head)

    def set_loop_var(self, s: N.ForRange, i: ir.Value) -> None:
        self.b.store(i if self.tile_offset is None else self.b.add(self.tile_offset, i), self.scope[s.var][0])

    def grid_copies(self, s: N.ForRange, indices, nxt, done) -> None:
        """The loop body once per index: ``continue`` goes to the next copy. A streaming tile (no
        control flow) that ends in stores through two or more pointers stores after its copies, one
        statement's elements after another (``_final_stores``)."""
        b = self.b
        finals = _final_stores(s.body, s.var, {name for name, _ in self.tile_pointers(s)}) \
            if len(indices) > 1 and self.tile_streaming else []
        self.deferred_stores = {id(st): [] for st in finals} if len(finals) > 1 else {}
        for i in indices:
            after = b.append_basic_block("grid.copy")
            self.set_loop_var(s, i)
            self.loops.append((after, done))
            self.stmts(s.body)
            self.loops.pop()
            if not b.block.is_terminated:
                b.branch(after)
            b.position_at_end(after)
        deferred, self.deferred_stores = self.deferred_stores, {}
        for st in finals if deferred else ():
            for ptr, value, elem in deferred[id(st)]:
                self.store_element(st, ptr, value, elem)
        b.branch(nxt)

    def staged_copies(self, s: N.ForRange, indices: list[ir.Value], nxt) -> None:
        """A whole tile of a loop-free body with branches: every unconditional element load as one
        vector load, the copies (reading the hoisted elements), then the final element store of every
        copy as one vector store. Explicit vectors: hoisted scalar loads would be sunk back to their
        uses by the optimiser, each behind the previous copy's branches."""
        b = self.b
        pointers = {name for name, _ in self.tile_pointers(s)}
        finals = _final_stores(s.body, s.var, pointers)
        self.set_loop_var(s, indices[0])
        hoisted: dict[int, list[ir.Value]] = {}
        for ld in _unconditional_loads(s.body, s.var, pointers):
            ptr, elem = self.address(ld.ptr, ld.index)
            vty = ir.VectorType(storage_type(elem), len(indices))
            vec = self.guarded_bytes(ptr, elem.nbytes * len(indices), lambda ptr=ptr, vty=vty: b.load(
                ptr, typ=vty, align=vty.count * elem.nbytes))
            hoisted[id(ld)] = [self.from_memory(b.extract_element(vec, ir.Constant(I32, k)), elem)
                               for k in range(len(indices))]
        self.staged_loads = hoisted
        self.deferred_stores = {id(st): [] for st in finals}
        for k, i in enumerate(indices):
            self.tile_copy = k
            self.set_loop_var(s, i)
            self.stmts(s.body)  # stageable: no break or continue to wire up
        deferred, self.staged_loads, self.deferred_stores = self.deferred_stores, {}, {}
        for st in finals:
            stores = deferred[id(st)]
            (ptr, _, elem) = stores[0]
            vec = ir.Constant(ir.VectorType(storage_type(elem), len(stores)), None)
            for k, (_, value, _) in enumerate(stores):
                vec = b.insert_element(vec, value, ir.Constant(I32, k))
            self.guarded_bytes(ptr, elem.nbytes * len(stores),
                               lambda ptr=ptr, vec=vec, n=len(stores), elem=elem: b.store(vec, ptr, align=n * elem.nbytes))
        b.branch(nxt)

    def staged_load(self, e: N.Load) -> ir.Value | None:
        """The hoisted value of ``e`` in the current copy, if ``e`` was hoisted."""
        values = self.staged_loads.get(id(e))
        return None if values is None else values[self.tile_copy]

    def defer_store(self, s: N.Store, ptr: ir.Value, value: ir.Value, elem) -> bool:
        """Collect ``s``'s store for after the copies when it is one of the tile's trailing stores."""
        stores = self.deferred_stores.get(id(s))
        if stores is None:
            return False
        stores.append((ptr, value, elem))
        return True
