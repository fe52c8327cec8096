"""`stagelab try`: one change to a stage measured against the stage's default, in one process.

A trial is a named variant, a set of define overrides, or a patch (a code change that is not a
knob: applied to a temporary copy of the family's kernel sources and built from there), with or
without defines. `run_trials` builds every trial and the stage's default side by side (spawned
processes, the build cache), reads their resources and SASS, checks each trial with the lab's
checks (the same as a stage run's: the family's budget on every problem, dtype and seed, and the
dependent-launch chains), times the trials, the default and the family's library contenders on
the same inputs in the parameter file's mode (throughput in params/try.yaml) with the clocks
nvidia-smi saw, and judges each trial (`judge_trial`). The default is checked too: a speed
verdict against an incorrect default would mean nothing. Recording is trial_record's job.

Without a GPU the trials are built and resource-checked, and their verdict says `no_gpu`.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..core import metrics
from ..core.build import build_all, build_stage
from ..core.distributions import stage_distributions
from ..core.errors import BuildError, ConfigError
from ..measure.results import Built
from ..judge.trial import TrialEvidence, judge_trial
from ..core.trial_spec import TrialSpec, prepare

from .trial_session import Measured, Narrowing, Trial, TrialSession

if TYPE_CHECKING:
    from ..core.context import StageContext


def load_session(stage_id: str, specs: list[TrialSpec], params: str | Path | None = None,
                 narrowing: Narrowing | None = None) -> TrialSession:
    """The stage's context and every trial resolved (patches applied): every spec error is raised
    here, before anything is built."""
    from ..core.family import load_family
    from ..core.registry import find_stage
    from ..core.context import StageContext

    if not specs:
        raise ConfigError("stagelab try: name at least one trial (--variant, --define or --patch)")
    registry, _ = find_stage(stage_id)
    ctx = StageContext.load(stage_id, params or load_family(registry.family).try_params)
    if narrowing is not None:
        ctx = replace(ctx, params=narrowing.apply(ctx.params))
    names = [s.name for s in specs]
    if len(set(names)) != len(names) or metrics.TRIAL_DEFAULT_LABEL in names:
        raise ConfigError(f"trial names must be distinct and not {metrics.TRIAL_DEFAULT_LABEL!r}: {names}")
    session = TrialSession(ctx, Measured(), [], narrowing=narrowing)
    try:
        for spec in specs:
            stage, trial_registry, diff, workdir = prepare(spec, ctx.registry, ctx.stage)
            session.trials.append(Trial(spec, stage, trial_registry, diff))
            session.workdirs += [workdir] if workdir else []
    except ConfigError:
        session.cleanup()
        raise
    return session


def build_session(session: TrialSession, jobs: int) -> None:
    """The default and every trial compiled side by side, then loaded and resource-checked; a build
    that fails is kept as that trial's error and the others go on."""
    from ..measure.steps import resource_report

    entries = [(session.default, session.ctx.stage, session.ctx.registry)]
    entries += [(t.measured, t.stage, t.registry) for t in session.trials]
    for index, outcome in build_all([(stage, registry) for _, stage, registry in entries], jobs):
        if isinstance(outcome, BuildError):
            entries[index][0].build_error = outcome
    for measured, stage, registry in entries:
        if measured.build_error is not None:
            continue
        try:
            measured.build = build_stage(stage, registry)  # cached now: loads the module
            measured.resources = resource_report(stage, measured.build, session.ctx.family.watched_opcodes)
        except BuildError as exc:
            measured.build_error = exc
    if session.default.build_error is not None:
        raise BuildError(f"the default build of {session.ctx.stage.id} failed: nothing to measure a trial "
                         "against", session.default.build_error.log)


def check_trials(session: TrialSession, progress=print) -> None:
    """The lab's checks on the default, then on every trial that built within its gates: a trial is
    timed against the default, so the default must be correct too (a stage not yet run, or a
    trial that turns the new code off, would otherwise be compared with an unchecked kernel). Where
    their checks are the same (measure.steps.shares_checks), all are judged in one pass on shared
    inputs and references, else one after another. A launch that hangs or loses the CUDA context
    ends the checking, in one pass before any report is kept: what follows in this process could
    not be trusted."""
    from ..measure.steps import shares_checks

    entries = {metrics.TRIAL_DEFAULT_LABEL: (session.ctx, session.default)}
    entries.update({t.spec.name: (replace(session.ctx, stage=t.stage, registry=t.registry), t.measured)
                    for t in session.trials if t.kernel_ready})
    if len(entries) > 1 and shares_checks([ctx for ctx, _ in entries.values()]):
        _check_together(entries, progress)
        return
    for name, (ctx, measured) in entries.items():
        _check(ctx, measured, name, progress)


def _check_together(entries: dict[str, tuple[StageContext, Measured]], progress) -> None:
    from ..measure.family_checks import CheckAborted
    from ..measure.steps import shared_check_step

    try:
        reports = shared_check_step({name: (ctx, Built(m.build)) for name, (ctx, m) in entries.items()})
    except CheckAborted as aborted:
        measured = entries[aborted.label][1]
        measured.crash = f"{type(aborted.cause).__name__}: {aborted.cause}"
        progress(f"[check] {aborted.label}: crashed: {measured.crash}")
        raise aborted.cause from aborted
    for name, report in reports.items():
        entries[name][1].checks = report
        progress(f"[check] {name}: {report.counts()} {'ok' if report.passed is not False else 'FAILED'}")


