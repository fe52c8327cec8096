"""tools/ncu_compare.py without a GPU: the problem spelling, the ncu command, the fallback when a
metric is unknown, and the table read from ncu's raw page."""

import math
from pathlib import Path

import pytest
from tool_module import load_tool

from stagelab.measure import ncu


@pytest.fixture(scope="module")
def tool():
    return load_tool("ncu_compare")


def test_a_problem_is_four_positive_sizes(tool):
    assert tool.parse_problem_tag("2x8x2048x128", True) == {"shape": [2, 8, 2048, 128], "causal": True}
    for bad in ("2x8x2048", "2x8x0x128", "2x8xabcx128"):
        with pytest.raises(SystemExit, match="--problem"):
            tool.parse_problem_tag(bad, False)


def test_the_child_profiles_only_between_profiler_start_and_stop(tool):
    child = tool.child_command(["--problem", "2x8x512x64", "s8_persistent_split"], "s8_persistent_split")
    command = tool.ncu_command("ncu", Path("/tmp/r/s8"), ["a__b.sum", "c__d.sum"], child)
    assert command[:3] == ["ncu", "--metrics", "a__b.sum,c__d.sum"]
    assert command[command.index("--profile-from-start") + 1] == "off"
    assert command[-2:] == ["--child", "s8_persistent_split"]


def test_warm_keeps_the_caches_and_the_clocks_as_they_are(tool):
    child = tool.child_command(["--problem", "2x8x512x64", "--warm", "s8_persistent_split"], "s8_persistent_split")
    cold = tool.ncu_command("ncu", Path("/tmp/r/s8"), ["a__b.sum"], child)
    warm = tool.ncu_command("ncu", Path("/tmp/r/s8"), ["a__b.sum"], child, warm=True)
    assert "--cache-control" not in cold and "--clock-control" not in cold
    assert warm[warm.index("--cache-control") + 1] == "none" and warm[warm.index("--clock-control") + 1] == "none"
    assert warm.index("--clock-control") < warm.index("--child")


def test_only_a_refused_metric_triggers_the_fallback(tool):
    assert tool.unknown_metric('==ERROR== Failed to find metric sm__pipe_xu_cycles_active.avg')
    assert not tool.unknown_metric("==ERROR== The application returned an error code (1).")


def _raw_page(kernels):
    metrics = [ncu.DURATION, ncu.TENSOR_PIPE, ncu.WARP_INSTRUCTIONS, ncu.ISSUE_ACTIVE, ncu.PIPE_XU,
               ncu.stall_metric("wait"), ncu.stall_metric("barrier")]
    header = ",".join(f'"{c}"' for c in ["ID", ncu.KERNEL_COLUMN, *metrics])
    units = ",".join(f'"{u}"' for u in ["", "", "ns", "%", "inst", "%", "%", "", ""])
    body = [",".join(f'"{v}"' for v in [i, name, *values]) for i, (name, values) in enumerate(kernels)]
    return "\n".join(["==PROF== Disconnected", header, units, *body])


def test_a_subject_of_two_kernels_adds_times_and_weights_percentages(tool):
    # a 10 us pre-pass at 0% tensor and a 30 us main kernel at 80%: 40 us at 60%
    rows = ncu.parse_raw_csv(_raw_page([("prepass", [10_000, 0, 1_000_000, 20, 0, 1.0, 0.0]),
                                        ("main", [30_000, 80, 3_000_000, 60, 40, 2.0, 4.0])]))
    col = tool.column("s9_fp8", flops=4e9, rows=rows)
    assert col["kernels"] == 2
    assert col["time_us"] == pytest.approx(40.0)
    assert col["kernel_us"] == "10/30"  # each kernel's share, in launch order (s9: pre-pass, then attention)
    assert col["tensor_pct"] == pytest.approx(60.0)
    assert col["issue_pct"] == pytest.approx(50.0)
    assert col["warp_inst_M"] == pytest.approx(4.0)
    assert col["tflops"] == pytest.approx(4e9 / 40e-6 / 1e12)
    assert col["stalls"]["wait"] == pytest.approx(1.75)


def test_the_table_has_a_column_per_subject_and_names_what_went_wrong(tool):
    rows = ncu.parse_raw_csv(_raw_page([("main", [30_000, 80, 3_000_000, 60, 40, 2.0, 4.0])]))
    text = tool.table([tool.column("s8", 1e9, rows), tool.column("fa4", 1e9, [], ""),
                       tool.column("cudnn", 1e9, rows, tool.FALLBACK_NOTE)])
    header, rule, *body = text.splitlines()
    assert header == "| metric | s8 | fa4 | cudnn |"
    assert any(line.startswith("| time_us | 30 | – | 30 |") for line in body)
    assert any(line.startswith("| stall barrier |") for line in body)
    assert "fa4: no kernel profiled" in text and f"cudnn: {tool.FALLBACK_NOTE}" in text


