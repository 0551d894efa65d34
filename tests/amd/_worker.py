"""Child process: replay a batch of captured launches on tinygrad's AMD emulator (one ISA family).

    python _worker.py EMULATOR_DIR BATCH_DIR START

``BATCH_DIR/batch.pkl`` holds a list of launch specs (``_emulator.spec``): the HSACO's path, kernel
name, grid, block, dynamic LDS bytes, the explicit arguments (("ptr", buffer, byte offset), ("null",)
or ("value", bytes)) and each buffer's bytes. Launch ``i`` (from ``START`` on) writes
``BATCH_DIR/i.pkl``: ("ok", [each buffer's bytes after the launch], seconds) or ("error", text).
Results are written one by one, so when the emulator takes the process down (an out-of-bounds
access touches host memory) the parent sees which launch did it and starts a new worker after it.

Only numpy, the standard library and the emulator are imported here: pykern stays in the parent.
"""
from __future__ import annotations

import os
import pickle
import sys
import time
import traceback

#: AMD's COMPUTE_PGM_RSRC2.GRANULATED_LDS_SIZE (512-byte granules; what the emulator sizes LDS from)
LDS_SHIFT, LDS_MASK, LDS_GRANULE = 15, 0x1FF << 15, 512


def _write(batch_dir: str, index: int, result: tuple) -> None:
    tmp = os.path.join(batch_dir, f"{index}.tmp")
    with open(tmp, "wb") as f:
        pickle.dump(result, f)
    os.replace(tmp, os.path.join(batch_dir, f"{index}.pkl"))


def run_one(rh, spec: dict) -> tuple:
    """One launch: fresh device buffers, the arguments pointing into them, the buffers read back."""
    prg = rh.load(spec["hsaco"], spec["kernel"])  # first: it sets tinygrad up for the ISA family
    from tinygrad.device import BufferSpec
    alloc = rh._STATE["dev"].allocator
    bufs = []
    try:
        for data in spec["buffers"]:
            buf = alloc.alloc(max(-(-len(data) // 256) * 256, 256), BufferSpec())
            bufs.append(buf)
            if data:
                alloc._copyin(buf, memoryview(bytearray(data)))
        values = []
        for arg in spec["args"]:
            if arg[0] == "ptr":
                values.append(rh.Ptr(bufs[arg[1]].va_addr + arg[2]))
            elif arg[0] == "null":
                values.append(None)
            else:
                values.append(arg[1])
        # the emulator sizes LDS from RSRC2 alone: static plus the launch's dynamic bytes
        static = prg.kinfo.meta.get(".group_segment_fixed_size", 0)
        granules = -(-(static + spec["shared_mem"]) // LDS_GRANULE)
        saved = prg.rsrc2, prg.group_segment_size
        prg.rsrc2 = (prg.rsrc2 & ~LDS_MASK) | (granules << LDS_SHIFT)
        timing: dict = {}
        try:
            rh.run(spec["hsaco"], spec["kernel"], spec["grid"], spec["block"], values, dyn_lds=spec["shared_mem"],
                   timing=timing)
        finally:
            prg.rsrc2, prg.group_segment_size = saved
        after = []
        for data, buf in zip(spec["buffers"], bufs):
            out = memoryview(bytearray(len(data)))
            if data:
                alloc._copyout(out, buf)
            after.append(bytes(out))
        return ("ok", after, timing.get("s", 0.0))
    finally:
        if bufs:
            from tinygrad.device import BufferSpec
        for buf in bufs:
            alloc.free(buf, buf.size, BufferSpec())


#: the emulator's message for a wave stopped after 1M instructions, and the exit status that asks for a
#: fresh worker at the next launch (the runaway's stores may have corrupted this one's memory)
RUNAWAY = "exceeded 1M instructions"
RESTART_EXIT = 3


def main(emulator_dir: str, batch_dir: str, start: int) -> None:
    sys.path.insert(0, emulator_dir)
    import run_hsaco as rh  # before tinygrad: it picks the ISA family
    with open(os.path.join(batch_dir, "batch.pkl"), "rb") as f:
        specs = pickle.load(f)
    for index in range(start, len(specs)):
        try:
            result = run_one(rh, specs[index])
        except Exception as exc:  # EmulatorError and the tool's own errors: this launch fails, not the batch
            result = ("error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=4)}")
        _write(batch_dir, index, result)
        sys.stdout.flush()
        if result[0] == "error" and RUNAWAY in result[1]:
            sys.exit(RESTART_EXIT)  # a runaway loop may have stored past its buffers: a fresh emulator
    print(f"[worker] {len(specs) - start} launches, {time.process_time():.1f}s CPU", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
