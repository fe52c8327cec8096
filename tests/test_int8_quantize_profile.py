"""tools/int8_quantize_profile.py's arithmetic and records (its timing needs a GPU): the least bytes a quantizer
of a problem moves, the table that splits its time by launch, a patch's table beside the default, the
byte-for-byte comparison of two builds' outputs, and the trial runs it records."""

import pytest
from tool_module import load_tool

tool = load_tool("int8_quantize_profile")


def test_the_least_bytes_read_each_input_once_and_write_each_code_once():
    gqa = tool.Problem("p", batch=2, heads=4, kv_heads=2, seq_len=3, kv_seq_len=5, head_dim=64)
    q, kv = 2 * 4 * 3 * 64, 2 * (2 * 2 * 5 * 64)
    assert gqa.least_bytes() == (q + kv) * (2 + 1)


def test_the_table_gives_each_launch_its_share_and_the_whole_rate():
    problem = tool.Problem("vit", 1, 1, 1, 1000, 1000, 64)  # 192000 elements: 576000 least bytes
    rows = tool.kernel_table(problem, {"int8_stats_kernel": 3.0, "int8_kv_kernel": 1.0})
    assert rows[0] == "| vit | int8_stats_kernel | 3.0 | 75% |"
    assert rows[1] == "| vit | int8_kv_kernel | 1.0 | 25% |"
    assert rows[2] == "| vit | **all launches** | 4.0 | 0.14 TB/s of its least bytes |"


def test_a_table_reads_back_as_one_number_per_launch_and_two_per_problem():
    problem = tool.Problem("vit", 1, 1, 1, 1000, 1000, 64)
    lines = ["| problem | kernel | µs | share |", "|---|---|---|---|"]
    lines += tool.kernel_table(problem, {"int8_stats_kernel": 3.0, "int8_kv_kernel": 1.0})
    numbers = {(n["metric"], n["quantity"]): n["trial"] for n in tool.table_numbers(lines)}
    assert numbers == {("us", "int8_stats_kernel mean"): 3.0, ("us", "int8_kv_kernel mean"): 1.0,
                       ("us", "all launches mean"): 4.0, ("other", "all launches TB/s over the least bytes"): 0.14}


def test_a_file_without_the_table_is_refused():
    with pytest.raises(SystemExit, match="not a report of this tool"):
        tool.table_numbers(["# some other report", "| a | b |"])


def test_a_patch_table_is_not_read_back_as_one_build():
    problem = tool.Problem("vit", 1, 1, 1, 1000, 1000, 64)
    lines = [tool.AB_HEADER, "|---|---|---|---|", *tool.ab_table(problem, {"int8_kv_kernel": 2.0}, {"int8_kv_kernel": 1.0})]
    with pytest.raises(SystemExit, match="record it with --record where it runs"):
        tool.table_numbers(lines)


def test_an_earlier_report_is_recorded_as_a_trial_run_once(tmp_path, tmp_store, monkeypatch, capsys):
    from stagelab.core import metrics as m
    from stagelab.record import tracking

    monkeypatch.setenv("STAGELAB_GIT_COMMIT", "abc1234")
    problem = tool.Problem("vit", 1, 1, 1, 1000, 1000, 64)
    report = tmp_path / "quantize_profile.md"
    report.write_text("\n".join(["| problem | kernel | µs | share |", "|---|---|---|---|"]
                                + tool.kernel_table(problem, {"int8_stats_kernel": 3.0})) + "\n")
    with pytest.raises(SystemExit, match="needs --record and --gpu"):
        tool.main(["--report", str(report), "--record", "--hypothesis", "where the time goes"])
    with pytest.raises(SystemExit, match="needs --hypothesis"):
        tool.main(["--report", str(report), "--record", "--gpu", "NVIDIA H200"])
    with pytest.raises(SystemExit, match="needs --markdown"):  # refused before any GPU time is spent
        tool.main(["--record", "--hypothesis", "where the time goes"])
    args = ["--report", str(report), "--record", "--gpu", "NVIDIA H200", "--date", "2026-11-29T11:09",
            "--hypothesis", "where the quantizer's time goes"]
    assert tool.main(args) == 0 and "recorded as trial run" in capsys.readouterr().out
    experiment = tracking.client().get_experiment_by_name("stagelab-sdpa").experiment_id
    (run,) = tracking.client().search_runs([experiment])
    assert run.data.tags[m.TAG_TRIAL_NAME] == "quantizer launches" and run.data.tags[m.TAG_TRIAL_COMMIT] == "abc1234"
    assert run.data.metrics["imported/us/vit/int8_stats_kernel mean/trial"] == 3.0
    assert [a.path for a in tracking.client().list_artifacts(run.info.run_id, "quantize_profile")] == \
        ["quantize_profile/quantize_profile.md"]
    assert tool.main(args) == 0 and "already in the store" in capsys.readouterr().out


