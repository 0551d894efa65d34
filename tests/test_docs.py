"""Every ```python block of docs/*.md runs (a page's blocks in order, sharing one namespace)."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
BLOCK = re.compile(r"^```python[^\n]*\n(.*?)^```", re.S | re.M)


def pages():
    return sorted(DOCS.glob("*.md"))   # docs/*.md; the target pages under docs/targets need their GPU


def test_language_page_exists():
    page = DOCS / "language.md"
    assert page.is_file()
    assert BLOCK.findall(page.read_text()), "docs/language.md shows runnable examples"


@pytest.mark.parametrize("page", [p for p in pages() if BLOCK.search(p.read_text())],
                         ids=lambda p: str(p.relative_to(DOCS)))
def test_python_blocks_run(page, tmp_path, monkeypatch):
    # kernels read their source with inspect: each block is written to a real file and run from there
    namespace: dict = {"__name__": f"docs_{page.stem}"}
    for k, code in enumerate(BLOCK.findall(page.read_text())):
        path = tmp_path / f"{page.stem}_{k}.py"
        path.write_text(code)
        monkeypatch.syspath_prepend(str(tmp_path))
        namespace["__file__"] = str(path)
        try:
            exec(compile(code, str(path), "exec"), namespace)
        except Exception as exc:
            raise AssertionError(f"{page.name} block {k + 1} failed: {type(exc).__name__}: {exc}") from exc
    sys.modules.pop(f"docs_{page.stem}", None)
