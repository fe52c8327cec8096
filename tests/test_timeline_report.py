"""tools/timeline_report.py: the sums of tools/microbench/sdpa_timeline.cu's block stamps, on a
synthetic record set whose clocks, phases and launch times are known."""

import pandas as pd
import pytest
from tool_module import load_tool

PHASES = ["entry", "prologue", "producer_go", "loads_issued", "consumer_go", "q_landed", "k_landed", "first_tile",
          "mainloop", "peer_mainloop", "merge_ready", "folded", "stored"]
# ns after a block's entry at which it stamps each phase
OFFSETS_NS = {"entry": 0, "prologue": 200, "producer_go": 900, "loads_issued": 1000, "consumer_go": 950,
              "q_landed": 1700, "k_landed": 1800, "first_tile": 2300, "mainloop": 3100, "peer_mainloop": 3300,
              "merge_ready": 3350, "folded": 3500, "stored": 3900}


def synthetic(launches=5, sms=4, period_ns=5000, ghz=None):
    """Each SM runs one block per launch; SM s ticks at ghz[s] clocks per ns from its own origin."""
    ghz = ghz or [1.5 + 0.1 * s for s in range(sms)]
    rows = []
    for launch in range(launches):
        for sm in range(sms):
            entry_ns = 10_000 + launch * period_ns + 30 * sm
            row = {"launch": launch, "block": sm, "smid": sm}
            for phase in PHASES:
                row[f"clk_{phase}"] = int(round((entry_ns + OFFSETS_NS[phase]) * ghz[sm])) + 7 * sm
            row["ns_entry"] = entry_ns  # the harness's one global timestamp per block
            rows.append(row)
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def tool():
    return load_tool("timeline_report")


def test_each_sms_clock_rate_is_fitted_from_its_own_records(tool):
    ghz = tool.sm_ghz(synthetic(ghz=[1.2, 1.98, 1.755, 1.6]))
    assert list(ghz.round(3)) == [1.2, 1.98, 1.755, 1.6]


def test_phase_steps_are_the_clock_deltas_in_us(tool, tmp_path):
    df = synthetic()
    rel = tool.phase_ns(df, list(OFFSETS_NS))
    steps = tool.step_table(rel, df["launch"].between(1, 3)).set_index(["from", "to"])
    assert steps.loc[("consumer_go", "q_landed"), "median_us"] == pytest.approx(0.75, abs=2e-3)
    assert steps.loc[("folded", "stored"), "median_us"] == pytest.approx(0.4, abs=2e-3)
    assert steps.loc[("producer_go", "loads_issued"), "blocks"] == 12  # 3 middle launches x 4 SMs


def test_launches_are_placed_by_the_global_timer(tool):
    df = synthetic(period_ns=5000)
    lt = tool.launch_table(df, tool.phase_ns(df, list(OFFSETS_NS)))
    assert lt["period_us"].dropna().tolist() == pytest.approx([5.0] * 4)
    # last block enters 90 ns after the first and stores 3.9 us later
    assert lt["span_us"].tolist() == pytest.approx([3.99] * 5, abs=2e-3)
    assert lt["overlap_next_us"].dropna().tolist() == pytest.approx([-1.01] * 4, abs=2e-3)


def test_an_unstamped_phase_is_left_out_not_read_as_zero(tool):
    df = synthetic()
    df["clk_merge_ready"] = 0  # a config without the key split never stamps it
    rel = tool.phase_ns(df, list(OFFSETS_NS))
    steps = tool.step_table(rel, df["launch"].notna()).set_index(["from", "to"])
    assert "merge_ready" not in {phase for step in steps.index for phase in step}
    assert steps.loc[("mainloop", "folded"), "median_us"] == pytest.approx(0.4, abs=2e-3)  # the steps around it join


def test_a_file_without_a_phase_column_reads_it_as_unstamped(tool):
    df = synthetic().drop(columns=["clk_k_landed"])  # an older harness
    steps = tool.step_table(tool.phase_ns(df, list(OFFSETS_NS)), df["launch"].notna())
    assert "k_landed" not in set(steps["from"]) | set(steps["to"])
    assert ("q_landed", "first_tile") in set(zip(steps["from"], steps["to"]))


def test_the_report_and_its_plot_are_written(tool, tmp_path, capsys):
    csv = tmp_path / "timeline.csv"
    synthetic().to_csv(csv, index=False)
    assert tool.main([str(csv), "--plot", str(tmp_path / "t.png"), "--markdown", str(tmp_path / "t.md")]) == 0
    assert (tmp_path / "t.png").stat().st_size > 0
    text = (tmp_path / "t.md").read_text()
    assert "median period (start to start): 5.00 us" in text
    assert "peer warpgroup's mainloop ends +0.20 us after warpgroup 0's" in text


def test_records_without_an_entry_stamp_are_refused(tool, tmp_path):
    df = synthetic()
    df.loc[3, "clk_entry"] = 0
    csv = tmp_path / "bad.csv"
    df.to_csv(csv, index=False)
    with pytest.raises(SystemExit, match="1 records without an entry stamp"):
        tool.load(csv)


# ns after a block's entry of each item's stamps: item n starts 2000 ns after item n-1, Q lands
# 100 ns in, the first key tile 400 ns later, the last P.V 1000 ns after that, O stored 300 ns later
def with_items(df: pd.DataFrame, items=3, ghz=None) -> pd.DataFrame:
    ghz = ghz or [1.5 + 0.1 * s for s in range(df["smid"].max() + 1)]
    offsets = {"q_landed": 100, "first_tile": 500, "mainloop": 1500, "stored": 1800}
    for n in range(items):
        for phase, at in offsets.items():
            df[f"clk_item{n}_{phase}"] = [int(round((e + 4000 + 2000 * n + at) * ghz[sm])) + 7 * sm
                                          for e, sm in zip(df["ns_entry"], df["smid"])]
    df["clk_item3_q_landed"] = 0  # a column the harness writes for an item the block never had
    df["clk_item_decoded"] = df["clk_prologue"]  # the block's own phase, not an item's
    return df


