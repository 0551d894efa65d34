"""The AMD emulator as an external instrument: where it is, whether it can run, and running a batch.

The emulator (``../shared/tools/amd_emu``: tinygrad's instruction-level AMD emulator and
``run_hsaco.py`` around it) is found through ``PYKERN_AMD_EMU``, else ``../shared/tools/amd_emu``
beside the repository. It emulates one ISA family per process, and a bad launch can take the process
down, so each family's launches run in a child process (``_worker.py``) that writes each result as it
goes; when a worker dies, the launch it died in is reported as a crash and a new worker carries on
after it.
"""
from __future__ import annotations

import dataclasses
import importlib.metadata
import importlib.util
import os
import pathlib
import pickle
import shutil
import subprocess
import sys
import time

from tests.amd._worker import RESTART_EXIT

REPO = pathlib.Path(__file__).resolve().parents[2]
ENV = "PYKERN_AMD_EMU"
#: the tinygrad release the emulator's third_party copy was taken beside (its README)
TINYGRAD_VERSION = "0.14.0"
WORKER = pathlib.Path(__file__).with_name("_worker.py")
#: a family's whole batch; a hung emulator fails the remaining launches instead of hanging CI
BATCH_TIMEOUT_S = float(os.environ.get("PYKERN_AMD_EMU_TIMEOUT", "2400"))


@dataclasses.dataclass(frozen=True)
class Family:
    """One emulated ISA family: the archs whose code objects it runs, and their wave width."""

    name: str
    archs: tuple[str, ...]
    wave_size: int


#: gfx942 and gfx90a both run on the emulator's CDNA(4) tables, so one process serves both
FAMILIES = (Family("rdna3", ("gfx1100",), 32), Family("rdna4", ("gfx1201",), 32),
            Family("cdna", ("gfx942", "gfx90a"), 64))
ARCHS = {arch: fam for fam in FAMILIES for arch in fam.archs}


def emulator_dir() -> pathlib.Path:
    given = os.environ.get(ENV)
    return pathlib.Path(given) if given else REPO.parent / "shared" / "tools" / "amd_emu"


def unavailable_reason() -> str | None:
    """Why the emulator cannot run here (None when it can): the tests skip with this reason."""
    where = emulator_dir()
    if not (where / "run_hsaco.py").is_file():
        return (f"no AMD emulator at {where} (set {ENV} to the amd_emu folder; .ci/run points it at "
                "../shared/tools/amd_emu)")
    if importlib.util.find_spec("tinygrad") is None:
        return f"the AMD emulator needs tinygrad: python -m pip install tinygrad=={TINYGRAD_VERSION}"
    version = importlib.metadata.version("tinygrad")
    if version != TINYGRAD_VERSION:
        return f"the AMD emulator was written against tinygrad {TINYGRAD_VERSION}; {version} is installed"
    if shutil.which("clang") is None and importlib.util.find_spec("ziglang") is None:
        return "the AMD emulator compiles its instruction runners with clang or the ziglang wheel; neither is here"
    return None


@dataclasses.dataclass
class Outcome:
    """What the emulator made of one launch: ``status`` "ok" (``buffers`` after it), "error" (the
    emulator refused or failed it: ``detail``) or "crash" (the worker process died in it)."""

    status: str
    buffers: list[bytes] = dataclasses.field(default_factory=list)
    detail: str = ""
    seconds: float = 0.0


class Batch:
    """One family's launches (several archs' code objects) running in worker processes."""

    def __init__(self, family: Family, specs: list[dict], workdir: pathlib.Path):
        self.family, self.specs, self.dir = family, specs, workdir
        workdir.mkdir(parents=True, exist_ok=True)
        with open(workdir / "batch.pkl", "wb") as f:
            pickle.dump(specs, f)
        self.crashes: dict[int, str] = {}
        self.restarts = 0
        self.started = time.perf_counter()
        self.wall_s = 0.0
        self._proc: subprocess.Popen | None = None
        self._start(0)

    def _start(self, index: int) -> None:
        log = open(self.dir / f"worker-{index}.log", "wb")
        self._proc = subprocess.Popen([sys.executable, str(WORKER), str(emulator_dir()), str(self.dir), str(index)],
                                      stdout=log, stderr=subprocess.STDOUT, cwd=str(self.dir))
        self._proc_start, self._log = index, log

    def _done(self, index: int) -> bool:
        return (self.dir / f"{index}.pkl").exists() or index in self.crashes

    def wait(self) -> dict[int, Outcome]:
        """Every launch's outcome, restarting the worker after a crash (at most the batch timeout)."""
        deadline = self.started + BATCH_TIMEOUT_S
        while self._proc is not None:
            try:
                rc = self._proc.wait(timeout=max(1.0, deadline - time.perf_counter()))
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
                rc = None
            self._log.close()
            self._proc = None
            missing = next((i for i in range(len(self.specs)) if not self._done(i)), None)
            if missing is None:
                break
            tail = (self.dir / f"worker-{self._proc_start}.log").read_text(errors="replace")[-1500:]
            if rc is None:
                for i in range(missing, len(self.specs)):
                    self.crashes[i] = f"the {self.family.name} batch ran past {BATCH_TIMEOUT_S:.0f}s (PYKERN_AMD_EMU_TIMEOUT)"
                break
            if rc == RESTART_EXIT:  # the worker asked for a fresh process after a runaway launch
                self.restarts += 1
                self._start(missing)
                continue
            self.crashes[missing] = f"the emulator process died (exit status {rc}) in this launch:\n{tail}"
            if missing + 1 < len(self.specs):
                self.restarts += 1
                self._start(missing + 1)
        self.wall_s = time.perf_counter() - self.started
        out = {}
        for i in range(len(self.specs)):
            if i in self.crashes:
                out[i] = Outcome("crash", detail=self.crashes[i])
                continue
            with open(self.dir / f"{i}.pkl", "rb") as f:
                result = pickle.load(f)
            out[i] = Outcome("ok", result[1], seconds=result[2]) if result[0] == "ok" else Outcome("error",
                                                                                                     detail=result[1])
        return out
