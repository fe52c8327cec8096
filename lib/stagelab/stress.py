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
  copy landed) reads NaN at once, not only when a copy from L2 outruns the wgmma;
- a concurrent load on side streams (ConcurrentLoad): spinning blocks beside the stage's on some
  SMs, and copies competing for L2 and DRAM with its loads.
Stages whose sources do not include the knob (no Hopper wrappers) get the load and the repetition.

Any failed check or chain in any round makes the stage `incorrect` with reason `ordering`; a
launch that hangs under stress is a hang (stagelab.watchdog). The parameter file opts in with
`steps: [stress]` and may set `stress: {rounds, delay_ns, sides, load}` (STRESS_DEFAULTS; sides
from producer, consumer and poison).
"""

from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from . import metrics
from .errors import ConfigError

# STRESS_SIDE's values in kernels/sdpa/sdpa_stress.cuh (0: no side, the knob off); POISON, the
# other kind of perturbation a parameter file lists among the sides, switches STRESS_POISON on.
SIDES = {"producer": 1, "consumer": 2}
POISON = "poison"
SIDE_CHOICES = (*SIDES, POISON)
NO_SIDE = "none"
DELAY_KNOB, SIDE_KNOB, POISON_KNOB = "STRESS_DELAY_NS", "STRESS_SIDE", "STRESS_POISON"
# Rounds per perturbation: a race that corrupts one launch in a few shows within ten; the delay:
# about one key tile's consumer work on an H100 (~1-2 us), so a delayed hand-off can move past
# the other side's whole next step.
STRESS_DEFAULTS = {"rounds": 10, "delay_ns": 2000, "sides": list(SIDE_CHOICES), "load": True}
PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"


@dataclass(frozen=True)
class StressSpec:
    rounds: int = STRESS_DEFAULTS["rounds"]
    delay_ns: int = STRESS_DEFAULTS["delay_ns"]
    sides: tuple[str, ...] = tuple(STRESS_DEFAULTS["sides"])
    load: bool = STRESS_DEFAULTS["load"]


def parse_stress(where: str, raw: Any) -> StressSpec:
    """The parameter file's `stress:` mapping (absent: the defaults); errors name the key."""
    raw = {} if raw is None else raw
    if not isinstance(raw, dict) or set(raw) - set(STRESS_DEFAULTS):
        raise ConfigError(f"{where}: expected a mapping with keys from {sorted(STRESS_DEFAULTS)}, got {raw!r}")
    spec = {**STRESS_DEFAULTS, **raw}
    for key in ("rounds", "delay_ns"):
        if isinstance(spec[key], bool) or not isinstance(spec[key], int) or spec[key] <= 0:
            raise ConfigError(f"{where}.{key}: expected a positive integer, got {spec[key]!r}")
    sides = spec["sides"]
    if not isinstance(sides, list) or not sides or any(s not in SIDE_CHOICES for s in sides):
        raise ConfigError(f"{where}.sides: expected a non-empty list drawn from {list(SIDE_CHOICES)}, got {sides!r}")
    if not isinstance(spec["load"], bool):
        raise ConfigError(f"{where}.load: expected true or false, got {spec['load']!r}")
    return StressSpec(spec["rounds"], spec["delay_ns"], tuple(sides), spec["load"])


@dataclass(frozen=True)
class Perturbation:
    side: str        # "producer", "consumer" (delayed), POISON, or NO_SIDE (the stage as built)
    delay_ns: int
    load: bool

    @property
    def label(self) -> str:
        knob = f"{self.side}_{self.delay_ns}ns" if self.side in SIDES else self.side
        return knob + ("_load" if self.load else "")

    def defines(self) -> dict[str, int]:
        if self.side in SIDES:
            return {DELAY_KNOB: self.delay_ns, SIDE_KNOB: SIDES[self.side]}
        return {POISON_KNOB: 1} if self.side == POISON else {}


def perturbations(spec: StressSpec) -> list[Perturbation]:
    """Each side delayed alone, then beside the load; the undelayed stage beside the load."""
    loads = (False, True) if spec.load else (False,)
    plans = [Perturbation(side, spec.delay_ns, load) for side in spec.sides for load in loads]
    return plans + ([Perturbation(NO_SIDE, 0, True)] if spec.load else [])


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


_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)


def includes_knob(source: Path, folder: Path, knob: str = DELAY_KNOB) -> bool:
    """Whether `source` or a header it includes (quoted includes in `folder`, recursively) reads `knob`."""
    seen, pending = set(), [source]
    while pending:
        path = pending.pop()
        if path in seen or not path.is_file():
            continue
        seen.add(path)
        text = path.read_text()
        if knob in text:
            return True
        pending += [folder / name for name in _INCLUDE.findall(text)]
    return False


def stress_step(ctx) -> StressReport:
    """The stress rounds of one stage (ctx: steps.StageContext); see the module's doc."""
    from .stress_rounds import run_rounds

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
