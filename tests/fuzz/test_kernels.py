"""Random valid kernels (expression trees over five dtypes, branches, loops, shared memory) compiled
for and run on the CPU target, against a NumPy evaluation of the same program, bit for bit.

``PYKERN_FUZZ_EXAMPLES=2000 python -m pytest tests/fuzz`` runs the long version."""
from __future__ import annotations

import importlib.util
import itertools

import numpy as np
import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from _programs import BLOCK, DTYPES, FUZZ, inputs, programs

_counter = itertools.count()


def load(source: str, tmp_path):
    """The kernel ``fuzzed`` from ``source`` (written to a file: kernels need their source text)."""
    path = tmp_path / f"fuzzed_{next(_counter)}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.fuzzed


@pytest.mark.parametrize("tag", list(DTYPES))
def test_random_kernels_match_numpy(tag, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(f"fuzz_{tag}")

    @FUZZ
    @given(prog=programs(tag), blocks=st.integers(1, 3), seed=st.integers(0, 2 ** 16))
    def check(prog, blocks, seed):
        note(prog.source)
        n = blocks * BLOCK
        a, b = inputs(tag, n, seed)
        out = np.zeros(n, DTYPES[tag])
        load(prog.source, tmp)[blocks, BLOCK](n, a, b, out)
        want = prog.run(a, b)
        bad = np.flatnonzero(~((out == want) | (np.isnan(out) & np.isnan(want)))) if DTYPES[tag] in (np.float32, np.float64) \
            else np.flatnonzero(out != want)
        assert not bad.size, (f"{bad.size} of {n} elements differ, first at {bad[0]}: got {out[bad[0]]!r}, "
                              f"want {want[bad[0]]!r} (x={a[bad[0]]!r}, y={b[bad[0]]!r})\n{prog.source}")

    check()
