"""Recording: typed results -> MLflow metrics, tables, plots and artifacts, in one place.

`MlflowRecorder` is the default; `NullRecorder` records nothing (exploration,
tests). The MLflow run is created on the first record, not before: building a
StageRun costs no store access, subprocess or GPU query.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pandas as pd

from . import flatten, tracking
from .run_summary import write_summary
from .saved_sources import log_sources
from ..core import metrics
from ..judge.outcome import Outcome
from ..measure.profile import ProfileReport
from ..measure.results import Built, CheckReport, ResourceReport, StageResults, TimingReport
from ..measure.sanitize import SanitizeReport
from ..core.context import StageContext
from ..core.formatting import markdown_as_recorded, plain
from ..core.sources import run_source_hash
from ..measure.protocol import ProtocolReport
from ..measure.stress import StressReport


class NullRecorder:
    """Records nothing; every method of the recorder interface is a no-op."""

    run_id: str | None = None

    def record_build(self, built: Built | None, log: str | None = None) -> None: ...

    def record_resources(self, report: ResourceReport) -> None: ...

    def record_checks(self, report: CheckReport) -> None: ...

    def record_timing(self, report: TimingReport) -> None: ...

    def record_sweep(self, name: str, frame: pd.DataFrame) -> None: ...

    def record_sanitize(self, report: SanitizeReport) -> None: ...

    def record_profile(self, report: ProfileReport) -> None: ...

    def record_stress(self, report: StressReport) -> None: ...

    def record_protocol(self, report: ProtocolReport) -> None: ...

    def record_hang(self, hang: str) -> None: ...

    def folder(self, name: str) -> Path:
        """Where a step writes files (Nsight Compute reports): a fresh temporary folder."""
        return Path(tempfile.mkdtemp(prefix=f"stagelab-{name}-"))

    def finish(self, outcome: Outcome, results: StageResults) -> None: ...


def write_table(folder: Path, name: str, frame: pd.DataFrame) -> None:
    if frame.empty:
        return
    frame.to_csv(folder / f"{name}.csv", index=False, float_format=plain)  # every digit, never 1e-05
    (folder / f"{name}.md").write_text(markdown_as_recorded(frame))


class StressAndHangRecords:
    """The MLflow recorder's part for the stress and protocol steps and a hang (MlflowRecorder provides
    _run, folder and artifacts)."""

    def record_stress(self, report: StressReport) -> None:
        """The verdict as a tag, rounds and failures as metrics, every round's row as a table."""
        run_id = self._run()
        write_table(self.folder("stress"), "rounds", report.frame())
        tracking.log_metrics(run_id, report.metrics())
        tracking.set_tags(run_id, {metrics.TAG_STRESS: report.status})

    def record_protocol(self, report: ProtocolReport) -> None:
        """The verdict as a tag, launches and violations as metrics, each launch's plan and report as
        the table `protocol` (results/protocol.csv)."""
        run_id = self._run()
        write_table(self.artifacts, metrics.TABLE_PROTOCOL, report.frame())
        tracking.log_metrics(run_id, report.metrics())
        tracking.set_tags(run_id, {metrics.TAG_PROTOCOL: report.status})

    def record_hang(self, hang: str) -> None:
        """What hung, as a tag, before the verdict: the process ends right after the record."""
        tracking.set_tags(self._run(), {metrics.TAG_HANG: hang})


