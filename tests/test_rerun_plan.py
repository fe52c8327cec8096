"""A results page ends with what is not current on its GPU: each stage whose latest run there measured
an older source, was stopped from outside, or is missing where another GPU has one, and the command
that re-runs them; `stagelab report` prints how much GPU time that is. A stale run that failed is
named there with its outcome, and left out of the tables above."""

import pytest
from test_best_stage import VIT, current, log_run, table_rows  # noqa: F401 (current: the fixture)

from stagelab.record import tracking
from stagelab.record.report import build_report
from stagelab.record.rerun_plan import NOT_RUN, rerun_summary

OTHER_GPU = "Test GPU 8"


def plan_section(text: str) -> str:
    return text.split("## Not current on this GPU", 1)[1].split("The ", 1)[0]


def test_stale_killed_and_missing_stages_are_listed_with_their_command(tmp_store, tmp_path, current):
    experiment_id = tracking.init_store("stagelab-sdpa")
    log_run(experiment_id, "s5_wgmma", current["s5_wgmma"], {VIT: (20.0, 100.0)})
    log_run(experiment_id, "s8_persistent_split", "an older source", {VIT: (12.0, 170.0)}, commit="51f3545aaa")
    log_run(experiment_id, "s10_general", current["s10_general"], {VIT: (10.0, 200.0)}, outcome="killed")
    other = log_run(experiment_id, "s13_turns", current["s13_turns"], {VIT: (9.0, 210.0)})
    tracking.set_tags(other, {"gpu": OTHER_GPU})
    # a run still going on another GPU is not a page's gap (only finished runs make a file's ladder)
    going = log_run(experiment_id, "s14_kv_multicast", current["s14_kv_multicast"], {VIT: (9.0, 210.0)})
    tracking.set_tags(going, {"gpu": OTHER_GPU, "outcome": "running"})

    report = build_report(["acceptance"], out_dir=tmp_path, gpu="Test GPU 7")
    section = plan_section(report.path.read_text())

    assert [(r.stage, r.reason.split(" (")[0]) for r in report.reruns] == [
        ("s8_persistent_split", "stale"), ("s10_general", "killed"), ("s13_turns", NOT_RUN.split(" (")[0])]
    assert "s5_wgmma" not in section  # current and finished: nothing to do
    assert "stale (commit g51f3545)" in section
    assert ("`stagelab run --stages s8_persistent_split s10_general s13_turns --params params/acceptance.yaml`"
            in section)
    # a killed run stopped short of a whole run: its minutes are a lower bound
    assert [r.at_least for r in report.reruns] == [False, True, False]
    assert "| more than " in section and "(at least " in section
    summary = rerun_summary(report.reruns, report.gpu)
    assert summary.startswith("Test GPU 7: 3 stage run(s) not current, at least ")


def test_a_gpu_whose_every_run_is_current_says_so(tmp_store, tmp_path, current):
    experiment_id = tracking.init_store("stagelab-sdpa")
    log_run(experiment_id, "s5_wgmma", current["s5_wgmma"], {VIT: (20.0, 100.0)})
    log_run(experiment_id, "s8_persistent_split", current["s8_persistent_split"], {VIT: (12.0, 170.0)})

    report = build_report(["acceptance"], out_dir=tmp_path)

    assert report.reruns == []
    assert "Every stage's latest run on `Test GPU 7` measured its current source." in plan_section(
        report.path.read_text())
    assert rerun_summary(report.reruns, report.gpu) == "Test GPU 7: every row current"


def test_a_stale_failure_leaves_the_tables_for_the_rerun_list_with_its_outcome(tmp_store, tmp_path, current):
    experiment_id = tracking.init_store("stagelab-sdpa")
    log_run(experiment_id, "s8_persistent_split", "an older source", {VIT: (12.0, 170.0)}, commit="51f3545aaa")
    log_run(experiment_id, "s9_fp8", "an older source", {VIT: (11.0, 180.0)}, outcome="incorrect",
            reason="at least one correctness check failed", commit="51f3545aaa")
    log_run(experiment_id, "s16_causal_snake", "an older source", {VIT: (9.0, 220.0)}, outcome="error",
            reason="ModuleNotFoundError: No module named 'stagelab.recorder'", commit="8812517aaa")
    # a failure of the current source is the stage's outcome now: it stays in the tables
    log_run(experiment_id, "s10_general", current["s10_general"], {VIT: (10.0, 200.0)}, outcome="incorrect",
            reason="at least one correctness check failed")

    report = build_report(["acceptance"], out_dir=tmp_path, gpu="Test GPU 7")
    text = report.path.read_text()
    ladder = table_rows(text, "## acceptance", "Per problem:")

    assert ladder["s8_persistent_split"][1] == "pass"  # a stale pass keeps its numbers, marked stale
    assert "stale (commit g51f3545)" in ladder["s8_persistent_split"]
    assert ladder["s10_general"][1] == "incorrect"
    assert "s9_fp8" not in ladder and "s16_causal_snake" not in ladder
    assert "s9_fp8 —" not in text and "s16_causal_snake —" not in text  # nor in the per-problem tables
    reasons = {r.stage: r.reason for r in report.reruns}
    assert reasons["s8_persistent_split"] == "stale (commit g51f3545)"
    assert reasons["s9_fp8"] == "stale (commit g51f3545), where it ended incorrect"
    assert reasons["s16_causal_snake"].startswith("stale (commit g8812517), where it ended error: ")
    assert "stagelab.recorder" in reasons["s16_causal_snake"]
    assert "s10_general" not in reasons
    section = plan_section(text)
    assert "where it ended incorrect" in section and "s16_causal_snake" in section
    assert rerun_summary(report.reruns, report.gpu).startswith("Test GPU 7: 3 stage run(s) not current, about ")


