"""The results page is written from what the store holds, newest run per stage and file."""

import csv

from stagelab import tracking
from stagelab.report import write_report


def log_run(experiment_id, stage, params, p50, outcome="pass"):
    run_id = tracking.create_run(experiment_id, stage, params)
    tracking.set_tags(run_id, {"outcome": outcome, "gpu": "Test GPU 1", "git_commit": "abc1234567"})
    tracking.log_metrics(run_id, {"mission_p50_us": p50, "p50_us/2x8x512x64": p50, "tflops/2x8x512x64": 1e3 / p50,
                                  "speedup_vs_flash/2x8x512x64": 20.0 / p50, "max_registers": 128})
    tracking.end_run(run_id)
    return run_id


def test_page_uses_newest_finished_gpu_runs(tmp_store, tmp_path):
    experiment_id = tracking.init_store()
    log_run(experiment_id, "s0_baseline", "acceptance", 200.0)
    newest = log_run(experiment_id, "s0_baseline", "acceptance", 190.0)
    log_run(experiment_id, "s1_cp_async", "acceptance", 60.0, outcome="running")  # unfinished: left out
    page = write_report(["acceptance", "long"], out_dir=tmp_path)
    text = page.read_text()
    assert page.name == "test-gpu-1.md" and (tmp_path / "test-gpu-1.png").is_file()
    assert "| s0_baseline" in text and "s1_cp_async" not in text
    assert "190" in text and "200" not in text.split("## acceptance")[1]
    assert "_no finished runs on this GPU_" in text.split("## long")[1]
    with open(tmp_path / "test-gpu-1.runs.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert [r["run_id"] for r in rows] == [newest]
