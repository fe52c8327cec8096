"""What a batch keeps of each notebook (NotebookResult) and its summary: a row per stage (its
outcome, key metrics, seconds and GPU), written beside the executed notebooks as summary.csv and
summary.md and printed by `stagelab run`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..core import metrics
from ..core.formatting import markdown, plain
from ..record import tracking

# Batch summary column -> the metric it shows (speedups: the geometric mean over the timed problems).
SUMMARY_METRICS = {
    "mission_p50_us": metrics.MISSION_P50_US,
    "speedup_vs_parent": metrics.speedup_geomean(metrics.PARENT),
    "speedup_vs_best": metrics.speedup_geomean(metrics.BEST_CONTENDER),
    "max_registers": metrics.MAX_REGISTERS,
    "max_shared_memory_bytes": metrics.MAX_SHARED_MEMORY,
    "total_spill_bytes": metrics.TOTAL_SPILLS,
}
SUMMARY_COLUMNS = ["stage", "outcome", *SUMMARY_METRICS, "seconds", "gpu", "run_id"]


@dataclass
class NotebookResult:
    stage: str
    run_id: str
    outcome: str
    seconds: float
    executed: Path | None  # None: a finished run kept by --resume
    error: str = ""
    gpu: str = ""  # the GPU index it ran on with --gpus


def summary_row(result: NotebookResult) -> dict:
    logged = tracking.client().get_run(result.run_id).data.metrics
    return {"stage": result.stage, "outcome": result.outcome,
            **{column: logged.get(metric.key()) for column, metric in SUMMARY_METRICS.items()},
            "seconds": round(result.seconds, 1), "gpu": result.gpu, "run_id": result.run_id}


def write_summary(rows: list[dict], folder: Path) -> pd.DataFrame:
    summary = pd.DataFrame(rows, columns=SUMMARY_COLUMNS)
    summary.to_csv(folder / "summary.csv", index=False, float_format=plain)
    (folder / "summary.md").write_text(markdown(summary))
    return summary