def test_report_gpu_all_writes_a_page_for_every_gpu_with_runs(tmp_store, tmp_path, current, capsys):
    from stagelab.cli.main import main

    experiment_id = tracking.init_store("stagelab-sdpa")
    log_run(experiment_id, "s5_wgmma", current["s5_wgmma"], {VIT: (20.0, 100.0)})
    other = log_run(experiment_id, "s8_persistent_split", current["s8_persistent_split"], {VIT: (12.0, 170.0)})
    tracking.set_tags(other, {"gpu": OTHER_GPU})
    no_gpu = log_run(experiment_id, "s10_general", current["s10_general"], {}, outcome="no_gpu")
    tracking.set_tags(no_gpu, {"gpu": "none"})

    assert main(["report", "--params", "acceptance", "--gpu", "all", "--out", str(tmp_path)]) == 0

    pages = sorted(p.name for p in tmp_path.glob("*.md") if not p.name.startswith("journal-"))
    assert pages == ["test-gpu-7.md", "test-gpu-8.md"]
    out = capsys.readouterr().out
    assert "Test GPU 7: " in out and "Test GPU 8: " in out
    # the newest GPU's page (Test GPU 8's run was logged last) is written last, so the experiment's
    # description is its page
    assert out.index("test-gpu-7.md") < out.index("test-gpu-8.md")
    assert "s8_persistent_split" in (tmp_path / "test-gpu-8.md").read_text()


def test_a_killed_runs_minutes_are_its_newest_whole_runs_where_that_took_longer():
    """s2's acceptance run killed at a call's limit after 2.2 min read "more than 2.2"; its newest whole
    run took 4.1 (older ones 0.6, on a smaller file): the plan says 4.1, while a stage whose newest whole
    run was shorter keeps the lower bound."""
    import pandas as pd

    from stagelab.core import metrics as m
    from stagelab.record.rerun_plan import reruns
    from stagelab.record.source_state import SOURCE_COLUMN

    start = pd.Timestamp("2026-11-29 22:00")

    def run(stage, minutes, outcome, state="current", days_ago=0):
        begun = start - pd.Timedelta(days=days_ago)
        return {f"tags.{m.TAG_STAGE}": stage, "tags.params_file": "acceptance", f"tags.{m.TAG_OUTCOME}": outcome,
                SOURCE_COLUMN: state, "start_time": begun, "end_time": begun + pd.Timedelta(minutes=minutes)}

    latest = pd.DataFrame([run("s2_wmma", 2.2, "killed"), run("s8_persistent_split", 1.3, "killed")])
    every_run = pd.DataFrame([*latest.to_dict("records"), run("s2_wmma", 4.1, "pass", "stale (commit g9b45a4)", 1),
                              *(run("s2_wmma", 0.6, "pass", "stale (commit g1a2b3c4)", 6) for _ in range(3)),
                              run("s2_wmma", 30.0, "killed", days_ago=2), run("s8_persistent_split", 1.0, "pass", days_ago=1)])
    plan = {r.stage: r for r in reruns(latest, every_run, ["acceptance"], ["s2_wmma", "s8_persistent_split"])}
    assert plan["s2_wmma"].seconds == pytest.approx(4.1 * 60) and not plan["s2_wmma"].at_least, "killed runs are no whole run"
    assert plan["s8_persistent_split"].seconds == pytest.approx(1.3 * 60) and plan["s8_persistent_split"].at_least


def test_a_stage_not_run_on_this_gpu_takes_its_newest_whole_run_elsewhere_not_the_median():
    """The minutes of a stage missing on this GPU are its newest whole run on another (the estimate
    `stagelab run --deadline` reads): three runs of 0.6 min from the file's first week would make a
    median of 0.6 where the file now takes 4.1."""
    import pandas as pd

    from stagelab.core import metrics as m
    from stagelab.record.rerun_plan import reruns

    def run(minutes, days_ago, outcome="pass"):
        begun = pd.Timestamp("2026-11-29 22:00") - pd.Timedelta(days=days_ago)
        return {f"tags.{m.TAG_STAGE}": "s2_wmma", "tags.params_file": "acceptance", f"tags.{m.TAG_OUTCOME}": outcome,
                f"tags.{m.TAG_GPU}": "Other GPU", "start_time": begun, "end_time": begun + pd.Timedelta(minutes=minutes)}

    every_run = pd.DataFrame([*(run(0.6, 6 + d) for d in range(3)), run(4.1, 1), run(9.0, 2, "killed")])
    latest = pd.DataFrame(columns=[f"tags.{m.TAG_STAGE}", "tags.params_file"])
    [plan] = reruns(latest, every_run, ["acceptance"], ["s2_wmma"])
    assert plan.reason == NOT_RUN and plan.seconds == pytest.approx(4.1 * 60) and not plan.at_least
