"""Random launch arguments against the stdlib wrappers (``_wrapper_cases.py``), in a child process:
each case gives NumPy's answer or a clear error, and a crash fails this test naming the last case
the child printed. ``PYKERN_FUZZ_EXAMPLES=2000 python -m pytest tests/fuzz`` runs the long version."""
from __future__ import annotations

from pathlib import Path

from _isolated import run_isolated
from _programs import EXAMPLES

CASES = Path(__file__).resolve().parent / "_wrapper_cases.py"


def test_stdlib_wrappers_take_random_arguments():
    script = (f"import runpy, sys\nsys.argv = [{str(CASES)!r}, {str(EXAMPLES)!r}]\n"
              f"sys.path.insert(0, {str(CASES.parent)!r})\n"  # its helper module beside it
              f"runpy.run_path({str(CASES)!r}, run_name='__main__')\n")
    result = run_isolated(script, "stdlib wrappers under random arguments", timeout=1800)
    assert result.stdout.rstrip().endswith("DONE"), result.stdout[-2000:]
    assert result.stdout.count("CASE ") >= EXAMPLES
