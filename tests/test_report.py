"""The results page is written from what the store holds, newest run per stage and file."""

import csv

from stagelab.core import metrics as m
from stagelab.record import tracking
from stagelab.record.report import experiment_note, write_report

MISSION = "2x8x512x64"


def log_run(experiment_id, stage, params, p50, outcome="pass", gpu="Test GPU 1"):
    run_id = tracking.create_run(experiment_id, stage, params)
    tracking.set_tags(run_id, {"outcome": outcome, "gpu": gpu, "git_commit": "abc1234567"})
    tracking.log_metrics(run_id, {m.MISSION_P50_US.key(): p50, m.P50_US.key(MISSION): p50,
                                  m.TFLOPS.key(MISSION): 1e3 / p50, m.speedup("flash").key(MISSION): 20.0 / p50,
                                  m.speedup_geomean(m.PARENT).key(): 3.0, m.MAX_REGISTERS.key(): 128})
    tracking.end_run(run_id)
    return run_id


def test_page_uses_newest_finished_gpu_runs(tmp_store, tmp_path):
    experiment_id = tracking.init_store("stagelab-sdpa")
    log_run(experiment_id, "s0_baseline", "acceptance", 200.0)
    newest = log_run(experiment_id, "s0_baseline", "acceptance", 190.0)
    log_run(experiment_id, "s1_cp_async", "acceptance", 60.0, outcome="running")  # unfinished: left out
    page = write_report(["acceptance", "long"], out_dir=tmp_path)
    text = page.read_text()
    assert page.name == "test-gpu-1.md" and (tmp_path / "test-gpu-1.png").is_file()
    assert "| s0_baseline" in text and "s1_cp_async" not in text
    assert "190" in text and "200" not in text.split("## acceptance")[1]
    ladder = text.split("## acceptance")[1].split("Per problem")[0]
    # the schema's keys reach the page: the mission ratio over flash (20/190) and the parent geomean
    assert "vs flash @mission" in ladder and "0.105" in ladder and "vs parent (geomean)" in ladder
    assert "_no finished runs on this GPU_" in text.split("## long")[1]
    # for people: no machine paths, no nan (s0 has no parent: a dash), readable units
    assert "nan" not in text and "sqlite" not in text and "/tmp" not in text
    assert "(µs)" in text
    note = tracking.client().get_experiment_by_name("stagelab-sdpa").tags["mlflow.note.content"]
    assert "| s0_baseline" in note and "## acceptance" in note  # the experiment page shows the ladder
    with open(tmp_path / "test-gpu-1.runs.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert [r["run_id"] for r in rows] == [newest]


def test_the_clock_a_stage_ran_at_is_on_the_page_where_it_was_read(tmp_store, tmp_path):
    experiment_id = tracking.init_store("stagelab-sdpa")
    log_run(experiment_id, "s0_baseline", "acceptance", 200.0)
    clocked = log_run(experiment_id, "s1_cp_async", "acceptance", 60.0)
    tracking.log_metrics(clocked, {m.SM_CLOCK_MHZ.key(MISSION): 1455.0})
    per_problem = write_report(["acceptance"], out_dir=tmp_path).read_text().split("Per problem")[1]
    assert "SM MHz (cold)" in per_problem
    s1_row = next(line for line in per_problem.splitlines() if line.startswith("| s1_cp_async"))
    assert "1455" in s1_row


def test_a_killed_run_never_hides_a_finished_one(tmp_store, tmp_path):
    """A batch's time limit killed the newest s0 run: the page keeps the finished one before it;
    s1 was only ever killed, so its killed run is what the page shows."""
    experiment_id = tracking.init_store("stagelab-sdpa")
    finished = log_run(experiment_id, "s0_baseline", "acceptance", 190.0)
    log_run(experiment_id, "s0_baseline", "acceptance", 150.0, outcome="killed")
    only_killed = log_run(experiment_id, "s1_cp_async", "acceptance", 60.0, outcome="killed")
    page = write_report(["acceptance"], out_dir=tmp_path)
    ladder = page.read_text().split("## acceptance")[1].split("Per problem")[0]
    outcomes = {cells[0]: cells[1] for cells in (
        [c.strip() for c in line.strip("|").split("|")] for line in ladder.splitlines() if line.startswith("| s") and "---" not in line)}
    outcomes.pop("stage")  # the header row
    assert outcomes == {"s0_baseline": "pass", "s1_cp_async": "killed"}
    with open(tmp_path / "test-gpu-1.runs.csv") as handle:
        assert {r["run_id"] for r in csv.DictReader(handle)} == {finished, only_killed}


def test_the_experiment_note_stays_within_mlflows_limit():
    """A page with every stage on every file outgrew MLflow's 20,000 characters for an experiment
    tag (the report then died after writing the page); the note keeps whole lines and points on."""
    lines = [f"| s{i}_stage | pass | {i}.0 |" for i in range(3000)]
    note = experiment_note(lines, "docs/results/sdpa/gpu.md", limit=1000)
    assert len(note) <= 1000 and note.endswith("the whole page is docs/results/sdpa/gpu.md)_")
    kept = note.split("\n\n_(cut")[0].splitlines()
    assert kept == lines[: len(kept)] and len(kept) > 10
    assert experiment_note(lines[:3], "x.md") == "\n".join(lines[:3])


def test_the_page_links_each_stage_journal_and_the_trials_stay_off_the_ladder(tmp_store, tmp_path):
    from pathlib import Path

    from stagelab.record.trial_import import import_trials

    experiment_id = tracking.init_store("stagelab-sdpa")
    log_run(experiment_id, "s0_baseline", "acceptance", 200.0)
    import_trials(Path(__file__).parent / "fixtures" / "history" / "trials.yaml", progress=lambda _: None)
    text = write_report(["acceptance"], out_dir=tmp_path).read_text()
    assert "[docs/results/sdpa/journal-s8_persistent_split.md](journal-s8_persistent_split.md)" in text
    assert "ws_pv_ss" in (tmp_path / "journal-s8_persistent_split.md").read_text()
    assert "s8_persistent_split" not in text.split("## acceptance")[1], "a trial is not a stage run"
    note = tracking.client().get_experiment_by_name("stagelab-sdpa").tags["mlflow.note.content"]
    assert "journal-s8_persistent_split.md" in note


def test_report_of_a_store_without_runs_is_a_clear_error_not_a_traceback(tmp_path, monkeypatch, capsys):
    from stagelab.cli.main import main

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'empty.db'}")
    assert main(["report", "--family", "softmax", "--params", "softmax-acceptance", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "stagelab: error: no experiment 'stagelab-softmax'" in err and "Traceback" not in err


def test_the_ladder_says_how_each_run_was_timed(tmp_store, tmp_path):
    experiment_id = tracking.init_store("stagelab-sdpa")
    log_run(experiment_id, "s0_baseline", "acceptance", 200.0)  # before timing_order was logged
    round_robin = log_run(experiment_id, "s1_cp_async", "acceptance", 60.0)
    tracking.client().log_param(round_robin, "timing_order", "round_robin")
    ladder = write_report(["acceptance"], out_dir=tmp_path).read_text().split("## acceptance")[1].split("Per problem")[0]
    rows = {line.split("|")[1].strip(): line for line in ladder.splitlines() if line.startswith("| s")}
    header = next(line for line in ladder.splitlines() if line.startswith("| stage"))
    assert [cell.strip() for cell in header.split("|")].count("timing") == 1
    assert "round_robin" in rows["s1_cp_async"] and "blocks" in rows["s0_baseline"]


def report_cli(tmp_path, capsys, *args) -> tuple[int, str]:
    from stagelab.cli.main import main

    code = main(["report", "--out", str(tmp_path), *args])
    return code, capsys.readouterr().err


def test_report_params_default_to_the_familys_own(tmp_store, tmp_path, capsys):
    """Without --params, softmax's page shows softmax's acceptance file (not sdpa's acceptance and long)."""
    run_id = log_run(tracking.init_store("stagelab-softmax"), "sm0_block_three_pass", "softmax-acceptance", 30.0)
    tracking.log_metrics(run_id, {m.GBPS.key(MISSION): 500.0})  # softmax's pages plot GB/s
    code, err = report_cli(tmp_path, capsys, "--family", "softmax")
    assert code == 0, err
    text = (tmp_path / "test-gpu-1.md").read_text()
    assert "## softmax-acceptance" in text and "## long" not in text
    assert "--family softmax --params softmax-acceptance`" in text


def test_report_of_no_gpu_runs_names_the_gpus_that_have_runs(tmp_store, tmp_path, capsys):
    """`--gpu none` was an IndexError traceback; now one line naming the GPUs with runs."""
    experiment_id = tracking.init_store("stagelab-sdpa")
    log_run(experiment_id, "s0_baseline", "acceptance", 200.0)
    log_run(experiment_id, "s1_cp_async", "acceptance", 60.0, outcome="no_gpu", gpu="none")
    code, err = report_cli(tmp_path, capsys, "--gpu", "none")
    assert code == 2 and "Traceback" not in err
    assert "--gpu none: runs without a GPU (outcome no_gpu) were never timed" in err and "Test GPU 1" in err
    code, err = report_cli(tmp_path, capsys, "--gpu", "Other GPU")
    assert code == 2 and "no finished runs of acceptance, long on 'Other GPU'" in err
    assert "GPUs with runs of acceptance, long: Test GPU 1" in err


def test_a_store_of_only_no_gpu_runs_says_so(tmp_store, tmp_path, capsys):
    experiment_id = tracking.init_store("stagelab-sdpa")
    for stage in ("s0_baseline", "s1_cp_async"):
        log_run(experiment_id, stage, "acceptance", 1.0, outcome="no_gpu", gpu="none")
    code, err = report_cli(tmp_path, capsys)
    assert code == 2 and "Traceback" not in err
    assert "every finished run of acceptance, long (2) ran without a GPU (outcome no_gpu)" in err
    assert not list(tmp_path.glob("*.md")), "no page of nothing"
