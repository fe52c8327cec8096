"""The stress step: the checks and the dependent-launch chains, again and again, under perturbed
timing, for ordering bugs that today's timings hide (a ring slot released while the wgmma reading
it is still in flight passes every single check; issue 28).

Perturbations, each run for `rounds` rounds of the family's checks and chains:
- a build with STRESS_DELAY_NS / STRESS_SIDE (kernels/sdpa/sdpa_tma.cuh): every hand-off of one
  side (the producer's TMA issue, or the consumers' slot release and wgmma wait) first sleeps a
  pseudo-random time, seeded by the clock, of up to STRESS_DELAY_NS nanoseconds; the other side
  runs at full speed, so the windows a missing wait leaves open are crossed at other moments;
- a build with STRESS_POISON (same header): each TMA copy's destination is overwritten with NaN
  as the copy is issued, so a slot released while a wgmma still reads it (or read before its
  copy landed) reads NaN at once, not only when a copy from L2 outruns the wgmma; with
  STRESS_POISON=2 (`poison_freed`) the producer also poisons each slot of a work item as soon as
  it is released, for the early release that no later load exploits (the last P.V's V slot);
- a concurrent load on side streams (ConcurrentLoad): spinning blocks beside the stage's on some
  SMs, and copies competing for L2 and DRAM with its loads.
Stages whose sources do not include the knob (no Hopper wrappers) get the load and the repetition.

Any failed check or chain in any round makes the stage `incorrect` with reason `ordering`; a
launch that hangs under stress is a hang (stagelab.measure.watchdog). The parameter file opts in with
`steps: [stress]` and may set `stress: {rounds, delay_ns, sides, load}` (STRESS_DEFAULTS; sides
from producer, consumer, poison and poison_freed).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

import pandas as pd
import torch

from ..core import metrics
from ..core.build import build_stage
from ..core.stress_spec import NO_SIDE, Perturbation, includes_knob, perturbations
from .chain import check_chains
from .family_checks import check_stage
from .watchdog import synchronize

PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"


@dataclass
class StressRound:
    perturbation: str
    round: int
    checks: int
    checks_failed: int
    chains: int
    chains_failed: int
    seconds: float
    first_failure: str = ""

    @property
    def passed(self) -> bool:
        return not self.checks_failed and not self.chains_failed


@dataclass
class StressReport:
    rounds: list[StressRound] = field(default_factory=list)
    why_not_run: str = ""
    seconds: float = 0.0

    @classmethod
    def not_run(cls, why: str) -> StressReport:
        return cls([], why)

    @property
    def passed(self) -> bool | None:
        """None when the step did not run."""
        return all(r.passed for r in self.rounds) if self.rounds else None

    @property
    def status(self) -> str:
        return {None: SKIPPED, True: PASSED, False: FAILED}[self.passed]

    def failed_by_perturbation(self) -> dict[str, int]:
        failed: dict[str, int] = {}
        for r in self.rounds:
            failed[r.perturbation] = failed.get(r.perturbation, 0) + (not r.passed)
        return failed

    def failures(self) -> str:
        """Per failing perturbation: how many rounds failed, and the first failure's words."""
        totals = {r.perturbation: 0 for r in self.rounds}
        for r in self.rounds:
            totals[r.perturbation] += 1
        first = {}
        for r in self.rounds:
            if not r.passed:
                first.setdefault(r.perturbation, r.first_failure)
        return "; ".join(f"{label}: {count} of {totals[label]} rounds failed ({first[label]})"
                         for label, count in self.failed_by_perturbation().items() if count)

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame([{**asdict(r), "passed": r.passed} for r in self.rounds])

    def metrics(self) -> dict[str, float]:
        if not self.rounds:
            return {}
        by = self.failed_by_perturbation()
        return {metrics.STRESS_ROUNDS.key(): len(self.rounds), metrics.STRESS_FAILED.key(): sum(by.values()),
                metrics.STRESS_SECONDS.key(): self.seconds,
                **{metrics.STRESS_FAILED.key(label): count for label, count in by.items()}}


