"""The child-process harness itself: a crash, a hang and a failing exit each become a test failure
that names the case."""
from __future__ import annotations

import pytest

from _isolated import run_isolated


def test_a_segfault_is_a_failure_naming_the_case():
    with pytest.raises(pytest.fail.Exception, match=r"case 'null read' crashed the interpreter with SIGSEGV"):
        run_isolated("import ctypes\nprint('CASE null read', flush=True)\nctypes.string_at(0)\n", "null read")


def test_a_hang_is_a_failure_naming_the_case():
    with pytest.raises(pytest.fail.Exception, match=r"case 'forever' hung"):
        run_isolated("import time\ntime.sleep(60)\n", "forever", timeout=2)


def test_an_exception_is_a_failure_with_its_output():
    with pytest.raises(pytest.fail.Exception, match=r"(?s)case 'raises' exited with status 1.*ValueError: boom"):
        run_isolated("raise ValueError('boom')\n", "raises")


def test_a_clean_run_returns_its_output():
    assert run_isolated("print('fine')\n", "clean").stdout == "fine\n"
