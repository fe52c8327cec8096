"""What the MLflow UI's first screen answers, checked on the store without a browser (fast): the best
stage per problem marked on its run, as the pages pick it; the stage comparison's filter and sort
keep trials out and put the best first; each run's summary and description, rounded; imported runs
say where their artifacts are. test_ui_browser.py checks the same in Chromium."""

import json

import pytest

from stagelab import cli
from stagelab.core import metrics as m
from stagelab.core.family import load_family
from stagelab.record import runs_view, tracking
from stagelab.record.best_marks import mark_best_runs
from stagelab.record.run_summary import TAG_ARTIFACTS_AT, result_block, summary_line, summary_tags
from stagelab.record.trial_record import add_conclusion
from stagelab.record.trial_import import import_trials
from test_best_stage import GPU, VIT, log_run
from test_trial_import import FIXTURE

BERT = "bert-base_32x12x512x64_bshd"


@pytest.fixture
def current():
    from stagelab.record.source_state import current_source_hashes

    return current_source_hashes(load_family("sdpa"))


def _tags(run_id: str) -> dict:
    return tracking.client().get_run(run_id).data.tags


def _stage_view_order(experiment_id: str) -> list[str]:
    """Run ids as the stage comparison lists them: its filter, its sort, then the UI's newest first."""
    view = runs_view.STAGES
    order = f"{view.order_by} {'ASC' if view.ascending else 'DESC'}"
    found = tracking.client().search_runs([experiment_id], filter_string=view.search_filter,
                                          order_by=[order, "attributes.start_time DESC"])
    return [r.info.run_id for r in found]


def test_the_best_stage_is_marked_first_and_trials_stay_out(tmp_store, current):
    experiment_id = tracking.init_store("stagelab-sdpa")
    s8 = log_run(experiment_id, "s8_persistent_split", current["s8_persistent_split"],
                 {VIT: (12.0, 170.0), BERT: (30.0, 90.0)}, speedups={("cudnn", VIT): 1.0541895079766377})
    s10 = log_run(experiment_id, "s10_general", current["s10_general"], {VIT: (10.0, 200.0), BERT: (31.0, 88.0)},
                  speedups={("cudnn", VIT): 1.2649})
    s13 = log_run(experiment_id, "s13_turns", "an older source", {VIT: (4.0, 500.0)})  # stale: never best
    import_trials(FIXTURE, progress=lambda _: None)
    assert mark_best_runs(load_family("sdpa")) == 2
    assert _tags(s10)[runs_view.TAG_BEST_ON] == "acceptance: best on 1/2: vit-b16_64x12x197x64 10 µs: 1.26x cudnn"
    assert _tags(s8)[runs_view.TAG_BEST_ON] == f"acceptance: best on 1/2: {BERT} 30 µs"
    assert runs_view.TAG_BEST_ON not in _tags(s13)
    order = _stage_view_order(experiment_id)
    assert set(order[:2]) == {s8, s10} and order[2:] == [s13], "best runs first; no trial among stage runs"

    faster = log_run(experiment_id, "s13_turns", current["s13_turns"], {VIT: (9.0, 220.0), BERT: (29.0, 95.0)})
    mark_best_runs(load_family("sdpa"))  # a new run takes both problems: the old marks go
    assert runs_view.TAG_BEST_ON not in _tags(s8) and runs_view.TAG_BEST_ON not in _tags(s10)
    assert _tags(faster)[runs_view.TAG_BEST_ON] == f"acceptance: best on 2/2: {BERT} 29 µs; {VIT} 9 µs"
    assert _stage_view_order(experiment_id)[0] == faster


def test_the_stage_view_shows_gpu_file_summary_and_best_first_on_screen(tmp_store):
    experiment_id = tracking.init_store("stagelab-sdpa")
    state = json.loads(tracking.client().get_experiment(experiment_id).tags[
        runs_view.SHARED_VIEW_TAG_PREFIX + runs_view.STAGES.key()])
    first = ["tags.`stagelab.best_on`", "tags.`stagelab.summary`", "tags.`gpu`", "tags.`params_file`"]
    assert state["selectedColumns"][:4] == first and state["columnOrder"][:4] == first
    # the first screen after the pinned name and date is 825 pixels wide (test_ui_browser's viewport)
    assert sum(state["columnWidths"][c] for c in first) <= 825
    assert state["orderByKey"] == "tags.`stagelab.best_on`" and state["searchFilter"] == runs_view.STAGE_RUNS_FILTER


