"""pykern's exceptions. Messages point at the user's source, never at compiler internals."""
from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any


class PykernError(Exception):
    """Base of every error pykern raises on purpose."""


class CompileError(PykernError):
    """A kernel that cannot be compiled: shows file, line, column, the line and a caret."""

    def __init__(self, message: str, loc: Any = None):
        self.message, self.loc = message, loc
        super().__init__(self._format())

    def _format(self) -> str:
        loc = self.loc
        if loc is None:
            return self.message
        head = f"{loc.file}:{loc.line}:{loc.col + 1}: {self.message}"
        if not loc.text:
            return head
        width = max(1, (loc.end_col or loc.col + 1) - loc.col)
        return f"{head}\n    {loc.text}\n    {' ' * loc.col}{'^' * width}"

    def __reduce__(self) -> tuple[type, tuple[str, Any]]:  # crosses process pools intact
        return (type(self), (self.message, self.loc))


class LaunchError(PykernError):
    """A launch that cannot go ahead (bad arguments) or that failed on the device."""


class DeviceError(PykernError):
    """A runtime (HIP, CUDA, host) reported an error; the message carries the runtime's error name."""


def close_matches(name: str, names: Iterable[str]) -> str:
    """"; did you mean a, b?" for the names close to ``name`` (empty when none is): every
    unknown-name error (kernels, modules, archs) ends with it."""
    near = difflib.get_close_matches(name, list(names), n=5)
    return f"; did you mean {', '.join(near)}?" if near else ""
