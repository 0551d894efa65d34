"""Each example runs as `python examples/X.py` in a fresh process and reports OK."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ["saxpy.py", "block_reduce.py", "wave_reduce.py", "gguf_matvec.py"]


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_runs(name):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / name)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, (proc.stdout, proc.stderr[-3000:])
    assert "OK" in proc.stdout and "FAILED" not in proc.stdout, proc.stdout


def test_examples_exist():
    assert set(EXAMPLES) <= {p.name for p in (ROOT / "examples").glob("*.py")}
