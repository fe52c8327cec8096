"""Dependent-launch chains (stagelab.measure.chain): how links are wired, and how a result reads.
The chain itself runs on a GPU (the check step, tests/test_gpu.py, tools/quick_check.py)."""

import torch

from stagelab.measure.chain import ChainResult
from stagelab.core.family import load_family


def test_a_link_reads_its_predecessors_output_where_it_fits():
    sdpa = load_family("sdpa")
    q, k, v = (torch.randn(1, 2, 5, 64) for _ in range(3))
    previous = torch.randn(1, 2, 5, 64)
    chained = sdpa.chained_inputs((q, k, v), previous)
    assert chained[0] is previous and chained[1] is k and chained[2] is v


def test_a_link_repeats_its_inputs_where_the_output_does_not_fit():
    sdpa = load_family("sdpa")
    inputs = tuple(torch.randn(1, 2, 5, 64) for _ in range(3))
    assert sdpa.chained_inputs(inputs, torch.randn(1, 2, 5, 64), input_kind="fp8") == inputs
    assert sdpa.chained_inputs(inputs, torch.randn(1, 2, 5, 64, dtype=torch.float64)) == inputs
    assert sdpa.chained_inputs(inputs, torch.randn(1, 2, 6, 64)) == inputs


def test_softmax_chains_rows_into_rows():
    softmax = load_family("softmax")
    x = torch.randn(4, 1024)
    previous = torch.randn(4, 1024)
    assert softmax.chained_inputs((x,), previous)[0] is previous


def test_a_result_names_the_runs_and_links_that_differed():
    ok = ChainResult("2x8x512x64", "float16", 8, {"stream": (), "graph": ()})
    assert ok.passed and "8 chained launches match" in ok.describe()
    bad = ChainResult("2x8x512x64", "float16", 8, {"stream": (), "graph": (3, 5)})
    assert not bad.passed
    assert "graph: links [3, 5]" in bad.describe() and "stream" not in bad.describe()


def test_a_failed_chain_fails_the_check_report_and_is_counted():
    from stagelab.core import metrics
    from stagelab.record.flatten import check_metrics
    from stagelab.measure.results import CheckReport

    good = ChainResult("2x8x512x64", "float16", 8, {"stream": (), "graph": ()})
    bad = ChainResult("1x3x333x64", "float16", 8, {"stream": (2,), "graph": ()})
    assert CheckReport([], [good]).passed is True
    report = CheckReport([], [good, bad])
    assert report.passed is False
    values = check_metrics(report)
    assert values[metrics.CHAINS_TOTAL.key()] == 2 and values[metrics.CHAINS_FAILED.key()] == 1
    rows = report.chain_frame().to_dict("records")
    assert rows[1]["mismatched_stream"] == "2" and not rows[1]["passed"]


def test_a_chain_whose_launch_raises_is_recorded_failed_with_the_error():
    """On a machine without CUDA the inputs cannot even be made: the chain says so, never crashes the run."""
    from stagelab.measure.chain import check_chains

    softmax = load_family("softmax")
    problems = softmax.parse_problem("test", {"shape": [3, 77]})
    [result] = check_chains(softmax, module=None, problems=problems, dtype="float16")
    assert not result.passed and result.error
    assert "raised" in result.describe()


def test_a_reports_counts_name_checks_and_chains_as_their_metrics_count_them():
    # a trial's one line gave checks and chains summed as its "checks" (575 where checks_total said 552)
    from stagelab.core import metrics as m
    from stagelab.measure.checks import CheckResult
    from stagelab.measure.results import CheckReport
    from stagelab.record.flatten import check_metrics

    def check(passed):
        return CheckResult("2x8x512x64", False, "float16", 0, 0.0, 0.0, 0.0, 1.0, 0.0, 0, 0.0, passed, "")

    chains = [ChainResult("2x8x512x64", "float16", 8, {"stream": (), "graph": ()}),
              ChainResult("2x8x512x64", "float16", 8, {"stream": (2,), "graph": ()})]
    report = CheckReport([check(True), check(True), check(False)], chains)
    logged = check_metrics(report)
    assert report.counts() == "checks 2/3, chains 1/2"
    assert (logged[m.CHECKS_TOTAL.key()], logged[m.CHAINS_TOTAL.key()]) == (3, 2)
    assert CheckReport([check(True)]).counts() == "checks 1/1"
