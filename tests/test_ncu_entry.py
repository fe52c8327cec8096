"""An Nsight Compute comparison recorded as a trial run (stagelab.record.ncu_entry and
tools/ncu_compare.py --record / --record-table), without a GPU: the table built from parsed ncu
pages, read back, written as a trials entry and imported into a real SQLite store."""

import pytest
import yaml
from test_ncu_compare import _raw_page
from tool_module import load_tool

from stagelab.core import metrics as m
from stagelab.core.errors import ConfigError
from stagelab.measure import ncu
from stagelab.record import ncu_entry, tracking
from stagelab.record.trial_source import load_entries

STAGE = "s17_interleaved_softmax"
TABLE_HEADER = "2x10x4096x64 layout=bshd float16"  # the table's first line; the entry's problem has no "="
PROBLEM = "2x10x4096x64 layout bshd float16"


@pytest.fixture(scope="module")
def tool():
    return load_tool("ncu_compare")


def _page(rows):
    return ncu.parse_raw_csv(_raw_page(rows))


def _columns(tool):
    """s17 at 40 us, a variant at 50, and a two-kernel library subject (whose per-kernel cells
    have no single value) at 20 + 10."""
    return [tool.column(STAGE, 1e9, _page([("main", [40_000, 50, 4_000_000, 46, 52, 1.75, 0.25])])),
            tool.column("every4", 1e9, _page([("main", [50_000, 49, 5_000_000, 56, 39, 1.0, 0.2])])),
            tool.column("cudnn", 1e9, _page([("pre", [20_000, 0, 1_000_000, 10, 0, 0.5, 0.0]),
                                             ("main", [10_000, 90, 2_000_000, 50, 50, 0.8, 0.8])]))]


def test_the_table_reads_back_as_it_was_printed(tool):
    columns = _columns(tool)
    read, rows = ncu_entry.columns_from_table("2x10x4096x64 float16\n\n" + tool.table(columns) + "\n")
    assert [col["label"] for col in read] == [STAGE, "every4", "cudnn"]
    assert rows[:5] == ["kernels", "grid", "block", "cluster", "time_us"]
    assert "stall wait" in rows and "stall barrier" in rows
    assert float(read[0]["time_us"]) == pytest.approx(40.0) and float(read[2]["time_us"]) == pytest.approx(30.0)
    assert read[2]["kernel_us"] == "20/10"
    assert float(read[1]["stalls"]["wait"]) == pytest.approx(1.0)


def test_a_page_that_is_not_a_comparison_is_refused():
    with pytest.raises(ConfigError, match="not an ncu_compare table"):
        ncu_entry.columns_from_table("# some notes\n\n| a | b |\n|---|---|\n| 1 | 2 |\n")


def test_the_entry_puts_the_headline_rows_first_and_drops_what_has_no_single_value(tool):
    columns = _columns(tool)
    rows = [*tool.ROWS, *tool.stall_rows(columns)]
    entry = ncu_entry.comparison_entry(STAGE, PROBLEM, columns, rows, hypothesis="why SDXL self is slower",
                                       state="locked clocks", commit="abc1234", gpu="NVIDIA H100 80GB HBM3",
                                       date="2026-11-26T09:19", source="build/ncu_compare/0/ncu_compare.md")
    numbers = entry["numbers"]
    assert [n["quantity"] for n in numbers[:2]] == ["ncu time_us at locked clocks", "ncu tflops at locked clocks"]
    time = numbers[0]
    assert time["metric"] == "us" and time["trial"] == pytest.approx(40)
    assert time["contenders"] == pytest.approx({"every4": 50, "cudnn": 30})
    kernel_us = next(n for n in numbers if n["quantity"].startswith("ncu kernel_us"))
    assert list(kernel_us["contenders"]) == ["every4"], "a two-kernel cell (20/10) is no single number"
    wait = next(n for n in numbers if n["quantity"].startswith("ncu stall wait"))
    assert wait["unit"] == "stalls per issue" and wait["trial"] == pytest.approx(1.75)
    assert entry["verdict"] == "inconclusive" and entry["defines"] == {}
    assert entry["hypothesis"].startswith("why SDXL self is slower (tools/ncu_compare.py at " + PROBLEM)
    with pytest.raises(ConfigError, match="--hypothesis"):
        ncu_entry.comparison_entry(STAGE, PROBLEM, columns, rows, hypothesis=" ", state="", commit="",
                                   gpu="", date="2026-11-26", source="")


