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


# ---- docs/architecture.md: what it names exists, and the layers it draws are the imports' -------

ROOT = DOCS.parent
ARCH = DOCS / "architecture.md"
CODE = re.compile(r"`([^`\n]+)`")
PATHLIKE = re.compile(r"^[\w./-]+$")
IDENT = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*$")
#: illustrative names the page uses for "your new thing"
PLACEHOLDERS = {"something", "saxpy"}


def _arch_layers() -> list[tuple[str, list[Path]]]:
    """The layer table's rows: (layer, the files and folders its second column names). A bare file
    name in that column sits in the folder of the column's first path (`pykern/compiler.py`,
    `cache.py`)."""
    rows = []
    for line in ARCH.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[1].startswith("`") or cells[0] in ("layer", "---"):
            continue
        parts, base = [], None
        for token in CODE.findall(cells[1]):
            path = ROOT / token if "/" in token else (base or ROOT) / token
            base = base or (path if token.endswith("/") else path.parent)
            parts.append(path)
        rows.append((cells[0], parts))
    return rows


def _source_words() -> set[str]:
    words: set[str] = set()
    for folder in ("pykern", "stdlib_kernels", "tests", "tools"):
        for f in (ROOT / folder).rglob("*.py*"):
            words.update(re.findall(r"\w+", f.read_text(errors="replace")))
    return words


def test_architecture_paths_and_names_exist():
    text = ARCH.read_text()
    rows = _arch_layers()
    bases = [ROOT, ROOT / "pykern", ROOT.parent] + [p if p.is_dir() else p.parent for _, ps in rows for p in ps]
    fenced = "\n".join(re.findall(r"^```\n(.*?)^```", text, re.S | re.M))
    tokens = set(CODE.findall(text)) | set(re.findall(r"(?:\w+/)+(?:\w+\.py)?", fenced))
    missing_paths, missing_names = [], []
    words = _source_words()
    for token in sorted(tokens):
        if PATHLIKE.match(token) and ("/" in token or re.search(r"\.(py|pyi|md)$", token)):
            if not any((b / token).exists() for b in bases):
                missing_paths.append(token)
        elif IDENT.match(token):
            name = token.rsplit(".", 1)[-1]
            if name not in words and name not in PLACEHOLDERS:
                missing_names.append(token)
    for name in set(re.findall(r"\b[A-Z][a-z]+[A-Z]\w*\b|\b[a-z]+_[a-z_]+\b", fenced)):
        if name not in words and name not in PLACEHOLDERS:
            missing_names.append(name)
    assert not missing_paths, f"docs/architecture.md names paths that do not exist: {missing_paths}"
    assert not missing_names, f"docs/architecture.md names what the code does not define: {missing_names}"


def _imports(path: Path) -> set[Path]:
    """The repository files ``path`` imports, function-local imports included (a deferred import is
    still a dependency). ``from pkg import name`` depends on ``pkg/name.py`` where that is a module."""
    import ast

    def file_of(dotted: str) -> Path | None:
        p = ROOT.joinpath(*dotted.split("."))
        for cand in (p.with_suffix(".py"), p / "__init__.py"):
            if cand.is_file():
                return cand
        return None

    package = path.relative_to(ROOT).with_suffix("").parts
    package = package[:-1] if package[-1] != "__init__" else package[:-1]
    found: set[Path] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(list(package[:len(package) - node.level + 1]) + ([base] if base else []))
            names = [f"{base}.{a.name}" if file_of(f"{base}.{a.name}") else base for a in node.names]
        else:
            continue
        found.update(f for f in map(file_of, names) if f is not None and f != path)
    return found


def test_architecture_layers_are_the_imports():
    """Each module imports only its own layer, the layers above it, and the leaves the page names;
    every top-level module and folder of pykern/ has its place on the page."""
    rows = _arch_layers()
    text = ARCH.read_text()
    beside = text[text.index("Beside the layers"):].split(";", 1)[0]  # "... are leaves any layer imports"
    leaves = {ROOT / "pykern" / Path(t).name for t in CODE.findall(beside) if t.endswith(".py")}
    facade = ROOT / "pykern" / "__init__.py"
    leaves.discard(facade)

    def layer(f: Path) -> int | None:
        for i, (_, paths) in enumerate(rows):
            if any(f == p or (p.is_dir() and p in f.parents) for p in paths):
                return i
        return None

    files = sorted(set((ROOT / "pykern").rglob("*.py")) | set((ROOT / "stdlib_kernels").rglob("*.py")))
    unplaced = [str(f.relative_to(ROOT)) for f in files
                if layer(f) is None and f not in leaves and f != facade]
    assert not unplaced, f"docs/architecture.md does not place {unplaced} in a layer"
    # the facade sits at the lowest layer it imports: only that layer and those below may import it
    facade_layer = max(layer(f) for f in _imports(facade) if layer(f) is not None)
    wrong = []
    for f in files:
        if f == facade:
            continue
        mine = layer(f)
        for dep in _imports(f):
            theirs = facade_layer if dep == facade else layer(dep)
            if f in leaves:
                bad = dep not in leaves
            else:
                bad = theirs is not None and theirs > mine
            if bad:
                wrong.append(f"{f.relative_to(ROOT)} ({rows[mine][0] if mine is not None else 'a leaf'}) imports "
                             f"{dep.relative_to(ROOT)} ({rows[theirs][0] if theirs is not None else 'a leaf'})")
    assert not wrong, "imports against docs/architecture.md's layers:\n" + "\n".join(wrong)
