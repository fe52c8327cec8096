"""tools/retract_metrics.py takes out the metrics a known bug recorded wrong, only at the commit
named, and leaves a tag on each run saying what was taken out and why."""

import importlib.util
from pathlib import Path

from stagelab.record import tracking

TOOL = Path(__file__).resolve().parents[1] / "tools" / "retract_metrics.py"


def load_tool():
    spec = importlib.util.spec_from_file_location("retract_metrics", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_at(experiment_id, commit):
    run_id = tracking.create_run(experiment_id, "s0_baseline", "mission", {"git_commit": commit})
    tracking.log_metrics(run_id, {"ncu_tflops/2x8x512x64": 0.0, "ncu_l2_hit_rate_pct/2x8x512x64": 66.0})
    tracking.end_run(run_id)
    return run_id


def test_retracts_only_the_named_metrics_of_runs_at_the_commit(tmp_store):
    tool = load_tool()
    experiment_id = tracking.init_store("stagelab-sdpa")
    buggy, fixed = run_at(experiment_id, "20cc0d5deadbeef"), run_at(experiment_id, "4727dd1cafe")
    db = Path(tmp_store.removeprefix("sqlite:///"))
    assert tool.main(["--store", str(db), "--commit", "20cc0d5", "--metric", "ncu_tflops/%",
                      "--reason", "units bug"]) == 0
    before, after = tracking.client().get_run(buggy).data, tracking.client().get_run(fixed).data
    assert "ncu_tflops/2x8x512x64" not in before.metrics and before.metrics["ncu_l2_hit_rate_pct/2x8x512x64"] == 66.0
    assert before.tags[tool.RETRACTED_TAG] == "ncu_tflops/%: units bug"
    assert "ncu_tflops/2x8x512x64" in after.metrics and tool.RETRACTED_TAG not in after.tags
    assert tool.main(["--store", str(db.parent / "missing.db"), "--commit", "x", "--metric", "m",
                      "--reason", "r"]) == 2
