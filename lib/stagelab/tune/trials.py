"""The configurations a tune tries, what each measured, and the elites among them.

Below both the search (which fills them in) and its report (which records them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..core import metrics as m
from ..core.context import StageContext
from ..core.space import config_label
from ..judge.outcome import Outcome
from ..measure.results import StageResults
from .store import PriorTrial

# Three elites: the best, and two runners-up that say whether its lead is real (close
# behind: a flat region, any of them will do; far behind: a sharp optimum worth a re-time).
ELITE_COUNT = 3
# A configuration may be elite only with one of these outcomes: checked correct, then timed
# (a tune has no parent to beat, so a correct configuration is judged `pass`).
CORRECT_OUTCOMES = ("pass", "valid_negative")



@dataclass
class Trial:
    """One configuration: its context (the stage with the configuration's defines) and what it measured."""

    defines: dict[str, str]
    ctx: StageContext
    results: StageResults = field(default_factory=StageResults)
    build_log: str = ""
    outcome: Outcome | None = None
    score_us: float | None = None
    run_id: str | None = None
    reused: bool = False

    @property
    def label(self) -> str:
        return config_label(self.defines)

    @property
    def elite_worthy(self) -> bool:
        return (self.outcome is not None and self.outcome.outcome in CORRECT_OUTCOMES
                and self.score_us is not None and math.isfinite(self.score_us))

    def adopt(self, prior: PriorTrial) -> None:
        """Take an earlier tune's record instead of measuring again."""
        self.outcome = Outcome(prior.outcome, prior.reason)
        self.score_us, self.run_id, self.reused = prior.score_us, prior.run_id, True


@dataclass
class TuneResult:
    stage_id: str
    parent_run_id: str
    trials: list[Trial]
    elites: list[Trial]
    gpu_available: bool

    def rows(self) -> list[dict]:
        rank = {id(t): i for i, t in enumerate(self.elites, start=1)}
        return [{"configuration": t.label, "outcome": t.outcome.outcome if t.outcome else "none",
                 m.TUNE_SCORE_US.name: t.score_us, "elite": rank.get(id(t)), "reused": t.reused,
                 "run_id": t.run_id} for t in self.trials]


def select_elites(trials: list[Trial], count: int = ELITE_COUNT) -> list[Trial]:
    """The `count` lowest scores among correct, timed configurations, best first."""
    return sorted((t for t in trials if t.elite_worthy), key=lambda t: t.score_us)[:count]