def test_a_stage_run_summary_is_rounded_and_says_why():
    tags = {"outcome": "valid_negative", "parent": "s13_turns", "gpu": GPU, "params_file": "models",
            "git_commit": "862f61a59e0123", "outcome_reason": "correct, but -1.4% over the parent is below +5.0%",
            "mlflow.note.content": "### s14: multicast\n\nThe hypothesis."}
    values = {m.MISSION_P50_US.key(): 11.693452, m.speedup_geomean(m.PARENT).key(): 0.98612345,
              m.speedup_geomean("cudnn").key(): 1.0541895079766377, m.speedup_geomean(m.BEST_CONTENDER).key(): 1.13,
              m.MAX_REGISTERS.key(): 168.0, m.CHECKS_TOTAL.key(): 816.0, m.CHECKS_FAILED.key(): 0.0,
              m.speedup_geomean(m.PARENT).key() + "/x": 3.0}
    line = summary_line(tags, values)
    assert line == ("valid_negative · mission p50 11.7 µs · 0.986x vs s13_turns · 1.13x vs best library · "
                    "1.05x vs cudnn · max registers 168 · checks 816/816 passed · "
                    "correct, but -1.4% over the parent is below +5.0%")
    written = summary_tags(tags, values)
    note = written["mlflow.note.content"]
    assert note.startswith("#### Result: **valid_negative** · mission p50 11.7 µs")
    assert f"GPU `{GPU}` · parameter file `models` · commit `862f61a59e`" in note
    assert note.endswith("---\n\n### s14: multicast\n\nThe hypothesis.")  # the run's own description, kept
    rewritten = summary_tags({**tags, "mlflow.note.content": note, "outcome": "pass"}, values)["mlflow.note.content"]
    assert rewritten.startswith("#### Result: **pass**") and rewritten.count("#### Result") == 1


def test_a_lab_error_says_whose_failure_it_was():
    tags = {"outcome": "error", "outcome_reason": "ModuleNotFoundError: No module named 'stagelab.recorder'\n..."}
    assert summary_line(tags, {}) == "error: lab failure (ModuleNotFoundError: No module named 'stagelab.recorder')"


def test_a_trial_summary_has_its_verdict_numbers_and_conclusion(tmp_store, tmp_path, monkeypatch):
    from stagelab.core.paths import WORKSPACE_ENV

    monkeypatch.setenv(WORKSPACE_ENV, str(tmp_path / "workspace"))  # try note keeps the conclusion there
    import_trials(FIXTURE, progress=lambda _: None)
    experiment_id = tracking.client().get_experiment_by_name("stagelab-sdpa").experiment_id
    run = tracking.client().search_runs([experiment_id], "tags.`stagelab.trial.name` = 'ws_pv_ss'")[0]
    summary = run.data.tags[runs_view.TAG_SUMMARY]
    assert summary.startswith("valid_negative · 4x16x4096x128 tflops 100 vs 110 @1700 MHz")  # the log's numbers
    assert summary.endswith("conclusion: slower on every shape; code removed")
    late = tracking.client().search_runs([experiment_id], "tags.`stagelab.trial.name` = 'late_merger'")[0]
    assert late.data.tags[runs_view.TAG_SUMMARY].endswith("conclusion: none yet")
    add_conclusion(late.info.run_id, "kept for the 8k prefill")
    tags = _tags(late.info.run_id)
    assert tags[runs_view.TAG_SUMMARY].endswith("conclusion: kept for the 8k prefill")
    assert "Conclusion: kept for the 8k prefill" in tags["mlflow.note.content"]
    assert "commit `imported, none given`" in tags["mlflow.note.content"]  # its log named no commit


def test_ui_writes_summaries_into_an_older_store_once(tmp_store, capsys, current):
    experiment_id = tracking.init_store("stagelab-sdpa")
    run_id = log_run(experiment_id, "s10_general", current["s10_general"], {VIT: (10.0, 200.0)})
    assert runs_view.TAG_SUMMARY not in _tags(run_id)  # a run recorded before summaries existed
    assert cli.main(["ui", "--dry-run", "--port", "5999"]) == 0
    assert "sdpa store: 1 run summaries written, 1 runs marked best" in capsys.readouterr().out
    assert _tags(run_id)[runs_view.TAG_SUMMARY].startswith("pass · mission p50 10 µs")
    assert cli.main(["ui", "--dry-run", "--port", "5999"]) == 0
    assert "sdpa store: 0 run summaries written" in capsys.readouterr().out


def test_a_run_imported_without_artifacts_says_where_they_are(tmp_path, monkeypatch, current):
    from stagelab.record.portable import import_store

    origin = tmp_path / "gpu-machine" / "mlflow.db"
    origin.parent.mkdir()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{origin}")
    experiment_id = tracking.init_store("stagelab-sdpa")
    source_run = log_run(experiment_id, "s10_general", current["s10_general"], {VIT: (10.0, 200.0)})
    tracking.set_tags(source_run, {m.TAG_OWNER_HOST: "gpu-box-3"})
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'here' / 'mlflow.db'}")
    (tmp_path / "here").mkdir()
    assert import_store(origin, progress=lambda _: None, origin="the record r.db.gz") == 1
    run = tracking.client().search_runs([tracking.init_store("stagelab-sdpa")])[0]
    where = run.data.tags[TAG_ARTIFACTS_AT]
    assert "the record r.db.gz held none" in where and "the store on gpu-box-3" in where
    assert f"Artifacts: {where}" in run.data.tags["mlflow.note.content"]
    assert run.data.tags[runs_view.TAG_SUMMARY].startswith("pass · mission p50 10 µs")


def test_the_result_block_reads_the_artifacts_place():
    block = result_block({"outcome": "pass", TAG_ARTIFACTS_AT: "with the store on vm"}, {})
    assert block.splitlines()[0] == "#### Result: **pass**" and "Artifacts: with the store on vm" in block
