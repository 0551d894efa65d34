"""A child-process harness: run code that could crash the interpreter, and turn a crash into a test
failure that names the case.

A segfault (or an abort, or a hang) in a kernel launch would kill the pytest process and every test
after it. ``run_isolated`` runs a script in a fresh interpreter with the same environment (the
session's cache directory included) and fails the calling test with the case's name, the signal and
the child's output when it does not exit cleanly.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def run_isolated(script: str, case: str, timeout: float = 120.0) -> subprocess.CompletedProcess:
    """Run ``script`` (written to a file: kernels need their source) from the repository root; fail
    naming ``case`` unless it exits with status 0 within ``timeout`` seconds."""
    env = dict(os.environ, PYTHONFAULTHANDLER="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    with tempfile.TemporaryDirectory(prefix="pykern-isolated-") as tmp:
        path = Path(tmp) / "case.py"
        path.write_text(script)
        try:
            result = subprocess.run([sys.executable, str(path)], cwd=REPO, env=env, capture_output=True,
                                    text=True, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            result = exc
    if isinstance(result, subprocess.TimeoutExpired):
        exc = result
        pytest.fail(f"case {case!r} hung (no exit within {timeout:g} s)\n{_tail(exc.stdout)}{_tail(exc.stderr)}")
    if result.returncode < 0:
        name = signal.Signals(-result.returncode).name
        pytest.fail(f"case {case!r} crashed the interpreter with {name}\n{_tail(result.stdout)}{_tail(result.stderr)}")
    if result.returncode != 0:
        pytest.fail(f"case {case!r} exited with status {result.returncode}\n{_tail(result.stdout)}{_tail(result.stderr)}")
    return result


def _tail(text) -> str:
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    return "\n".join((text or "").splitlines()[-30:]) + "\n" if text else ""
