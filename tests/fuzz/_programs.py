"""Random valid kernels and the NumPy evaluation of the same program.

A program is straight-line code, branches, counted loops and (optionally) a shared-memory exchange
over one dtype, built from expression trees. ``Program.source`` is a pykern kernel; ``Program.run``
evaluates the same statements on NumPy arrays of that dtype, elementwise, with C's integer
semantics (wrapping, truncating division) and IEEE arithmetic without contraction, which is what
the CPU target compiles to. The two must agree bit for bit (NaN aside: inputs keep values small).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

#: ``PYKERN_FUZZ_EXAMPLES`` (default 20): cases per property; 2000 is the long run
EXAMPLES = int(os.environ.get("PYKERN_FUZZ_EXAMPLES", "20"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])

DTYPES = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "u32": np.uint32, "i64": np.int64}
BLOCK = 64  # threads a block, and the shared array's length


def is_float(tag: str) -> bool:
    return tag.startswith("f")


# ---------------------------------------------------------------- expressions
@dataclass
class Expr:
    src: str
    fn: object  # (env: dict[str, np.ndarray]) -> np.ndarray


def _trunc_div(a, d, np_t):
    q = a // d
    fix = ((a % d) != 0) & (a < 0)
    return (q + fix).astype(np_t)


def expressions(tag: str, names: list[str], depth: int = 3):
    """Expression trees over the variables ``names`` of dtype ``tag``."""
    np_t = DTYPES[tag]
    leaves = [st.sampled_from(names).map(lambda n: Expr(n, lambda env, n=n: env[n]))]
    if is_float(tag):
        consts = st.sampled_from([0.5, 1.5, 2.0, -0.75, 3.0])
    else:
        consts = st.integers(0 if tag == "u32" else -9, 9)
    # typed constants (``f32(1.5)``): a literal-only subtree is then still of the program's dtype
    leaves.append(consts.map(lambda c: Expr(f"{tag}({c!r})", lambda env, c=c: np.full(env["_n"], c, np_t))))
    leaf = st.one_of(*leaves)

    def extend(sub):
        binops = ["+", "-", "*"] + ([] if is_float(tag) else ["&", "|", "^"])

        def binop(op, a, b):
            f = {"+": np.add, "-": np.subtract, "*": np.multiply, "&": np.bitwise_and, "|": np.bitwise_or,
                 "^": np.bitwise_xor}[op]
            return Expr(f"({a.src} {op} {b.src})", lambda env: f(a.fn(env), b.fn(env)).astype(np_t))

        def minmax(which, a, b):
            f = np.minimum if which == "min" else np.maximum
            return Expr(f"{which}({a.src}, {b.src})", lambda env: f(a.fn(env), b.fn(env)).astype(np_t))

        def select(cmp, a, b, c, d):
            f = {"<": np.less, ">": np.greater, "<=": np.less_equal, "==": np.equal}[cmp]
            return Expr(f"({c.src} if {a.src} {cmp} {b.src} else {d.src})",
                        lambda env: np.where(f(a.fn(env), b.fn(env)), c.fn(env), d.fn(env)).astype(np_t))

        options = [st.builds(binop, st.sampled_from(binops), sub, sub),
                   st.builds(minmax, st.sampled_from(["min", "max"]), sub, sub),
                   st.builds(select, st.sampled_from(["<", ">", "<=", "=="]), sub, sub, sub, sub)]
        if not is_float(tag):
            def divmod_(op, a, d):
                if op == "//":
                    return Expr(f"({a.src} // {d})", lambda env: _trunc_div(a.fn(env), np_t(d), np_t))
                return Expr(f"({a.src} % {d})",
                            lambda env: (a.fn(env) - _trunc_div(a.fn(env), np_t(d), np_t) * np_t(d)).astype(np_t))
            options.append(st.builds(divmod_, st.sampled_from(["//", "%"]), sub, st.integers(1, 7)))
            options.append(st.builds(lambda a, s: Expr(f"({a.src} >> {s})",
                                                       lambda env: (a.fn(env) >> np_t(s)).astype(np_t)),
                                     sub, st.integers(0, 5)))
        else:
            options.append(sub.map(lambda a: Expr(f"abs({a.src})", lambda env: np.abs(a.fn(env)).astype(np_t))))
        return st.one_of(*options)

    return st.recursive(leaf, extend, max_leaves=2 ** depth)


# ---------------------------------------------------------------- statements and programs
@dataclass
class Program:
    tag: str
    lines: list[str] = field(default_factory=list)
    steps: list = field(default_factory=list)  # (env) -> None, in order
    shared: bool = False

    @property
    def source(self) -> str:
        head = ["import pykern as pk", "from pykern import ConstPtr, Ptr, usize, f32, f64, i32, u32, i64", "", "",
                "@pk.kernel",
                f"def fuzzed(n: usize, a: ConstPtr[{self.tag}], b: ConstPtr[{self.tag}], out: Ptr[{self.tag}]):"]
        if self.shared:
            head.append(f"    s = pk.shared.array({BLOCK}, {self.tag})")
        body = ["    i = pk.global_id()", "    x = a[i]", "    y = b[i]"]  # the launch covers n exactly
        body += ["    " + line for line in self.lines]
        body += ["    if i < n:", "        out[i] = v"]
        return "\n".join(head + body) + "\n"

    def run(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        env = {"x": a.copy(), "y": b.copy(), "_n": a.size}
        with np.errstate(all="ignore"):
            for step in self.steps:
                step(env)
        return env["v"]


def programs(tag: str):
    """A program of 2-4 statements over ``tag`` ending in the value ``v``."""
    np_t = DTYPES[tag]

    @st.composite
    def build(draw):
        prog = Program(tag)
        names = ["x", "y"]
        for k in range(draw(st.integers(1, 3))):
            name = f"t{k}"
            kind = draw(st.sampled_from(["assign", "branch", "loop", "shared"]))
            e = draw(expressions(tag, names))
            if kind == "assign":
                prog.lines.append(f"{name} = {e.src}")
                prog.steps.append(lambda env, name=name, e=e: env.__setitem__(name, e.fn(env)))
            elif kind == "branch":  # both branches assign: a read after it is defined
                c, d = draw(expressions(tag, names, 2)), draw(expressions(tag, names, 2))
                prog.lines += [f"if {c.src} < {d.src}:", f"    {name} = {e.src}", "else:", f"    {name} = {d.src}"]
                prog.steps.append(lambda env, name=name, c=c, d=d, e=e: env.__setitem__(
                    name, np.where(c.fn(env) < d.fn(env), e.fn(env), d.fn(env)).astype(np_t)))
            elif kind == "loop":  # a counted loop accumulating: 1-3 trips
                trips = draw(st.integers(1, 3))
                prog.lines += [f"{name} = {e.src}", f"for j in range({trips}):", f"    {name} = {name} + x"]

                def loop(env, name=name, e=e, trips=trips):
                    v = e.fn(env)
                    for _ in range(trips):
                        v = (v + env["x"]).astype(np_t)
                    env[name] = v
                prog.steps.append(loop)
            else:  # shared memory: each thread publishes e, reads its neighbour's after a barrier
                prog.shared = True
                prog.lines += [f"s[pk.thread_idx.x] = {e.src}", "pk.syncthreads()",
                               f"{name} = s[(pk.thread_idx.x + 1) % {BLOCK}]", "pk.syncthreads()"]

                def exchange(env, name=name, e=e):
                    v = e.fn(env)
                    pad = -v.size % BLOCK
                    blocks = np.concatenate([v, np.zeros(pad, np_t)]).reshape(-1, BLOCK)
                    env[name] = np.roll(blocks, -1, axis=1).reshape(-1)[: v.size].astype(np_t)
                prog.steps.append(exchange)
            names.append(name)
        last = draw(expressions(tag, names))
        prog.lines.append(f"v = {last.src}")
        prog.steps.append(lambda env, last=last: env.__setitem__("v", last.fn(env)))
        return prog

    return build()


def inputs(tag: str, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    if is_float(tag):
        return (rng.uniform(-4, 4, n).astype(DTYPES[tag]), rng.uniform(-4, 4, n).astype(DTYPES[tag]))
    info = np.iinfo(DTYPES[tag])
    lo, hi = max(info.min, -1000), min(info.max, 1000)
    return rng.integers(lo, hi, n, dtype=DTYPES[tag]), rng.integers(lo, hi, n, dtype=DTYPES[tag])