def test_a_patch_table_shows_both_builds_and_the_default_over_the_patch():
    problem = tool.Problem("vit", 1, 1, 1, 1000, 1000, 64)
    rows = tool.ab_table(problem, {"int8_stats_kernel": 6.0, "int8_kv_kernel": 2.0},
                         {"int8_q_kernel": 1.0, "int8_stats_kernel": 2.0, "int8_kv_kernel": 1.0})
    assert rows == ["| vit | int8_stats_kernel | 6.0 | 2.0 |", "| vit | int8_kv_kernel | 2.0 | 1.0 |",
                    "| vit | int8_q_kernel | – | 1.0 |", "| vit | **all launches** | 8.0 | 4.0 (2.00x) |"]


def test_a_patch_is_recorded_with_the_default_beside_it(tmp_path, tmp_store, monkeypatch):
    import argparse

    from stagelab.record import tracking

    monkeypatch.setenv("STAGELAB_GIT_COMMIT", "abc1234")
    problem = tool.Problem("vit", 1, 1, 1, 1000, 1000, 64)
    numbers = tool.ab_numbers(problem, {"int8_stats_kernel": 6.0}, {"int8_q_kernel": 1.0, "int8_stats_kernel": 2.0},
                              identical=True)
    patch, markdown = tmp_path / "q_apart.diff", tmp_path / "ab.md"
    patch.write_text("--- a/x\n+++ b/x\n")
    markdown.write_text("the table\n")
    args = argparse.Namespace(stage="s19_int8", patch=patch, hypothesis="Q apart reads faster", gpu="NVIDIA H200",
                              date="2026-11-30T10:00")
    assert tool.record(args, markdown.read_text(), markdown, numbers)
    experiment = tracking.client().get_experiment_by_name("stagelab-sdpa").experiment_id
    (run,) = tracking.client().search_runs([experiment])
    metrics = run.data.metrics
    assert metrics["imported/us/vit/int8_stats_kernel mean/trial"] == 2.0
    assert metrics["imported/us/vit/int8_stats_kernel mean/default"] == 6.0
    assert metrics["imported/us/vit/all launches mean/trial"] == 3.0
    assert metrics["imported/other/vit/outputs identical to the default/trial"] == 1.0
    assert sorted(a.path for a in tracking.client().list_artifacts(run.info.run_id, "quantize_profile")) == \
        ["quantize_profile/ab.md", "quantize_profile/q_apart.diff"]


def test_outputs_are_compared_byte_for_byte_and_the_first_difference_named():
    import torch

    a = {"q": torch.zeros(2, 3, dtype=torch.int8), "q_descale": torch.tensor([0.0, 2.0])}
    assert tool.first_difference(a, {name: t.clone() for name, t in a.items()}) is None
    signed_zero = {"q": a["q"].clone(), "q_descale": torch.tensor([-0.0, 2.0])}  # equal as values, not as bytes
    assert torch.equal(a["q_descale"], signed_zero["q_descale"])
    assert tool.first_difference(a, signed_zero) == "q_descale"


def test_a_patch_is_refused_with_report_or_when_missing(tmp_path):
    report = tmp_path / "r.md"
    report.write_text("x")
    with pytest.raises(SystemExit, match="not both"):
        tool.main(["--patch", str(report), "--report", str(report), "--record", "--gpu", "G", "--hypothesis", "h"])
    with pytest.raises(SystemExit, match="no such file"):
        tool.main(["--patch", str(tmp_path / "missing.diff")])