def test_the_comparison_is_a_trial_run_once(tool, tmp_store, tmp_path):
    columns = _columns(tool)
    table = tmp_path / "ncu_compare.md"
    table.write_text(f"{TABLE_HEADER}\n\n{tool.table(columns)}\n")
    entry = ncu_entry.comparison_entry(STAGE, PROBLEM, columns, [*tool.ROWS, *tool.stall_rows(columns)],
                                       hypothesis="where the time goes", state="locked clocks",
                                       commit="abc1234", gpu="NVIDIA H100 80GB HBM3", date="2026-11-26T09:19",
                                       source=str(table))
    run_id = ncu_entry.record_comparison(entry, tmp_path, table)
    assert load_entries(tmp_path / ncu_entry.ENTRY_FILE) == [entry] == yaml.safe_load(
        (tmp_path / ncu_entry.ENTRY_FILE).read_text())
    run = tracking.client().get_run(run_id)
    assert run.data.tags[m.TAG_KIND] == m.KIND_TRIAL and run.data.tags[m.TAG_TRIAL_OF] == STAGE
    assert run.data.tags[m.TAG_VERDICT] == "inconclusive" and run.data.tags[m.TAG_TRIAL_COMMIT] == "abc1234"
    key = f"imported/us/{PROBLEM}/ncu time_us at locked clocks"
    assert run.data.metrics[f"{key}/trial"] == pytest.approx(40)
    assert run.data.metrics[f"{key}/contender.cudnn"] == pytest.approx(30)
    assert [a.path for a in tracking.client().list_artifacts(run_id, ncu_entry.TABLE_ARTIFACT)] == ["ncu/ncu_compare.md"]
    assert ncu_entry.record_comparison(entry, tmp_path, table) is None, "the same table twice is one run"


def _record_table_args(table, *subjects):
    return ["--problem", "2x10x4096x64", "--layout", "bshd", *subjects, "--record-table", str(table),
            "--gpu", "NVIDIA H100 80GB HBM3", "--date", "2026-11-26T09:19", "--hypothesis", "where the time goes"]


def test_record_table_records_an_earlier_call(tool, tmp_store, tmp_path, monkeypatch):
    monkeypatch.setenv("STAGELAB_GIT_COMMIT", "abc1234")
    columns = _columns(tool)
    table = tmp_path / "ncu_compare.md"
    table.write_text(f"{TABLE_HEADER}\n\n{tool.table(columns)}\n")
    args = _record_table_args(table, STAGE, "--variant", f"every4={STAGE}:WS_PDL=1", "--contenders", "cudnn")
    assert tool.main(args) == 0
    runs = tracking.client().search_runs([tracking.client().get_experiment_by_name("stagelab-sdpa").experiment_id])
    assert [r.data.tags[m.TAG_TRIAL_NAME] for r in runs] == [f"ncu_compare {PROBLEM}"]
    assert runs[0].data.tags[m.TAG_TRIAL_GPU] == "NVIDIA H100 80GB HBM3"


def test_record_table_refuses_other_subjects_another_problem_and_no_hypothesis(tool, tmp_store, tmp_path):
    columns = _columns(tool)
    table = tmp_path / "ncu_compare.md"
    table.write_text(f"{TABLE_HEADER}\n\n{tool.table(columns)}\n")
    with pytest.raises(SystemExit, match="not the ones named"):
        tool.main(_record_table_args(table, STAGE, "--contenders", "cudnn"))
    other = tmp_path / "other.md"
    other.write_text(f"2x10x4096x128 layout=bshd float16\n\n{tool.table(columns)}\n")
    with pytest.raises(SystemExit, match="it measured"):
        tool.main(_record_table_args(other, STAGE, "--variant", f"every4={STAGE}:WS_PDL=1", "--contenders", "cudnn"))
    with pytest.raises(SystemExit, match="--record needs --hypothesis"):
        tool.main(["--problem", "2x10x4096x64", STAGE, "--record"])
