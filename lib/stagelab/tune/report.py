"""The end of a tune: the parent run's elites, outcome counts, table and search plot."""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path

import pandas as pd

from ..core import metrics as m
from ..core.formatting import latency
from ..judge.outcome import UNCOVERED
from ..record import tracking
from ..record.run_summary import write_summary
from ..record.recorder import write_table
from .store import TuneStore
from .trials import TuneResult


def parent_outcome(result: TuneResult) -> tuple[str, str]:
    """The tune run's outcome: `pass` with elites, `no_gpu` when nothing could be timed here,
    else the furthest any configuration got."""
    counts = Counter(t.outcome.outcome for t in result.trials if t.outcome)
    if result.elites:
        return "pass", f"best {result.elites[0].label}: {latency(result.elites[0].score_us)} (geometric-mean p50)"
    if not result.gpu_available:
        return "no_gpu", "every configuration built and gated; checking and timing need a GPU"
    for outcome in ("incorrect", UNCOVERED, "resource_fail", "build_failed"):
        if counts[outcome]:
            return outcome, f"no configuration was correct and covered ({dict(counts)})"
    return "error", f"the tune ended before any configuration was measured ({dict(counts)})"


def _artifacts(result: TuneResult, folder: Path) -> None:
    frame = pd.DataFrame(result.rows())
    write_table(folder, "tune", frame)
    if frame[m.TUNE_SCORE_US.name].notna().any():
        from ..record.plots import search_plot

        import matplotlib.pyplot as plt

        plt.close(search_plot(frame, folder / "search.png", score=m.TUNE_SCORE_US.name,
                              title=f"tune of {result.stage_id}: geometric-mean p50 per configuration"))


def finish_parent(store: TuneStore, result: TuneResult) -> None:
    """Record elites, counts, table and plot on the tune run, and end it."""
    run_id = result.parent_run_id
    store.set_elites(run_id, [(t.label, t.run_id, t.score_us) for t in result.elites])
    counts = Counter(t.outcome.outcome for t in result.trials if t.outcome)
    tracking.log_metrics(run_id, {m.TUNE_CONFIGS.key(outcome): n for outcome, n in counts.items()})
    outcome, reason = parent_outcome(result)
    tracking.set_tags(run_id, {m.TAG_OUTCOME: outcome, m.TAG_OUTCOME_REASON: reason})
    write_summary(run_id)
    with tempfile.TemporaryDirectory(prefix="stagelab-tune-") as folder:
        try:
            _artifacts(result, Path(folder))
        except Exception as exc:  # a plot must never cost the record
            (Path(folder) / "plot_error.txt").write_text(repr(exc))
        tracking.log_artifacts(run_id, folder, "results")
    tracking.end_run(run_id, "FINISHED" if outcome in ("pass", "no_gpu") else "FAILED")
