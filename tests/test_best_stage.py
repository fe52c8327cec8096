"""A results page opens with the best stage per problem: only a current, correct run can be best;
stale runs stay in the tables, marked; an error row says whose failure it was."""

import pytest

from stagelab.core import metrics as m
from stagelab.core.family import load_family
from stagelab.record import tracking
from stagelab.record.report import write_report
from stagelab.record.source_state import current_source_hashes

VIT = "vit-b16_64x12x197x64"
TINY = "1x2x1x64"
GPU = "Test GPU 7"


@pytest.fixture
def current():
    return current_source_hashes(load_family("sdpa"))


def log_run(experiment_id, stage, source, timings, outcome="pass", reason="", commit="abc1234567", speedups=None):
    """A finished stage run of acceptance.yaml: `timings` {problem: (p50 µs, TFLOP/s)}, `speedups`
    {(contender, problem): ratio}."""
    run_id = tracking.create_run(experiment_id, stage, "acceptance")
    tracking.set_tags(run_id, {"outcome": outcome, "outcome_reason": reason, "gpu": GPU, "git_commit": commit,
                               m.TAG_SOURCE_HASH: source})
    values = {m.MISSION_P50_US.key(): 10.0}
    for problem, (p50, tflops) in timings.items():
        values.update({m.P50_US.key(problem): p50, m.TFLOPS.key(problem): tflops})
    for (contender, problem), ratio in (speedups or {}).items():
        values[m.speedup(contender).key(problem)] = ratio
    tracking.log_metrics(run_id, values)
    tracking.end_run(run_id)
    return run_id


def table_rows(text: str, after: str, before: str) -> dict[str, list[str]]:
    """The rows of the first markdown table between two headings, by their first cell."""
    part = text.split(after, 1)[1].split(before, 1)[0]
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in part.splitlines()
            if line.startswith("|") and "---" not in line]
    return {row[0]: row for row in rows[1:]} | {"header": rows[0]}


def test_the_best_stage_is_the_fastest_current_correct_run_with_its_ratios(tmp_store, tmp_path, current):
    experiment_id = tracking.init_store("stagelab-sdpa")
    log_run(experiment_id, "s5_wgmma", current["s5_wgmma"], {VIT: (20.0, 100.0), TINY: (6.0, 0.0000874)})
    log_run(experiment_id, "s8_persistent_split", current["s8_persistent_split"], {VIT: (12.0, 170.0)})
    log_run(experiment_id, "s10_general", current["s10_general"], {VIT: (10.0, 200.0)},
            outcome="valid_negative", speedups={("cudnn", VIT): 1.3, ("fa4", VIT): 1.1, ("parent", VIT): 1.2})
    # faster, but wrong: never best
    log_run(experiment_id, "s9_fp8", current["s9_fp8"], {VIT: (5.0, 400.0)}, outcome="incorrect")
    # faster, but it measured a source that is gone: never best
    log_run(experiment_id, "s13_turns", "an older source", {VIT: (4.0, 500.0)}, commit="51f3545aaa")
    text = write_report(["acceptance"], out_dir=tmp_path).read_text()

    assert text.index("## Best stage per problem") < text.index("## acceptance")
    assert f"On `{GPU}`" in text
    best = table_rows(text, "### Best stage on acceptance", "## acceptance")
    header = best["header"]
    vit = dict(zip(header, best[VIT]))
    assert vit["best stage"] == "s10_general" and vit["p50 (cold, µs)"] == "10" and vit["TFLOP/s (cold)"] == "200"
    assert vit["vs cudnn"] == "1.3" and vit["vs fa4"] == "1.1" and "vs parent" not in header
    assert vit["previous best"] == "s8_persistent_split" and vit["vs previous best"] == "1.2"  # 12 / 10
    # the only stage that timed the tiny problem: nothing before it; its TFLOP/s keeps its digits
    tiny = dict(zip(header, best[TINY]))
    assert tiny["best stage"] == "s5_wgmma" and tiny["previous best"] == "–" and tiny["vs previous best"] == "–"
    assert tiny["TFLOP/s (cold)"] == "0.0000874"


def test_an_8_bit_stage_is_ranked_apart_from_the_full_precision_ones(tmp_store, tmp_path, current):
    """s9_fp8 takes e4m3 inputs: faster than every fp16 stage, it is not their best, but has its own column
    with the best fp16 stage's p50 over its."""
    experiment_id = tracking.init_store("stagelab-sdpa")
    log_run(experiment_id, "s10_general", current["s10_general"], {VIT: (10.0, 200.0)})
    log_run(experiment_id, "s9_fp8", current["s9_fp8"], {VIT: (8.0, 250.0)})
    text = write_report(["acceptance"], out_dir=tmp_path).read_text()
    best = table_rows(text, "### Best stage on acceptance", "## acceptance")
    vit = dict(zip(best["header"], best[VIT]))
    assert vit["best stage"] == "s10_general"
    assert vit["best 8-bit stage"] == "s9_fp8" and vit["8-bit vs best"] == "1.25"  # 10 / 8


