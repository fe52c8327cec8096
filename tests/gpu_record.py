"""What a GPU adds to a stage's record, written through the real recorder on a machine without one.

The browser tests need runs that look like a GPU machine's: a mission p50, latency and error
plots, an outcome decided from timing. Without a GPU a notebook records `no_gpu` and none of
that, so after the real batch has run a stage (notebook, ptxas log, sources, diff) this
hands the recorder the checks and timings a GPU would have measured, with stand-in numbers, and
lets the judge decide: the keys, tables, plots and outcome are the recorder's own.
"""

from __future__ import annotations

from stagelab.core import metrics
from stagelab.measure.checks import CheckResult
from stagelab.record import tracking
from stagelab.core.distributions import stage_distributions
from stagelab.judge.judge import judge
from stagelab.record.recorder import MlflowRecorder
from stagelab.measure.results import PARENT_PREFIX, CheckReport, StageResults, TimingReport
from stagelab.measure.steps import StageContext
from stagelab.measure.timing import summarize

SAMPLES = 100           # a timing run's repetitions (the smoke file's count)
STAND_IN_GPU = "NVIDIA H100 80GB HBM3"  # the gpu tag a GPU machine's run carries (without one: `none`)
ERROR_OVER_BUDGET = 0.25  # a comfortable pass of the FA3 budget (passing is < 1)


def _checks(ctx: StageContext) -> CheckReport:
    p = ctx.params
    distributions = stage_distributions(ctx.family, p.distributions, ctx.stage.input_kind)
    return CheckReport([CheckResult(shape=s.tag, causal=bool(getattr(s, "causal", False)), dtype=d, seed=seed,
                                    max_abs_err=1e-3, lowprec_err=2e-3, atol=1e-3, budget=4e-3,
                                    err_budget_ratio=ERROR_OVER_BUDGET, nonfinite=0, run_to_run_max_diff=0.0,
                                    passed=True, reason="", distribution=distribution)
                        for s in p.shapes for d in p.dtypes for seed in p.seeds for distribution in distributions])


def _timing(ctx: StageContext, stage_us: float, parent_us: float | None) -> TimingReport:
    mode = ctx.params.timing.primary_mode
    stats = []
    for shape in ctx.params.timed_shapes():
        stats.append(summarize([stage_us] * SAMPLES, contender=ctx.stage.id, shape=shape, mode=mode))
        if parent_us is not None and ctx.parent is not None:
            stats.append(summarize([parent_us] * SAMPLES, contender=PARENT_PREFIX + ctx.parent.id,
                                   shape=shape, mode=mode))
    return TimingReport(stats, ctx.stage.id, ctx.family.library_prefix, mode)


def record_gpu_results(run_id: str, stage: str, params: str, stage_us: float, parent_us: float | None = None) -> str:
    """Add checks and timings to the batch's run `run_id`, judge them, finish the run; returns the outcome."""
    ctx = StageContext.load(stage, params)
    ctx.gpu_available = True
    results = StageResults(built=object(), checks=_checks(ctx), timing=_timing(ctx, stage_us, parent_us))
    recorder = MlflowRecorder(ctx, run_id=run_id)
    recorder.record_checks(results.checks)
    recorder.record_timing(results.timing)
    tracking.set_tags(run_id, {metrics.TAG_GPU: STAND_IN_GPU})  # the recorder wrote `none`: no GPU here
    outcome = judge(results, gpu_available=True, has_parent=ctx.parent is not None, min_gain=ctx.stage.min_gain)
    recorder.finish(outcome, results)
    return outcome.outcome