def _check(ctx, measured: Measured, name: str, progress) -> None:
    from ..measure.steps import check_step

    try:
        measured.checks = check_step(ctx, Built(measured.build))
    except Exception as exc:  # a crashing kernel is that build's verdict, with its message
        measured.crash = f"{type(exc).__name__}: {exc}"
        progress(f"[check] {name}: crashed: {measured.crash}")
        raise_if_context_lost(exc)
        return
    report = measured.checks
    progress(f"[check] {name}: {report.counts()} {'ok' if report.passed is not False else 'FAILED'}")


def raise_if_context_lost(exc: Exception) -> None:
    message = str(exc).lower()
    if "illegal" in message or "unspecified launch failure" in message:
        raise exc


def time_trials(session: TrialSession) -> None:
    """Every correct trial, the default and the library contenders on the same inputs per problem;
    each trial then gets the table's rows of itself, the default and the libraries."""
    from ..measure.steps import time_builds

    timed = [t for t in session.trials if t.kernel_ready and t.measured.checks and t.measured.checks.passed]
    if not timed:
        return
    builds = {metrics.TRIAL_DEFAULT_LABEL: session.default.build, **{t.label: t.measured.build for t in timed}}
    report = time_builds(session.ctx, builds, desc=f"{session.ctx.stage.id} trials")
    session.default.timing = report
    others = {t.label for t in timed}
    for trial in timed:
        stats = [s for s in report.stats if s.contender == trial.label or s.contender not in others]
        trial.measured.timing = replace(report, stats=stats, stage_label=trial.label)


def judge_session(session: TrialSession, min_gain: float | None = None) -> None:
    gain = session.ctx.stage.min_gain if min_gain is None else min_gain
    default = session.default
    default_correct = False if default.crash else (default.checks.passed if default.checks else None)
    unchecked = unchecked_distributions(session.ctx)
    for trial in session.trials:
        m = trial.measured
        timing = m.timing
        trial.verdict = judge_trial(TrialEvidence(
            built=m.build is not None, gates_passed=m.resources.passed if m.resources else None,
            gpu_available=session.ctx.gpu_available, checks_passed=m.checks.passed if m.checks else None,
            crash=m.crash, timing_error=m.timing_error, build_error=str(m.build_error).splitlines()[0] if m.build_error else "",
            speedup_vs_default=timing.speedup_geomean(metrics.TRIAL_DEFAULT_LABEL) if timing else None,
            min_gain=gain, timing_asked=not (session.narrowing and session.narrowing.check_only),
            default_correct=default_correct, unchecked_distributions=unchecked))


def unchecked_distributions(ctx: StageContext) -> tuple[str, ...]:
    """The family's input distributions for this stage's inputs that the parameter file does not check."""
    checked = stage_distributions(ctx.family, ctx.params.distributions, ctx.stage.input_kind)
    return tuple(name for name in ctx.family.distributions_for(ctx.stage.input_kind) if name not in checked)


def run_trials(stage_id: str, specs: list[TrialSpec], *, params: str | Path | None = None, jobs: int = 1,
               hypothesis: str = "", min_gain: float | None = None, track: bool = True,
               from_run: str | None = None, narrowing: Narrowing | None = None, progress=print) -> TrialSession:
    """Build, check, time, judge and (track=True) record each trial: one MLflow run per trial in the
    stage's experiment. A crash that loses the CUDA context ends the GPU steps; every trial is still
    judged and recorded with what it measured."""
    session = load_session(stage_id, specs, params, narrowing)
    try:
        build_session(session, jobs)
        compare_main_loops(session, progress)
        if session.ctx.gpu_available:
            _gpu_steps(session, progress)
        else:
            progress("no CUDA device: the trials were built and resource-checked; checks and timing were "
                     "skipped (verdict no_gpu)")
        judge_session(session, min_gain)
        if track:
            from ..record.trial_record import record_session

            record_session(session, hypothesis, from_run)
    finally:
        session.cleanup()
    return session


def compare_main_loops(session: TrialSession, progress) -> None:
    """Each built trial's main loops against the default's (stagelab.core.sass_loops), kept on the
    trial for its run and said before any launch: a trial whose loops ptxas rescheduled is slower
    for that alone, whatever its idea."""
    from ..measure.trial_compare import main_loop_metrics, main_loop_summary, main_loops_vs_default

    for trial in session.trials:
        m = trial.measured
        if m.build is not None and session.default.build is not None:
            m.main_loops = main_loops_vs_default(m.build, session.default.build)
            words = main_loop_summary(main_loop_metrics(m.main_loops))
            if words:
                progress(f"[sass] {trial.spec.name}: {words}")


def _gpu_steps(session: TrialSession, progress) -> None:
    try:
        check_trials(session, progress)
        if not (session.narrowing and session.narrowing.check_only):
            time_trials(session)
    except Exception as exc:  # the context is gone: the trials not yet measured say why
        for trial in session.trials:
            m = trial.measured
            if m.timing is None and not m.crash:
                m.timing_error = f"not measured: a launch lost the CUDA context ({type(exc).__name__}: {exc})"

