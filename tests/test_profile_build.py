"""tools/profile_build.py's LLVM pass timers (``--time-passes``): LLVM reports the optimisation
pipeline and code generation in one table, which the tool splits by the pass managers' naming, on a
real compile of one small stdlib module for sm_90 (no GPU needed)."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("profile_build", ROOT / "tools" / "profile_build.py")
pb = sys.modules["profile_build"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pb)

REPORT = """===-------------------------------------------------------------------------===
                          Pass execution timing report
===-------------------------------------------------------------------------===
  Total Execution Time: 1.0000 seconds (1.0000 wall clock)

   ---User Time---   --System Time--   --User+System--   ---Wall Time---  --- Name ---
   0.3000 ( 30.0%)   0.0000 (  0.0%)   0.3000 ( 30.0%)   0.3000 ( 30.0%)  InstCombinePass on k1
   0.1000 ( 10.0%)   0.0000 (  0.0%)   0.1000 ( 10.0%)   0.1000 ( 10.0%)  InstCombinePass on k2
   0.2000 ( 20.0%)   0.0000 (  0.0%)   0.2000 ( 20.0%)   0.2000 ( 20.0%)  SROAPass on k1
   0.3000 ( 30.0%)   0.0000 (  0.0%)   0.3000 ( 30.0%)   0.3000 ( 30.0%)  Loop Strength Reduction
   0.1000 ( 10.0%)   0.0000 (  0.0%)   0.1000 ( 10.0%)   0.1000 ( 10.0%)  NVPTX DAG->DAG Pattern Instruction Selection
   1.0000 (100.0%)   0.0000 (  0.0%)   1.0000 (100.0%)   1.0000 (100.0%)  Total
"""


def test_pass_shares_sums_runs_and_splits_by_pass_manager():
    is_new_pm = lambda n: n.endswith("Pass")  # noqa: E731
    assert pb.pass_shares(REPORT, is_new_pm) == {"InstCombinePass": 0.667, "SROAPass": 0.333}
    assert pb.pass_shares(REPORT, lambda n: not is_new_pm(n)) == {
        "Loop Strength Reduction": 0.75, "NVPTX DAG->DAG Pattern Instruction Selection": 0.25}


def test_profile_reports_both_stages_of_a_real_compile():
    row = pb.profile("fill", "sm_90", None, time_passes=True)
    assert row["kernels"] == 28 and row["ir_mb"] > 0
    opt, cg = row["passes"]["optimise"], row["passes"]["codegen"]
    assert "InstCombinePass" in opt and all(name.endswith("Pass") for name in opt)
    assert any("Instruction Selection" in name for name in cg) and not any(name.endswith("Pass") for name in cg)
    assert 0.5 < sum(opt.values()) <= 1.001 and 0.5 < sum(cg.values()) <= 1.001


def test_kernels_alone_ranked_by_ir_size():
    """``--top``: each compiled kernel's IR size from its module's lowering (second names and twins
    are not compiled, so not listed), and one kernel compiled alone with its CPU seconds."""
    rows = pb.kernel_sizes("fill", "sm_90")
    names = {r[2] for r in rows}
    assert "fill_u8" in names and "fill_f8_e4m3" not in names  # a twin of fill_u8 (compiler.identical_kernels)
    assert all(size > 0 and module == "fill" and arch == "sm_90" for size, module, _, arch in rows)
    one = pb.kernel_alone(*max(rows))
    assert one["kernel"] == max(rows)[2] and one["total"] >= one["optimise"] > 0 and one["codegen"] > 0


def test_save_writes_a_manifest_compare_codegen_reads(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["profile_build", "--arch", "sm_90", "--modules", "affine", "--save", str(tmp_path)])
    assert pb.main() == 0
    import json
    [entry] = json.loads((tmp_path / "manifest.json").read_text())["modules"]
    assert entry == {"module": "affine", "arch": "sm_90", "target": "cuda", "file": "sm_90/affine.ptx"}
    assert (tmp_path / entry["file"]).read_text().count(".entry affine_") == 11