def test_with_only_8_bit_stages_current_the_section_shows_the_best_8_bit_stage_and_says_why(tmp_store, tmp_path,
                                                                                            current):
    """Every 16-bit run stale (a family edit since they ran), the 8-bit stages re-run: the section names the
    fastest 8-bit stage per problem with its own numbers instead of showing nothing."""
    experiment_id = tracking.init_store("stagelab-sdpa")
    log_run(experiment_id, "s10_general", "an older source", {VIT: (10.0, 200.0)}, commit="51f3545aaa")
    log_run(experiment_id, "s9_fp8", current["s9_fp8"], {VIT: (8.0, 250.0)}, speedups={("cudnn", VIT): 1.4})
    log_run(experiment_id, "s19_int8", current["s19_int8"], {VIT: (7.0, 280.0)}, outcome="incorrect")
    text = write_report(["acceptance"], out_dir=tmp_path).read_text()
    section = text.split("### Best stage on acceptance", 1)[1].split("## acceptance", 1)[0]
    assert "no 16-bit stage has a run of its current source that passed its checks" in section
    assert "3 stage runs, 1 of them stale" in section
    best = table_rows(text, "### Best stage on acceptance", "## acceptance")
    vit = dict(zip(best["header"], best[VIT]))
    assert "best stage" not in best["header"]
    assert vit["best 8-bit stage (no 16-bit stage current)"] == "s9_fp8"  # s19 is faster, but incorrect
    assert vit["p50 (cold, µs)"] == "8" and vit["vs cudnn"] == "1.4"


def test_a_stale_run_stays_visible_marked_and_a_current_one_stands_for_its_stage(tmp_store, tmp_path, current):
    experiment_id = tracking.init_store("stagelab-sdpa")
    log_run(experiment_id, "s8_persistent_split", current["s8_persistent_split"], {VIT: (12.0, 170.0)})
    # newer, but of another source (a branch, a revert): the current run above stands for s8
    log_run(experiment_id, "s8_persistent_split", "another source", {VIT: (30.0, 60.0)}, commit="fffffff000")
    log_run(experiment_id, "s9_fp8", "an older source", {VIT: (9.0, 220.0)}, commit="51f3545aaa")
    text = write_report(["acceptance"], out_dir=tmp_path).read_text()

    ladder = table_rows(text, "\n## acceptance", "Per problem")
    source = ladder["header"].index("source")
    assert ladder["s8_persistent_split"][source] == "current"
    assert ladder["s9_fp8"][source] == "stale (commit g51f3545)"
    per_problem = table_rows(text, "Per problem:", "![")
    assert "s9_fp8 — stale (commit g51f3545)" in per_problem and "s8_persistent_split" in per_problem
    assert per_problem["s8_persistent_split"][per_problem["header"].index("p50 (cold, µs)")] == "12"
    best = table_rows(text, "### Best stage on acceptance", "## acceptance")
    assert best[VIT][1] == "s8_persistent_split"  # s9 is faster, but stale


def test_with_no_current_run_the_section_says_so(tmp_store, tmp_path):
    experiment_id = tracking.init_store("stagelab-sdpa")
    log_run(experiment_id, "s8_persistent_split", "an older source", {VIT: (12.0, 170.0)})
    text = write_report(["acceptance"], out_dir=tmp_path).read_text()
    section = text.split("### Best stage on acceptance", 1)[1].split("## acceptance", 1)[0]
    assert "no stage has a run of its current source that passed its checks" in section
    assert "1 stage runs, 1 of them stale" in section and "|" not in section


def test_an_error_row_says_whether_the_lab_or_the_kernel_failed(tmp_store, tmp_path, current):
    experiment_id = tracking.init_store("stagelab-sdpa")
    log_run(experiment_id, "s16_causal_snake", current["s16_causal_snake"], {}, outcome="error",
            reason="ModuleNotFoundError: No module named 'stagelab.recorder'")
    log_run(experiment_id, "s17_interleaved_softmax", current["s17_interleaved_softmax"], {}, outcome="error",
            reason="RuntimeError: CUDA error: an illegal memory access was encountered\nCUDA kernel errors ...")
    log_run(experiment_id, "s18_three_turns", current["s18_three_turns"], {}, outcome="error",
            reason="the parent could not be timed, so the gain is unknown")
    log_run(experiment_id, "s8_persistent_split", current["s8_persistent_split"], {VIT: (12.0, 170.0)},
            outcome="incorrect", reason="at least one correctness check failed (large)")
    ladder = table_rows(write_report(["acceptance"], out_dir=tmp_path).read_text(), "\n## acceptance", "Per problem")
    outcome = ladder["header"].index("outcome")
    assert ladder["s16_causal_snake"][outcome] == (
        "error: lab failure (ModuleNotFoundError: No module named 'stagelab.recorder')")
    assert ladder["s17_interleaved_softmax"][outcome] == (
        "error: kernel failure (RuntimeError: CUDA error: an illegal memory access was encountered)")
    assert ladder["s18_three_turns"][outcome] == "error (the parent could not be timed, so the gain is unknown)"
    assert ladder["s8_persistent_split"][outcome] == "incorrect"