def test_a_refused_metric_tier_falls_back_and_the_table_says_so(tool, tmp_path, monkeypatch):
    page = _raw_page([("flash_fwd_kernel", [30_000, 80, 3_000_000, 60, 40, 2.0, 4.0])])
    tried = []

    def fake_run(command, timeout_s, env):
        if "--import" in command:
            return 0, page
        metrics = command[command.index("--metrics") + 1]
        tried.append(metrics)
        if ncu.CLUSTER_SIZE in metrics:
            return 1, f"==ERROR== Failed to find metric {ncu.CLUSTER_SIZE}"
        (tmp_path / ("fa4" + ncu.REPORT_SUFFIX)).write_text("report")
        return 0, ""

    monkeypatch.setattr(tool, "run_under_tool", fake_run)
    col = tool.profile_subject("ncu", ["--problem", "2x8x512x64"], "fa4", tmp_path, flops=1e9)
    # the L2 split goes first, then the launch shape; the issue-slot metrics are kept
    assert len(tried) == 3 and ncu.L2_FROM_FABRIC in tried[0] and ncu.L2_FROM_FABRIC not in tried[1]
    assert ncu.ISSUE_ACTIVE in tried[2]
    assert col["note"] == tool.FALLBACK_NOTE and col["time_us"] == pytest.approx(30.0)
    assert "fa4 ran: flash_fwd_kernel" in tool.table([col])


def test_a_failing_child_is_a_column_that_names_its_log(tool, tmp_path, monkeypatch):
    monkeypatch.setattr(tool, "run_under_tool", lambda command, timeout_s, env: (1, "Traceback: no GPU"))
    col = tool.profile_subject("ncu", ["--problem", "2x8x512x64"], "s8", tmp_path, flops=1e9)
    assert col["note"] == "ncu exit 1 (see s8.log)"
    assert (tmp_path / "s8.log").read_text() == "Traceback: no GPU"


def test_l2_sectors_by_source_and_operation_are_summed_as_megabytes(tool):
    # two kernels' L2 sectors: 1 M from the SMs and 0.5 M over the partition fabric in all
    metrics = [ncu.DURATION, ncu.L2_FROM_SM, ncu.L2_FROM_FABRIC, ncu.L2_READS, ncu.L2_WRITES]
    header = ",".join(f'"{c}"' for c in ["ID", ncu.KERNEL_COLUMN, *metrics])
    units = ",".join(f'"{u}"' for u in ["", "", "ns", "sector", "sector", "sector", "sector"])
    body = ['"0","a","10000","250000","125000","300000","75000"',
            '"1","b","30000","750000","375000","900000","225000"']
    rows = ncu.parse_raw_csv("\n".join([header, units, *body]))
    col = tool.column("s8", flops=1e9, rows=rows)
    sector = ncu.L2_SECTOR_BYTES
    assert col["l2_from_sm_MB"] == pytest.approx(1e6 * sector / 1e6)
    assert col["l2_from_fabric_MB"] == pytest.approx(0.5e6 * sector / 1e6)
    assert col["l2_read_MB"] == pytest.approx(1.2e6 * sector / 1e6)
    assert col["l2_write_MB"] == pytest.approx(0.3e6 * sector / 1e6)
    assert "| l2_from_fabric_MB | 16 |" in tool.table([col])
    assert math.isnan(col["lrc_to_sms_MB"])  # not asked for here: n/a, not 0


def test_source_sampling_keeps_the_page_and_writes_its_summary(tool, tmp_path, monkeypatch):
    page = ('"Kernel Name","k",\n"Address","Source","Warp Stall Sampling (All Samples)",'
            '"Warp Stall Sampling (Not-issued Samples)","stall_wait"\n"0x10","MUFU.EX2 R1, R2 ;","4","3","3"\n')
    commands = []

    def fake_run(command, timeout_s, env):
        commands.append(command)
        return (0, page) if "--import" in command else (0, "")

    monkeypatch.setattr(tool, "run_under_tool", fake_run)
    text = tool.profile_source("ncu", ["--problem", "2x8x512x64", "--source"], "s9", tmp_path)
    assert "SourceCounters" in commands[0] and "source" in commands[1]
    assert (tmp_path / "s9.source.csv").read_text() == page
    assert "| wait | 75.0 | MUFU.EX2 |" in text and (tmp_path / "s9.source.md").read_text() == text


def test_a_failed_sampling_names_its_log(tool, tmp_path, monkeypatch):
    monkeypatch.setattr(tool, "run_under_tool", lambda command, timeout_s, env: (2, "no GPU"))
    assert "ncu exit 2 while sampling (see s8.source.log)" in tool.profile_source("ncu", [], "s8", tmp_path)


def test_a_problem_takes_grouped_heads_a_key_length_and_the_layout(tool):
    entry = tool.parse_problem_tag("1x32x512x128", True, kv_heads=8, kv_seq_len=4096, layout="bshd")
    assert entry == {"shape": [1, 32, 512, 128], "causal": True, "kv_heads": 8, "kv_seq_len": 4096, "layout": "bshd"}
    from stagelab.core.family import load_family

    problem = load_family("sdpa").parse_problem("ncu_compare", entry)[0]
    assert (problem.kv_heads, problem.kv_seq_len, problem.layout) == (8, 4096, "bshd")