class MlflowRecorder(StressAndHangRecords):
    def __init__(self, ctx: StageContext, experiment: str | None = None, run_id: str | None = None):
        self.ctx = ctx
        self.experiment = experiment or ctx.family.experiment
        self.run_id = run_id
        self._started = False
        self._artifacts: Path | None = None

    @property
    def artifacts(self) -> Path:
        if self._artifacts is None:
            self._artifacts = Path(tempfile.mkdtemp(prefix=f"stagelab-{self.ctx.stage.id}-"))
        return self._artifacts

    def _run(self) -> str:
        """The MLflow run, created (or adopted from the batch runner) on first use."""
        if not self._started:
            from .provenance import run_params, run_tags

            experiment_id = tracking.init_store(self.experiment)
            if self.run_id is None:
                self.run_id = tracking.create_run(experiment_id, self.ctx.stage.id, self.ctx.params.name,
                                                  timeout_s=self.ctx.params.timeout_s)
            tracking.log_params(self.run_id, run_params(self.ctx))
            tracking.set_tags(self.run_id, run_tags(self.ctx))
            self._started = True
        return self.run_id

    def record_build(self, built: Built | None, log: str | None = None) -> None:
        run_id = self._run()
        if built is None:
            (self.artifacts / "build.log").write_text(log or "")
            return
        b = built.stage
        (self.artifacts / "ptxas.log").write_text(b.ptxas_log)
        source = run_source_hash(self.ctx.stage, self.ctx.registry, self.ctx.family)
        tracking.set_tags(run_id, {metrics.TAG_SOURCE_HASH: source, "build_key": b.key,
                                   "build_cached": str(b.cached).lower(),
                                   "stage_config": b.module.stage_config() if b.module else ""})
        tracking.log_metrics(run_id, {metrics.BUILD_SECONDS.key(): b.seconds})

    def record_resources(self, report: ResourceReport) -> None:
        run_id = self._run()
        write_table(self.artifacts, "resources", report.frame())
        write_table(self.artifacts, "gates", report.gates_frame())
        if report.instructions:
            write_table(self.artifacts, "sass_opcodes", pd.DataFrame(report.instructions))
        tracking.log_metrics(run_id, flatten.resource_metrics(report))
        tracking.set_tags(run_id, {"gates_passed": str(report.passed).lower()})

    def record_checks(self, report: CheckReport) -> None:
        run_id = self._run()
        write_table(self.artifacts, "correctness", report.frame())
        write_table(self.artifacts, "dependent_launches", report.chain_frame())
        write_table(self.artifacts, metrics.TABLE_LAUNCH_PLANS, report.plans_frame())
        if report.skipped:
            (self.artifacts / "checks_skipped.json").write_text(json.dumps(report.skipped, indent=2))
        tracking.log_metrics(run_id, flatten.check_metrics(report))

    def record_timing(self, report: TimingReport) -> None:
        run_id = self._run()
        write_table(self.artifacts, "timing", report.frame())
        write_table(self.artifacts, "speedups", report.speedups())
        if report.unavailable:
            (self.artifacts / "contenders_unavailable.json").write_text(json.dumps(report.unavailable, indent=2))
        if report.skipped:
            (self.artifacts / "timing_skipped.json").write_text(json.dumps(report.skipped, indent=2))
        tracking.log_metrics(run_id, flatten.timing_metrics(report, self.ctx.params.mission.tag))
        tracking.set_tags(run_id, report.clocks)

    def record_sweep(self, name: str, frame: pd.DataFrame) -> None:
        """A notebook's exploration sweep: its table and one metric per variant and problem."""
        run_id = self._run()
        folder = self.artifacts / "sweeps"
        folder.mkdir(exist_ok=True)
        write_table(folder, name, frame)
        tracking.log_metrics(run_id, flatten.sweep_metrics(name, frame))

    def folder(self, name: str) -> Path:
        """A sub-folder of the run's artifacts, logged as results/<name> when the run finishes."""
        path = self.artifacts / name
        path.mkdir(exist_ok=True)
        return path

    def record_sanitize(self, report: SanitizeReport) -> None:
        """The verdict as a tag, error counts as metrics, each tool's whole log as an artifact."""
        run_id = self._run()
        folder = self.folder("sanitizer")
        write_table(folder, "verdicts", report.frame())
        for verdict in report.verdicts:
            (folder / f"{verdict.tool}.log.txt").write_text(verdict.log)
        tracking.log_metrics(run_id, flatten.sanitize_metrics(report))
        tracking.set_tags(run_id, {metrics.TAG_SANITIZE: report.status})

    def record_profile(self, report: ProfileReport) -> None:
        """Metrics per problem, the status and top stalls as tags; the .ncu-rep files and the ncu log
        are already in results/profile (the step wrote them into `folder("profile")`)."""
        run_id = self._run()
        folder = self.folder("profile")
        write_table(folder, "profile", report.frame())
        write_table(folder, "ncu_gates", report.gates_frame())
        (folder / "ncu.log.txt").write_text(report.log)
        tracking.log_metrics(run_id, flatten.profile_metrics(report))
        tags = {f"{metrics.TAG_TOP_STALLS}/{p.problem}": ",".join(p.stalls) for p in report.problems}
        tracking.set_tags(run_id, {metrics.TAG_PROFILE: report.status, **tags})

    def _plots(self, results: StageResults) -> None:
        import matplotlib.pyplot as plt

        from .plots import error_plot, latency_plot

        stage = self.ctx.stage.id
        figures = []
        if results.timing and results.timing.stats:
            frame = results.timing.frame()
            for mode in self.ctx.params.timing.modes:
                figures.append(latency_plot(frame, self.artifacts / f"latency_{mode}.png", mode=mode,
                                            title=f"{stage}: p50 latency per problem ({mode})"))
        if results.checks and results.checks.results:
            figures.append(error_plot(results.checks.frame(), self.artifacts / "error_budget.png",
                                      title=f"{stage}: error / budget"))
        for figure in figures:  # saved already; a tune records dozens of runs in one process
            plt.close(figure)

    def finish(self, outcome: Outcome, results: StageResults) -> None:
        run_id = self._run()
        try:
            self._plots(results)
        except Exception as exc:  # a plot must never cost the record
            (self.artifacts / "plot_error.txt").write_text(repr(exc))
        tracking.set_tags(run_id, {metrics.TAG_OUTCOME: outcome.outcome, metrics.TAG_OUTCOME_REASON: outcome.reason})
        write_summary(run_id)
        log_sources(run_id, self.ctx, self.artifacts)
        for path in sorted(self.artifacts.iterdir()):
            subfolder = "results" if path.suffix in {".csv", ".md", ".json"} or path.is_dir() else None
            if path.is_dir():
                tracking.log_artifacts(run_id, path, f"results/{path.name}")
            else:
                tracking.log_artifact(run_id, path, subfolder)
        tracking.end_run(run_id, "FAILED" if outcome.outcome == "build_failed" else "FINISHED")
