"""What `stagelab try` measures and judges, as data: each build's measurements (Measured), a trial
(Trial), the session of one stage's trials beside its default (TrialSession) and how a call narrows
the parameter file's problems (Narrowing). run.trial does the work."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd

from ..core.build import BuildResult
from ..core.errors import BuildError, ConfigError
from ..core.registry import Registry, Stage
from ..core.trial_spec import TrialSpec
from ..judge.trial import TrialVerdict
from ..measure.results import CheckReport, ResourceReport, TimingReport

TRIAL_LABEL_PREFIX = "trial:"


@dataclass
class Measured:
    """What one build measured: the build (or its error), resources, its main loops against the
    default's (a trial's: measure.trial_compare.main_loops_vs_default), checks and timing."""

    build: BuildResult | None = None
    build_error: BuildError | None = None
    resources: ResourceReport | None = None
    main_loops: pd.DataFrame | None = None
    checks: CheckReport | None = None
    crash: str = ""                      # a check that raised, with its message
    timing: TimingReport | None = None
    timing_error: str = ""               # why a correct trial has no timing


@dataclass
class Trial:
    """One trial: its spec, the stage and registry it builds from, what it measured, its verdict."""

    spec: TrialSpec
    stage: Stage
    registry: Registry
    source_diff: str = ""                # the patch's change to the sources ("" for a knob)
    measured: Measured = field(default_factory=Measured)
    verdict: TrialVerdict | None = None
    run_id: str | None = None

    @property
    def label(self) -> str:
        """The trial's contender label in timing tables."""
        return TRIAL_LABEL_PREFIX + self.spec.name

    @property
    def kernel_ready(self) -> bool:
        m = self.measured
        return m.build is not None and m.build.module is not None and (m.resources is None or m.resources.passed)


@dataclass(frozen=True)
class Narrowing:
    """Less of the parameter file, for a quick look: other contenders, fewer repetitions, some problems."""

    contenders: tuple[str, ...] | None = None
    repetitions: int | None = None
    only: tuple[str, ...] = ()          # problem tags of the timed list
    check_only: bool = False            # check the trials, time nothing

    def apply(self, params):
        from ..core.timing_spec import MIN_REPETITIONS

        timing = params.timing
        if self.contenders is not None:
            unknown = sorted(set(self.contenders) - set(params.family.contenders))
            if unknown:
                raise ConfigError(f"unknown contender(s) {unknown}; the {params.family.name} family has "
                                  f"{list(params.family.contenders)}")
            timing = replace(timing, contenders=tuple(self.contenders))
        if self.repetitions is not None:
            if self.repetitions < MIN_REPETITIONS:
                raise ConfigError(f"--repetitions {self.repetitions}: use at least {MIN_REPETITIONS} (a p99 needs them)")
            timing = replace(timing, repetitions=self.repetitions)
        timed = tuple(params.timed_shapes())
        if self.only:
            unknown = sorted(set(self.only) - {p.tag for p in timed})
            if unknown:
                raise ConfigError(f"--only: not in the timing list of {params.name}: {unknown}; "
                                  f"known: {[p.tag for p in timed]}")
            timed = tuple(p for p in timed if p.tag in self.only)
        return replace(params, timing=timing, timed=timed)


@dataclass
class TrialSession:
    """A call of `stagelab try`: the stage's context, its default build and the trials."""

    ctx: object                          # steps.StageContext of the stage on the trial parameter file
    default: Measured
    trials: list[Trial]
    workdirs: list[Path] = field(default_factory=list)
    narrowing: Narrowing | None = None

    def cleanup(self) -> None:
        for folder in self.workdirs:
            shutil.rmtree(folder, ignore_errors=True)
