"""The stress step's CPU side (stagelab.measure.stress): its parameters, its perturbations, its verdict and
where it is skipped; the knob's default is SASS-neutral (tests/test_stress_gpu.py and
tools/sass_md5.py show the GPU side)."""

from pathlib import Path

import pytest

from stagelab.core import metrics
from stagelab.core.errors import ConfigError
from stagelab.judge.judge import judge
from stagelab.core.params import load_params
from stagelab.core.registry import find_stage
from stagelab.measure.chain import ChainResult
from stagelab.measure.results import CheckReport, StageResults
from stagelab.core.stress_spec import (NO_SIDE, STRESS_DEFAULTS, Perturbation, StressSpec, includes_knob,
                                       parse_stress, perturbations)
from stagelab.measure.stress import StressReport, StressRound, stress_step

ROOT = Path(__file__).resolve().parents[1]


def test_defaults_and_a_file_of_its_own():
    assert parse_stress("x", None) == StressSpec()
    spec = load_params(ROOT / "params" / "stress.yaml")
    assert "stress" in spec.steps and spec.stress.rounds == 5
    assert spec.stress.sides == ("producer", "consumer", "poison", "poison_freed")


@pytest.mark.parametrize("raw, words", [
    ({"rounds": 0}, "stress.rounds: expected a positive integer"),
    ({"delay_ns": True}, "stress.delay_ns: expected a positive integer"),
    ({"sides": ["both"]}, "stress.sides: expected a non-empty list drawn from ['producer', 'consumer', 'poison', 'poison_freed']"),
    ({"load": "yes"}, "stress.load: expected true or false"),
    ({"repeat": 3}, "expected a mapping with keys from"),
])
def test_bad_stress_parameters_name_the_key(raw, words):
    with pytest.raises(ConfigError, match=words.replace("[", r"\[").replace("]", r"\]")):
        parse_stress("params.yaml: stress", raw)


def test_each_side_alone_and_beside_the_load_then_the_undelayed_stage_beside_it():
    plans = perturbations(StressSpec(rounds=2, delay_ns=500, sides=("producer", "consumer", "poison"), load=True))
    assert [p.label for p in plans] == ["producer_500ns", "producer_500ns_load", "consumer_500ns",
                                       "consumer_500ns_load", "poison", "poison_load", "none_load"]
    assert plans[0].defines() == {"STRESS_DELAY_NS": 500, "STRESS_SIDE": 1}
    assert plans[2].defines() == {"STRESS_DELAY_NS": 500, "STRESS_SIDE": 2}
    assert plans[4].defines() == {"STRESS_POISON": 1}
    assert Perturbation("poison_freed", 500, False).defines() == {"STRESS_POISON": 2}
    assert Perturbation(NO_SIDE, 0, True).defines() == {}
    assert [p.label for p in perturbations(StressSpec(sides=("consumer",), load=False))] == [
        f"consumer_{STRESS_DEFAULTS['delay_ns']}ns"]


def _round(label, index, checks_failed=0, chains_failed=0, why=""):
    return StressRound(label, index, 16, checks_failed, 4, chains_failed, 1.0, why)


def test_one_failed_round_fails_the_stage_with_reason_ordering():
    report = StressReport([_round("producer_2000ns", 0), _round("consumer_2000ns", 0),
                           _round("consumer_2000ns", 1, checks_failed=1, why="check 2x8x1024x128: error 3.1"),
                           _round("consumer_2000ns", 2, chains_failed=1, why="chain differs")])
    assert report.passed is False and report.status == "failed"
    assert report.failures() == "consumer_2000ns: 2 of 3 rounds failed (check 2x8x1024x128: error 3.1)"
    logged = report.metrics()
    assert logged[metrics.STRESS_ROUNDS.key()] == 4 and logged[metrics.STRESS_FAILED.key()] == 2
    assert logged[metrics.STRESS_FAILED.key("consumer_2000ns")] == 2
    assert logged[metrics.STRESS_FAILED.key("producer_2000ns")] == 0
    passing_checks = CheckReport([], [ChainResult("2x8x1024x128", "float16", 8, {})])
    results = StageResults(built=object(), checks=passing_checks, stress=report)
    outcome = judge(results, gpu_available=True, has_parent=False, min_gain=0.0)
    assert outcome.outcome == "incorrect" and outcome.reason == f"ordering: {report.failures()}"
    assert len(report.frame()) == 4 and not report.frame()["passed"].all()


def test_a_clean_report_passes_and_one_not_run_says_why():
    assert StressReport([_round("none_load", 0)]).status == "passed"
    skipped = StressReport.not_run("no CUDA device")
    assert skipped.passed is None and skipped.status == "skipped" and skipped.metrics() == {}


