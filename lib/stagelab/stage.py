"""One stage, one parameter file, one MLflow run: the flow every stage notebook follows.

    run = StageRun("s0_baseline", "params/acceptance.yaml")
    run.build()        # measure: nvcc + cpp_extension, cached
    run.resources()    # measure: ptxas report per kernel and arch, registry gates
    run.check()        # measure: float64 reference, FA3 budget, poisoned outputs, >= 2 seeds
    run.sanitize()     # measure: compute-sanitizer memcheck, racecheck, synccheck at small odd problems
    run.stress()       # measure: checks and chains again and again under perturbed timing (stagelab.measure.stress)
    run.protocol()     # measure: the ring-protocol-checking build at the check problems (stagelab.measure.protocol)
    run.time()         # measure: stage vs parent vs library contenders, same inputs, same process
    run.profile()      # measure: Nsight Compute on the stage's kernels, mission and one long problem
    run.finish()       # judge, then record: outcome, plots, sources; ends the MLflow run

Each step returns a table for the notebook to show, keeps its typed result in
`run.results`, and hands it to the recorder (MLflow, or nothing with track=False). A launch that
hangs (stagelab.measure.watchdog) ends the run there: the stage is judged `incorrect` (reason `hang`),
recorded, and `on_hang` ends the process, whose CUDA context is lost.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd

from .core.errors import BuildError, KernelHang
from .judge.judge import judge
from .judge.outcome import Outcome
from .core.params import RunParams
from .record.recorder import MlflowRecorder, NullRecorder
from .core.registry import Registry, Stage
from .measure.results import StageResults
from .core.context import StageContext
from .measure.steps import build_step, check_step, resource_step, timing_step
from .measure.watchdog import exit_after_hang
from .measure.watched import WatchedSteps


def _said(frame: pd.DataFrame, status: str, step: str) -> pd.DataFrame:
    """A step's table, after one line saying how it went (a skipped step has no table)."""
    print(f"{step}: {status}")
    return frame