def stress_step(ctx) -> StressReport:
    """The stress rounds of one stage (ctx: steps.StageContext); see the module's doc."""
    if "stress" not in ctx.params.steps:
        return StressReport.not_run(f"{ctx.params.name} has no `steps: [stress]`")
    if not ctx.gpu_available:
        return StressReport.not_run("no CUDA device")
    started = time.perf_counter()
    plans = perturbations(ctx.params.stress)
    if not includes_knob(ctx.stage.source, ctx.registry.directory):
        plans = [p for p in plans if p.side == NO_SIDE] or [Perturbation(NO_SIDE, 0, False)]
    report = StressReport(run_rounds(ctx, plans))
    report.seconds = round(time.perf_counter() - started, 1)
    return report


# The load: LOAD_SPINNERS one-thread blocks, each on a stream of its own, spin LOAD_SPIN_CYCLES
# (~50 ms at 2 GHz) beside the stage's blocks on the SMs they land on; one more stream copies
# LOAD_COPY_BYTES LOAD_COPIES times (64 MiB is past an H100's 50 MiB L2, so every copy goes to
# DRAM: ~60 us each at 2 TB/s read + write, ~50 ms in all), competing with the stage's TMA loads.
LOAD_SPINNERS = 16
LOAD_SPIN_CYCLES = 100_000_000
LOAD_COPY_BYTES = 64 << 20
LOAD_COPIES = 800


class ConcurrentLoad:
    """Work on side streams while one round runs (`start` before it, `finish` after)."""

    def __init__(self, device: torch.device):
        self.streams = [torch.cuda.Stream(device) for _ in range(LOAD_SPINNERS + 1)]
        self.src = torch.empty(LOAD_COPY_BYTES, dtype=torch.uint8, device=device)
        self.dst = torch.empty_like(self.src)

    def start(self) -> None:
        copier, *spinners = self.streams
        with torch.cuda.stream(copier):
            for _ in range(LOAD_COPIES):
                self.dst.copy_(self.src)
        for stream in spinners:
            with torch.cuda.stream(stream):
                torch.cuda._sleep(LOAD_SPIN_CYCLES)

    def finish(self) -> None:
        for stream in self.streams:
            synchronize("the stress step's concurrent load", stream=stream)


def _first_failure(checks, chains) -> str:
    for result in checks:
        if not result.passed:
            return f"check {result.shape} {result.dtype} seed {result.seed}: {result.reason}"[:300]
    for chain in chains:
        if not chain.passed:
            return chain.describe()[:300]
    return ""


def one_round(ctx, kernel, module, plan: Perturbation, index: int, load: ConcurrentLoad | None) -> StressRound:
    """The family's checks on every problem, dtype and seed, then a chain per problem."""
    p = ctx.params
    started = time.perf_counter()
    if load is not None:
        load.start()
    checks = check_stage(ctx.family, kernel, p.shapes, p.dtypes, p.seeds, ctx.device, distributions=p.distributions)
    chains = check_chains(ctx.family, module, p.shapes, p.dtypes[0], input_kind=ctx.stage.input_kind)
    if load is not None:
        load.finish()
    return StressRound(plan.label, index, len(checks), sum(not c.passed for c in checks), len(chains),
                       sum(not c.passed for c in chains), round(time.perf_counter() - started, 2),
                       _first_failure(checks, chains))


def run_rounds(ctx, plans: list[Perturbation]) -> list[StressRound]:
    """Every perturbation's rounds, its build first (cached like any build)."""
    rounds = []
    load = ConcurrentLoad(ctx.device) if any(plan.load for plan in plans) else None
    for plan in plans:
        module = build_stage(ctx.stage.with_defines(plan.defines()), ctx.registry).module
        kernel = ctx.family.stage_kernel(module, ctx.stage.id, ctx.stage.input_kind)
        for index in range(ctx.params.stress.rounds):
            rounds.append(one_round(ctx, kernel, module, plan, index, load if plan.load else None))
    return rounds