def test_the_knob_is_found_through_the_includes():
    registry, s8 = find_stage("s8_persistent_split")
    assert includes_knob(s8.source, registry.directory)
    _, s0 = find_stage("s0_baseline")
    assert not includes_knob(s0.source, registry.directory)


def test_stress_is_skipped_without_the_step_or_without_a_gpu():
    from stagelab.measure.steps import StageContext

    ctx = StageContext.load("s8_persistent_split", "params/acceptance.yaml")
    assert stress_step(ctx).why_not_run == "acceptance has no `steps: [stress]`"
    ctx = StageContext.load("s8_persistent_split", "params/stress.yaml")
    ctx.gpu_available = False
    assert stress_step(ctx).why_not_run == "no CUDA device"


def test_the_knob_is_off_by_default_in_the_wrappers():
    """STRESS_DELAY_NS defaults to 0, which compiles to nothing (the default SASS of s6-s9 was
    compared by md5 before and after the knob, tools/sass_md5.py)."""
    header = (ROOT / "kernels" / "sdpa" / "sdpa_stress.cuh").read_text()
    assert "#define STRESS_DELAY_NS 0" in header and "#if STRESS_DELAY_NS > 0" in header
    assert "#define STRESS_POISON 0" in header and "#if STRESS_POISON\n" in header
    for wrapper in ("sdpa_tma.cuh", "sdpa_wgmma.cuh"):
        assert '#include "sdpa_stress.cuh"' in (ROOT / "kernels" / "sdpa" / wrapper).read_text()


def test_every_plant_finds_its_passage_once_in_the_shared_headers(tmp_path):
    """The plants (tests/planted_sdpa.py) are edits of exact passages; a rewritten header must fail
    here, on the CPU, not first on the GPU."""
    from planted_sdpa import PLANTS, make_sdpa_plant_checkout, plant_text

    for plant in PLANTS.values():
        text = (ROOT / "kernels" / "sdpa" / plant.header).read_text()
        planted = plant_text(text, plant)
        assert planted != text and "PLANTED" in planted and plant.passage not in planted
    root = make_sdpa_plant_checkout(tmp_path / "checkout", "pv_no_final_wait")
    assert "PLANTED" in (root / "kernels" / "sdpa" / PLANTS["pv_no_final_wait"].header).read_text()
    with pytest.raises(ValueError, match="occurs 0 times"):
        plant_text("rewritten header", PLANTS["k_release_early"])


def test_the_hang_plant_skips_a_k_load_in_the_producer_and_the_gpu_check_uses_it():
    """k_tile_never_issued must edit the producer's K issue (a consumer-side edit can crash
    instead of hanging: no_k_full_wait did on an H100), and be the GPU check's hang plant."""
    from planted_sdpa import PLANTS, plant_text
    from tool_module import load_tool

    header = (ROOT / "kernels" / "sdpa" / PLANTS["k_tile_never_issued"].header).read_text()
    planted = plant_text(header, PLANTS["k_tile_never_issued"])
    produce = planted[planted.index("__device__ __forceinline__ void produce("):]
    guard = produce.index("if (n != wt.kt_begin + 1)")
    guarded = produce[guard:].splitlines()[1]  # the statement the `if` governs: the K tile's load
    assert "load_kv_tile" in guarded and "L::kKOffset" in guarded
    assert guard > produce.index("wait_released(kEmptyK, ring, freed)")
    assert produce.count("if (n != wt.kt_begin + 1)") == 1
    tool = load_tool("stress_gpu_check")
    assert tool.HANG_PLANT == "k_tile_never_issued" and tool.HANG_PLANT in PLANTS
    assert set(tool.HANG_PLANTS) | set(tool.ORDERING_PLANTS) == set(PLANTS)


def test_the_gpu_check_marks_a_verdict_that_misses_issue_28():
    from tool_module import load_tool
    from stagelab.measure.watchdog import HANG_EXIT_CODE as hang

    tool = load_tool("stress_gpu_check")
    assert tool._row("k_tile_never_issued", "checks", hang, 40.0, "HANG verdict 6.1 s after the checks began")[4] == "yes"
    assert tool._row("k_tile_never_issued", "checks", hang, 40.0, "HANG verdict 31.0 s after the checks began")[4] == "NO"
    assert tool._row("pv_no_final_wait", "stress", 0, 9.0, "")[4] == "NO"
    assert tool._row("unplanted", "stress", 1, 9.0, "")[4] == "NO"
    assert tool._row("no_k_full_wait", "checks", tool.CRASH_EXIT_CODE, 9.0, "")[2:5] == ("crashed", "-", "reported")
