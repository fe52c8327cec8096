"""`stagelab run --deadline S`: a stage starts only where its last whole run of the file says it ends
within S seconds of the batch's start; the others are named with the command that runs them, and no
run is made for them (a notebook killed at a call's limit is GPU time for nothing)."""

import time

import pandas as pd
import pytest

from stagelab.core import metrics as m
from stagelab.record import tracking
from stagelab.run.deadline import ANY_GPU, Admission, Deadline, expected_seconds, known_runs
from stagelab.run.gpus import Gpu
from stagelab.run.workers import RunningNotebooks, Slot, run_on_slots
from test_best_stage import current  # noqa: F401 (the fixture)

H200, H100 = "NVIDIA H200", "NVIDIA H100 80GB HBM3"


def runs_frame(*rows):
    """Stage runs newest first: (stage, params file, GPU, outcome, notebook seconds)."""
    return pd.DataFrame([{f"tags.{m.TAG_STAGE}": stage, "tags.params_file": params, f"tags.{m.TAG_GPU}": gpu,
                          f"tags.{m.TAG_OUTCOME}": outcome, f"metrics.{m.NOTEBOOK_SECONDS.key()}": seconds}
                         for stage, params, gpu, outcome, seconds in rows])


def test_the_newest_whole_run_of_the_file_stands_per_gpu_and_on_any():
    runs = runs_frame(("s2_wmma", "acceptance", H200, "killed", 132.0),   # stopped from outside: no measure
                      ("s2_wmma", "acceptance", H200, "pass", 246.0),
                      ("s2_wmma", "long", H200, "pass", 90.0),            # another file
                      ("s2_wmma", "acceptance", H100, "pass", 200.0),
                      ("s2_wmma", "acceptance", H200, "pass", 36.0),      # older: the file was smaller
                      ("s9_fp8", "acceptance", H100, "valid_negative", 300.0))
    expected = expected_seconds(runs, "acceptance")
    assert expected[("s2_wmma", H200)] == 246.0 and expected[("s2_wmma", H100)] == 200.0
    assert expected[("s2_wmma", ANY_GPU)] == 246.0
    assert ("s9_fp8", H200) not in expected and expected[("s9_fp8", ANY_GPU)] == 300.0
    assert expected_seconds(pd.DataFrame(), "acceptance") == {}


def test_a_run_stopped_since_the_last_whole_one_is_a_lower_bound():
    # s2's H200 row on the page: killed after 132 s; its whole run there, from the file's first week, 51 s
    runs = runs_frame(("s2_wmma", "acceptance", H200, "killed", 132.0),
                      ("s2_wmma", "acceptance", H200, "pass", 51.0),
                      ("s2_wmma", "acceptance", H200, "killed", 900.0),   # before the whole run: says nothing
                      ("s8_persistent_split", "acceptance", H200, "killed", 79.0),
                      ("s8_persistent_split", "acceptance", H200, "killed", 60.0))
    expected = expected_seconds(runs, "acceptance")
    assert expected[("s2_wmma", H200)] == 132.0 and expected[("s2_wmma", ANY_GPU)] == 132.0
    assert expected[("s8_persistent_split", H200)] == 79.0, "only stopped runs: the longest"


def test_a_stage_starts_only_where_its_last_run_fits_what_is_left():
    deadline = Deadline(600.0, {("s2_wmma", H200): 246.0, ("s9_fp8", ANY_GPU): 300.0},
                        started=time.monotonic() - 400.0)
    refusal = deadline.refusal("s2_wmma", H200)
    assert refusal.startswith("s2_wmma: not started, its last whole run took 246 s and ")
    assert "of the 600 s deadline are left" in refusal
    assert deadline.refusal("s9_fp8", H200) is not None, "another GPU's run stands where this one has none"
    assert deadline.refusal("s0_baseline", H200) is None, "no run says it will not fit: it starts"
    assert Deadline(600.0, {("s2_wmma", H200): 246.0}).refusal("s2_wmma", H200) is None


def test_the_queue_goes_on_past_a_stage_that_does_not_fit():
    class Result:
        def __init__(self, stage):
            self.stage, self.outcome = stage, "pass"

    started, said = [], []
    admission = Admission(Deadline(100.0, {("long", H200): 500.0, ("short", H200): 10.0}), "params/x.yaml",
                          said.append)
    run_on_slots(["long", "short", "unknown"], [Slot(Gpu("0", H200))], lambda stage, slot: Result(stage),
                 RunningNotebooks(), lambda stage, slot: started.append(stage), lambda result: None, admission)
    assert started == ["short", "unknown"] and admission.refused == ["long"]
    admission.report()
    assert said[0].startswith("long: not started") and said[-1] == (
        "not started for the deadline: long (`stagelab run --stages long --params params/x.yaml` runs them)")


