"""`stagelab tune STAGE`: measure every configuration of a stage's search space (stages.yaml
`search_space`) with the stage's own steps, and keep the best few.

1. build: every configuration compiles in parallel processes into the build cache; one
   that a static_assert (or anything else) rejects is `build_failed`, the others go on;
2. gate: the ptxas report and SASS of each is judged on the registry's gates (`resource_fail`);
   without a GPU every survivor is recorded `no_gpu` here and the tune stops;
3. check: each survivor against the float64 reference (`incorrect` ones drop out);
4. time: the correct ones side by side in this process, on the same inputs per problem,
   beside the library contenders; a configuration's score is its geometric-mean p50.

Each configuration is a nested MLflow run under one tune run (see tune.store), which keeps
the ELITE_COUNT best correct configurations. A configuration already recorded under the
same tune run (same source hash, parameter file and GPU) is not built or measured again.
"""

from __future__ import annotations

from dataclasses import replace

from ..core import metrics as m
from ..core.build import build_all, build_stage
from ..core.sources import run_source_hash
from ..core.context import StageContext
from ..core.errors import BuildError, ConfigError, StagelabError
from ..core.registry import Registry
from ..judge.judge import judge
from ..measure.results import Built, CheckReport, TimingReport
from ..measure.steps import check_step, progress_bar, resource_step, time_builds
from ..record import tracking
from ..record.recorder import MlflowRecorder
from .store import TuneStore
from .trials import ELITE_COUNT, Trial, TuneResult, select_elites


class TuneInterrupted(StagelabError):
    """The CUDA context was lost mid-tune; what was recorded stays, a rerun resumes."""


def _note_build(trial: Trial, failure: BuildError) -> None:
    """What a trial keeps of a build error: its first line (the reason) and the compiler log."""
    trial.results.build_error, trial.build_log = failure.reason.splitlines()[0], failure.log


def compile_all(trials: list[Trial], registry: Registry, jobs: int) -> None:
    """Build every configuration (with its SASS listing, so the gates only read it), `jobs` at a time."""
    bar = progress_bar(desc="tune: build", total=len(trials))
    for index, outcome in build_all([(t.ctx.stage, registry) for t in trials], jobs):
        if isinstance(outcome, BuildError):
            _note_build(trials[index], outcome)
        bar.update(1)
    bar.close()


def gate(trial: Trial) -> None:
    """Load the cached build and judge its resources on the gates."""
    try:
        trial.results.built = Built(build_stage(trial.ctx.stage, trial.ctx.registry))
    except BuildError as exc:
        _note_build(trial, exc)
        return
    trial.results.resources = resource_step(trial.ctx, trial.results.built)


def check(trial: Trial) -> None:
    """Correctness of one configuration; an exception out of the checks (check_all lets only a lost
    CUDA context through) stops the tune, the configuration counted incorrect."""
    try:
        trial.results.checks = check_step(trial.ctx, trial.results.built)
    except Exception as exc:  # nothing after a lost CUDA context can be trusted in this process
        trial.results.checks = CheckReport([])
        raise TuneInterrupted(f"{trial.ctx.stage.id} [{trial.label}] stopped the tune in its checks "
                              f"({type(exc).__name__}: {exc}); it is recorded incorrect; run the tune again "
                              "to go on with the configurations not yet recorded") from exc


def own_timing(joint: TimingReport, label: str) -> TimingReport:
    """One configuration's part of the side-by-side timing: its rows (as the stage's) and the libraries'."""
    mine = [replace(s, contender=joint.stage_label) for s in joint.stats if s.contender == label]
    libraries = [s for s in joint.stats if s.contender.startswith(joint.library_prefix)]
    return replace(joint, stats=mine + libraries)


def time_side_by_side(base: StageContext, trials: list[Trial]) -> None:
    """Every correct configuration timed in one go (same process, same inputs), then scored."""
    joint = time_builds(base, {t.label: t.results.built.stage for t in trials}, desc="tune: timing")
    for trial in trials:
        trial.results.timing = own_timing(joint, trial.label)
        trial.score_us = trial.results.timing.stage_p50_geomean()


def record(trial: Trial, store: TuneStore, parent_run_id: str) -> None:
    """Judge a configuration on what it measured and record it as a nested run of the tune."""
    ctx = trial.ctx
    trial.outcome = judge(trial.results, gpu_available=ctx.gpu_available, has_parent=False,
                          min_gain=ctx.stage.min_gain)
    trial.run_id = store.config_run(parent_run_id, trial.label)
    recorder = MlflowRecorder(ctx, store.experiment, trial.run_id)
    results = trial.results
    recorder.record_build(results.built, trial.build_log)
    if results.resources is not None:
        recorder.record_resources(results.resources)
    if results.checks is not None:
        recorder.record_checks(results.checks)
    if results.timing is not None:
        recorder.record_timing(results.timing)
        tracking.log_metrics(trial.run_id, {m.TUNE_SCORE_US.key(): trial.score_us})
    recorder.finish(trial.outcome, results)


def measure(trials: list[Trial], base: StageContext, store: TuneStore, parent_run_id: str, jobs: int) -> None:
    """Build, gate, check and time the configurations, recording each as soon as its outcome is known."""
    compile_all(trials, base.registry, jobs)
    for trial in progress_bar(trials, desc="tune: gates"):
        if trial.results.build_error is None:
            gate(trial)
    survivors = []
    for trial in trials:
        rejected = trial.results.build_error is not None or not trial.results.resources.passed
        if rejected or not base.gpu_available:
            record(trial, store, parent_run_id)  # build_failed, resource_fail, or no_gpu
        else:
            survivors.append(trial)
    correct = []
    for trial in progress_bar(survivors, desc="tune: checks"):
        try:
            check(trial)
        except TuneInterrupted:
            record(trial, store, parent_run_id)
            raise
        if trial.results.checks.passed:
            correct.append(trial)
        else:
            record(trial, store, parent_run_id)  # incorrect
    if correct:
        time_side_by_side(base, correct)
    for trial in correct:
        record(trial, store, parent_run_id)


def tune(stage_id: str, params: str = "params/acceptance.yaml", *, jobs: int = 1, experiment: str | None = None,
         elite_count: int | None = None) -> TuneResult:
    """Tune a stage over its search space; see the module's docstring."""
    from .report import finish_parent

    base = StageContext.load(stage_id, params)
    space = base.stage.search_space
    if not space:
        raise ConfigError(f"stage {stage_id} declares no search_space in {base.registry.directory / 'stages.yaml'}")
    store = TuneStore(base, experiment)
    parent_run_id = store.open_parent(run_source_hash(base.stage, base.registry, base.family))
    prior = store.prior_trials(parent_run_id)
    trials = [Trial(defines, replace(base, stage=base.stage.with_defines(defines)))
              for defines in space.configurations()]
    for trial in trials:
        if trial.label in prior:
            trial.adopt(prior[trial.label])
    result = TuneResult(stage_id, parent_run_id, trials, [], base.gpu_available)
    try:
        measure([t for t in trials if not t.reused], base, store, parent_run_id, jobs)
    finally:
        result.elites = select_elites(trials, elite_count or ELITE_COUNT)
        finish_parent(store, result)
    return result