def test_each_work_items_steps_and_the_boundary_between_items(tool):
    df = with_items(synthetic())
    table = tool.item_table(df, df["launch"].between(1, 3)).set_index(["from", "to"])
    assert tool.item_columns(df) == [0, 1, 2]
    assert table.loc[("q_landed", "first_tile"), "median_us"] == pytest.approx(0.4, abs=2e-3)
    assert table.loc[("first_tile", "mainloop"), "median_us"] == pytest.approx(1.0, abs=2e-3)
    assert table.loc[("mainloop", "stored"), "items"] == 3 * 12  # 3 items x 3 middle launches x 4 SMs
    # item n's last P.V at 1500, item n+1's Q at 2100 and its first key tile at 2500 (ns)
    assert table.loc[("mainloop", "next q_landed"), "median_us"] == pytest.approx(0.6, abs=2e-3)
    assert table.loc[("mainloop", "next first_tile"), "median_us"] == pytest.approx(1.0, abs=2e-3)
    assert table.loc[("mainloop", "next first_tile"), "items"] == 2 * 12


def test_a_file_without_item_stamps_has_no_item_table(tool, tmp_path):
    df = synthetic()
    assert tool.item_columns(df) == [] and tool.item_table(df, df["launch"].notna()).empty
    csv = tmp_path / "items.csv"
    with_items(synthetic()).to_csv(csv, index=False)
    assert tool.main([str(csv), "--markdown", str(tmp_path / "t.md")]) == 0
    assert "boundary: last P.V to the next item's first key tile" in (tmp_path / "t.md").read_text()


def test_middle_tiles_are_cycles_per_tile_of_each_step(tool, tmp_path, capsys):
    df = synthetic(launches=3, sms=2)
    steps = {"rescale": 10, "k_wait": 0, "turn_wait": 300, "issue": 40, "s_wait": 200, "softmax": 700,
             "pv_wait": 50, "pack": 30}
    for wg in (0, 1, 2):
        for step, cycles in steps.items():
            tiles = 6 + df["smid"]  # blocks with 6 and 7 tiles: a tile's share is the same
            df[f"tile_wg{wg}_{step}"] = (cycles + 100 * wg) * tiles if wg < 2 else 0
        df[f"tile_wg{wg}_count"] = (6 + df["smid"]) if wg < 2 else 0  # no third warpgroup in this config
    table = tool.tile_table(df, df["launch"] == 1).set_index(["warpgroup", "step"])
    assert table.loc[(0, "softmax"), "cycles"] == pytest.approx(700)
    assert table.loc[(1, "turn_wait"), "cycles"] == pytest.approx(400)
    assert table.loc[(0, "tile"), "cycles"] == pytest.approx(sum(steps.values()))
    assert table.loc[(0, "softmax"), "share"] == pytest.approx(700 / sum(steps.values()))
    assert 2 not in set(table.index.get_level_values(0)), "a warpgroup with no tile has no rows"
    csv = tmp_path / "timeline.csv"
    df.to_csv(csv, index=False)
    assert tool.main([str(csv)]) == 0
    assert "## Middle key tiles of a consumer warpgroup" in capsys.readouterr().out


def test_a_file_without_tile_clocks_has_no_tile_table(tool):
    df = synthetic()
    assert tool.tile_table(df, df["launch"].notna()).empty


def test_record_makes_the_report_a_trial_run(tool, tmp_path, tmp_store, monkeypatch, capsys):
    from stagelab.core import metrics as m
    from stagelab.record import tracking

    monkeypatch.setenv("STAGELAB_GIT_COMMIT", "abc1234")
    df = synthetic(launches=3, sms=2)
    for step in tool.TILE_STEPS:
        df[f"tile_wg0_{step}"] = 100 * 6
    df["tile_wg0_count"] = 6
    csv = tmp_path / "timeline.csv"
    df.to_csv(csv, index=False)
    with pytest.raises(SystemExit, match="--record needs"):
        tool.main([str(csv), "--record", "s17_interleaved_softmax"])
    args = [str(csv), "--markdown", str(tmp_path / "t.md"), "--record", "s17_interleaved_softmax",
            "--problem", "2x10x4096x64", "--gpu", "NVIDIA H100 80GB HBM3", "--date", "2026-11-26T10:12",
            "--hypothesis", "where a tile's time goes"]
    assert tool.main(args) == 0
    assert "recorded as trial run" in capsys.readouterr().out
    experiment = tracking.client().get_experiment_by_name("stagelab-sdpa").experiment_id
    (run,) = tracking.client().search_runs([experiment])
    assert run.data.tags[m.TAG_TRIAL_NAME] == "timeline 2x10x4096x64" and run.data.tags[m.TAG_TRIAL_COMMIT] == "abc1234"
    assert run.data.metrics["imported/clocks/2x10x4096x64/warpgroup 0 softmax a middle tile/trial"] == 100
    assert run.data.metrics["imported/us/2x10x4096x64/stamped build launch period median/trial"] == pytest.approx(5.0)
    assert [a.path for a in tracking.client().list_artifacts(run.info.run_id, "timeline")] == ["timeline/t.md"]
    assert tool.main(args) == 0 and "already in the store" in capsys.readouterr().out