def test_a_fresh_store_reads_the_committed_pages_newest_first_across_them(tmp_store, tmp_path):
    tracking.init_store("stagelab-sdpa")
    older = runs_frame(("s2_wmma", "acceptance", H100, "pass", 51.0)).assign(start_time="2026-11-23 18:49:20+00:00")
    newer = runs_frame(("s2_wmma", "acceptance", H200, "pass", 246.0)).assign(start_time="2026-11-28 13:52:58+00:00")
    older.to_csv(tmp_path / "nvidia-h100-80gb-hbm3.runs.csv", index=False)  # read first, by name
    newer.to_csv(tmp_path / "nvidia-h200.runs.csv", index=False)
    expected = expected_seconds(known_runs("stagelab-sdpa", tmp_path), "acceptance")
    assert expected[("s2_wmma", H200)] == 246.0 and expected[("s2_wmma", ANY_GPU)] == 246.0


def test_run_with_a_deadline_leaves_out_what_will_not_fit_and_makes_no_run(tmp_store, stagelab_cli):
    experiment_id = tracking.init_store("stagelab-sdpa")
    run_id = tracking.create_run(experiment_id, "s0_baseline", "smoke")
    tracking.set_tags(run_id, {m.TAG_OUTCOME: "pass"})
    tracking.log_metrics(run_id, {m.NOTEBOOK_SECONDS.key(): 900.0})
    tracking.end_run(run_id)

    proc = stagelab_cli("run", "--params", "params/smoke.yaml", "--stages", "s0_baseline", "--deadline", "60")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    assert "s0_baseline: not started, its last whole run took 900 s" in out
    assert "`stagelab run --stages s0_baseline --params " in out
    runs = tracking.client().search_runs([experiment_id])
    assert [r.info.run_id for r in runs] == [run_id], "no run for a stage that was not started"


@pytest.mark.parametrize("value", ["0", "-5", "soon"])
def test_a_deadline_that_is_no_number_of_seconds_is_refused(stagelab_cli, value):
    proc = stagelab_cli("run", "--params", "params/smoke.yaml", "--deadline", value)
    assert proc.returncode == 2 and f"{value!r} is not a number of seconds above 0" in proc.stderr


def test_a_report_keeps_every_runs_seconds_for_a_fresh_store(tmp_store, tmp_path, monkeypatch, current):
    """The page's runs.csv keeps its latest row per stage (a killed one, for s2 on the H200); durations.csv
    beside it keeps every finished run's seconds, so a lent machine's fresh store still finds the whole run."""
    from test_best_stage import VIT, log_run

    from stagelab.record.durations import DURATIONS_FILE
    from stagelab.record.report import build_report

    experiment_id = tracking.init_store("stagelab-sdpa")
    whole = log_run(experiment_id, "s2_wmma", "an older source", {VIT: (12.0, 170.0)})
    tracking.log_metrics(whole, {m.NOTEBOOK_SECONDS.key(): 246.0})
    # the current source's run was killed: it is the page's row, over the stale whole one
    killed = log_run(experiment_id, "s2_wmma", current["s2_wmma"], {VIT: (12.0, 170.0)}, outcome="killed")
    tracking.log_metrics(killed, {m.NOTEBOOK_SECONDS.key(): 132.0})
    report = build_report(["acceptance"], out_dir=tmp_path, gpu="Test GPU 7")
    page_rows = pd.read_csv(tmp_path / "test-gpu-7.runs.csv")
    assert list(page_rows[f"tags.{m.TAG_OUTCOME}"]) == ["killed"]
    assert (tmp_path / DURATIONS_FILE).is_file()

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'fresh' / 'mlflow.db'}")
    tracking.init_store("stagelab-sdpa")
    expected = expected_seconds(known_runs("stagelab-sdpa", report.path.parent), "acceptance")
    assert expected[("s2_wmma", "Test GPU 7")] == 246.0


def test_where_durations_csv_is_kept_the_pages_runs_csv_are_not_read(tmp_store, tmp_path):
    """durations.csv holds every finished run the pages' runs.csv do; the 2.7 MB of runs.csv are read
    only for a family whose pages predate it."""
    from stagelab.record.durations import DURATIONS_FILE

    tracking.init_store("stagelab-sdpa")
    kept = runs_frame(("s2_wmma", "acceptance", H200, "pass", 251.0)).assign(start_time="2026-11-29 19:00:00+00:00")
    page = runs_frame(("s2_wmma", "acceptance", H200, "pass", 51.0)).assign(start_time="2026-11-30 01:00:00+00:00")
    kept.to_csv(tmp_path / DURATIONS_FILE, index=False)
    page.to_csv(tmp_path / "nvidia-h200.runs.csv", index=False)
    assert expected_seconds(known_runs("stagelab-sdpa", tmp_path), "acceptance")[("s2_wmma", H200)] == 251.0
    (tmp_path / DURATIONS_FILE).unlink()
    assert expected_seconds(known_runs("stagelab-sdpa", tmp_path), "acceptance")[("s2_wmma", H200)] == 51.0
