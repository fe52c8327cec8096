"""tools/int8_quantize_profile.py's arithmetic (its timing needs a GPU): the least bytes a quantizer of a
problem moves, and the table that splits its time by launch."""

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
