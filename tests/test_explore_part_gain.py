"""explore.part_gain: a stage against its parent, read from a real TimingReport.

The parent's timing label is `parent:<id>` and its speedup key `speedup_vs_parent`; part_gain once
looked for `speedup_vs_<parent id>` and crashed every acceptance run with `steps: [explore]` (s18's
H200 acceptance run of 2026-11-29 ended `error` on it after all its checks had passed).
"""
from types import SimpleNamespace

import matplotlib
import pytest

from stagelab.explore import part_gain, show_part_gain
from stagelab.measure.results import PARENT_PREFIX, TimingReport
from stagelab.measure.timing import TimingStats

matplotlib.use("Agg")

STAGE, PARENT, LIBRARY = "s18_three_turns", "s17_interleaved_softmax", "sdpa_"


def _stats(contender: str, shape: str, mode: str, p50_us: float) -> TimingStats:
    return TimingStats(contender=contender, shape=shape, causal=False, mode=mode, repetitions=10, p50_us=p50_us,
                       p90_us=p50_us, p99_us=p50_us, iqr_us=0.0, mean_us=p50_us, tflops=1.0, gbps=1.0)


def _run(stats: list[TimingStats], *, parent=PARENT):
    report = TimingReport(stats=stats, stage_label=STAGE, library_prefix=LIBRARY, primary_mode="cold")
    return SimpleNamespace(
        speedups=report.speedups, parent=SimpleNamespace(id=parent) if parent else None,
        stage=SimpleNamespace(id=STAGE), results=SimpleNamespace(timing=report, built=None))


def _timed() -> list[TimingStats]:
    rows = []
    for shape, stage_us, parent_us in (("2x8x512x64", 10.0, 12.0), ("4x16x576x64", 20.0, 25.0)):
        for mode, factor in (("cold", 1.0), ("hot", 0.5)):
            rows += [_stats(STAGE, shape, mode, stage_us * factor),
                     _stats(PARENT_PREFIX + PARENT, shape, mode, parent_us * factor * (2 if mode == "hot" else 1)),
                     _stats(LIBRARY + "cudnn", shape, mode, 30.0)]
    return rows


def test_part_gain_is_the_parents_p50_over_the_stages_in_the_primary_mode():
    frame = part_gain(_run(_timed()))
    ratio = f"parent_p50 / {STAGE}_p50"
    assert list(frame.columns) == ["shape", "stage_p50_us", ratio]
    assert dict(zip(frame["shape"], frame[ratio])) == pytest.approx({"2x8x512x64": 1.2, "4x16x576x64": 1.25})
    assert list(frame["stage_p50_us"]) == [10.0, 20.0]  # cold rows only: hot's ratios are twice these


def test_part_gain_is_empty_without_a_parent_or_a_timing():
    assert part_gain(_run(_timed(), parent=None)).empty
    assert part_gain(_run([])).empty


def test_show_part_gain_plots_one_bar_per_problem(capsys):
    axes = show_part_gain(_run(_timed()), title="s18 vs s17")
    assert [label.get_text() for label in axes.get_xticklabels()] == ["2x8x512x64", "4x16x576x64"]
    assert [round(bar.get_height(), 3) for bar in axes.patches] == [1.2, 1.25]
    assert show_part_gain(_run([]), title="nothing") is None
    assert "nothing timed against the parent" in capsys.readouterr().out