class StageRun(WatchedSteps):
    def __init__(self, stage: str, params: str | Path = "params/acceptance.yaml", *,
                 defines: dict | str | None = None, mlflow_run_id: str | None = None,
                 experiment: str | None = None, track: bool = True, steps: str | list[str] | None = None,
                 on_hang: Callable[[KernelHang], None] = exit_after_hang, family: str | None = None):
        self.ctx = StageContext.load(stage, params, defines, steps, family=family)
        self.on_hang = on_hang
        self.recorder = MlflowRecorder(self.ctx, experiment, mlflow_run_id) if track else NullRecorder()
        self.results = StageResults()
        self.outcome: Outcome | None = None

    # -- what the notebooks read ------------------------------------------------------
    stage: Stage = property(lambda self: self.ctx.stage)
    parent: Stage | None = property(lambda self: self.ctx.parent)
    params: RunParams = property(lambda self: self.ctx.params)
    registry: Registry = property(lambda self: self.ctx.registry)
    gpu_available: bool = property(lambda self: self.ctx.gpu_available)
    family = property(lambda self: self.ctx.family)
    run_id: str | None = property(lambda self: self.recorder.run_id)

    @property
    def explores(self) -> bool:
        """Whether the notebook's own exploration runs: a GPU and a parameter file with `steps: [explore]`
        (its sweeps build and time variants, minutes per stage, so a headline-timing file leaves it out)."""
        return self.gpu_available and "explore" in self.params.steps

    def exploration_skipped(self) -> str:
        if not self.gpu_available:
            return "no CUDA device: exploration skipped"
        return f"{self.params.name} has no `steps: [explore]`: exploration skipped"

    @property
    def kernel(self):
        if self.results.built is None:
            raise RuntimeError("call build() first")
        return self.family.stage_kernel(self.results.built.stage.module, self.stage.id, self.stage.input_kind)

    def variant(self, **defines):
        """The same stage with knobs overridden (cached like any build), for exploration cells."""
        from .core.build import build_stage

        result = build_stage(self.stage.with_defines(defines), self.registry)
        return self.family.stage_kernel(result.module, self.stage.id, self.stage.input_kind)

    def parent_kernel(self):
        from .core.build import build_stage

        if self.parent is None:
            raise RuntimeError(f"{self.stage.id} has no parent")
        return self.family.stage_kernel(build_stage(self.parent, self.registry).module, self.parent.id,
                                        self.parent.input_kind)

    # -- measure ---------------------------------------------------------------------
    def build(self, with_parent: bool = True):
        try:
            self.results.built = build_step(self.ctx, with_parent)
        except BuildError as exc:
            self.results.build_error = str(exc).splitlines()[0]
            self.recorder.record_build(None, exc.log)
            self.finish()
            raise
        self.recorder.record_build(self.results.built)
        return self.results.built.stage

    def resources(self) -> pd.DataFrame:
        if self.results.built is None:
            raise RuntimeError("call build() first")
        self.results.resources = resource_step(self.ctx, self.results.built)
        self.recorder.record_resources(self.results.resources)
        return self.results.resources.frame()

    def gates(self) -> pd.DataFrame:
        return self.results.resources.gates_frame() if self.results.resources else pd.DataFrame()

    def check(self) -> pd.DataFrame:
        if not self.gpu_available:
            print("no CUDA device: correctness checks skipped (outcome will be no_gpu)")
            return pd.DataFrame()
        self.results.checks = self._watched(check_step, self.ctx, self.results.built)
        self.recorder.record_checks(self.results.checks)
        print("\n".join(self.results.checks.summary_lines()))
        for tag, reason in self.results.checks.skipped.items():
            print(f"  SKIP {tag}: {reason}")
        chains = self.results.checks.chains
        print(f"dependent launches: {sum(c.passed for c in chains)}/{len(chains)} chains match the synchronised chain")
        for failed in (c for c in chains if not c.passed):
            print("  FAIL " + failed.describe())
        return self.results.checks.frame()

    def time(self) -> pd.DataFrame:
        if not self.gpu_available:
            print("no CUDA device: timing skipped (outcome will be no_gpu)")
            return pd.DataFrame()
        self.results.timing = self._watched(timing_step, self.ctx, self.results.built)
        self.recorder.record_timing(self.results.timing)
        return self.results.timing.frame()

    def sanitize(self) -> pd.DataFrame:
        """compute-sanitizer's verdict per tool; errors make the stage incorrect."""
        from .measure.sanitize import SanitizeReport, SKIPPED, sanitize_step

        if self.results.built is None:
            raise RuntimeError("call build() first")
        if "sanitize" not in self.params.steps:
            self.results.sanitize = SanitizeReport.not_run(SKIPPED, f"{self.params.name} has no `steps: [sanitize]`")
        else:
            self.results.sanitize = sanitize_step(self.ctx)
        self.recorder.record_sanitize(self.results.sanitize)
        return _said(self.results.sanitize.frame(), self.results.sanitize.status, "sanitize")

    def profile(self, out_dir: Path | None = None) -> pd.DataFrame:
        """Nsight Compute's fixed metric set per profiled problem; the .ncu-rep files go with the record
        (and into `out_dir` when given)."""
        from .measure.profile import SKIPPED, ProfileReport, profile_step

        if self.results.built is None:
            raise RuntimeError("call build() first")
        if "profile" not in self.params.steps:
            report = ProfileReport(SKIPPED, log=f"{self.params.name} has no `steps: [profile]`")
        else:
            resources = self.results.resources or resource_step(self.ctx, self.results.built)  # which tensor pipe
            report = profile_step(self.ctx, self.results.built, resources,
                                  out_dir or self.recorder.folder("profile"))
        self.results.profile = report
        self.recorder.record_profile(report)
        return _said(report.frame(), report.status, "profile")

    def speedups(self) -> pd.DataFrame:
        return self.results.timing.speedups() if self.results.timing else pd.DataFrame()

    def sweep(self, name: str, kernels: dict, shapes: list, **kwargs) -> pd.DataFrame:
        """Time labelled variants on problems (see explore.sweep) and record the sweep with the run."""
        from .explore import sweep

        return self.log_sweep(name, self._watched(sweep, self.family, kernels, shapes, **kwargs))

    def log_sweep(self, name: str, frame: pd.DataFrame) -> pd.DataFrame:
        """Record an exploration sweep (TimingStats rows) with the run, as a table and metrics."""
        self.recorder.record_sweep(name, frame)
        return frame

    # -- judge, then record ------------------------------------------------------------
    def finish(self) -> Outcome:
        """Decide the outcome from what was measured, record it, end the MLflow run."""
        self.outcome = judge(self.results, gpu_available=self.gpu_available,
                             has_parent=self.parent is not None, min_gain=self.stage.min_gain)
        self.recorder.finish(self.outcome, self.results)
        return self.outcome
