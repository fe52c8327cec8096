"""Typed results of a stage's steps: what was measured, before anyone judges or records it."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import pandas as pd

from ..core import metrics
from ..core.build import BuildResult
from ..core.formatting import fixed
from ..core.launch_plans import PlanGaps
from .chain import ChainResult
from .checks import CheckResult
from .profile import ProfileReport
from ..core.resources import GateResult, KernelResources
from .sanitize import SanitizeReport
from .timing import TimingStats, geometric_mean

if TYPE_CHECKING:
    from .protocol import ProtocolReport
    from .stress import StressReport

PARENT_PREFIX = "parent:"
# A launch variant of the stage (Family.launch_variants) is timed as the contender `<stage>+<variant>`.
VARIANT_SEPARATOR = "+"
# The first failed check's line in an outcome's reason is cut here (an index list can be long).
FIRST_FAILURE_CHARS = 300


@dataclass
class Built:
    stage: BuildResult
    parent: BuildResult | None = None


@dataclass
class ResourceReport:
    kernels: list[KernelResources]
    gates: list[GateResult]
    instructions: list[dict] = field(default_factory=list)  # per kernel: opcode counts from the SASS

    @property
    def passed(self) -> bool:
        return all(g.passed for g in self.gates)

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame([{"tag": r.tag, **r.as_row()} for r in self.kernels])

    def gates_frame(self) -> pd.DataFrame:
        return pd.DataFrame([g.__dict__ for g in self.gates])


@dataclass
class CheckReport:
    results: list[CheckResult]
    chains: list[ChainResult] = field(default_factory=list)  # dependent launches, one per problem
    # problems the stage does not take (stages.yaml `supports:`), by tag -> why: never launched, so
    # neither passed nor failed
    skipped: dict[str, str] = field(default_factory=dict)
    # the launch plans the stage's build declares (core.launch_plans; () without plans), and the
    # parameter file's coverage rule ('' or launch_plans.EVERY_PLAN) that the judge applies to them
    declared_plans: tuple[str, ...] = ()
    coverage: str = ""

    @property
    def passed(self) -> bool | None:
        """None when nothing was checked (no GPU)."""
        checked = [*self.results, *self.chains]
        return all(c.passed for c in checked) if checked else None

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame([c.as_row() for c in self.results])

    def counts(self) -> str:
        """'checks 44/44, chains 11/11' (passed of run): the checks as checks_total counts them, the
        chains apart, as chains_total does (a trial's one line once gave their sum as its checks)."""
        text = f"checks {sum(r.passed for r in self.results)}/{len(self.results)}"
        if self.chains:
            text += f", chains {sum(c.passed for c in self.chains)}/{len(self.chains)}"
        return text

    def failures(self) -> str:
        """What failed, for the outcome's reason: the failed checks per input distribution (and the
        first of them in full), then the chains; '' when nothing failed."""
        counts: dict[str, list[int]] = {}
        for result in self.results:
            failed_total = counts.setdefault(result.distribution, [0, 0])
            failed_total[0] += not result.passed
            failed_total[1] += 1
        parts = [f"{name}: {failed} of {total} checks" for name, (failed, total) in counts.items() if failed]
        first = next((r for r in self.results if not r.passed), None)
        if first is not None:
            parts.append(f"first: {first.describe()[:FIRST_FAILURE_CHARS]}")
        failed_chains = sum(not c.passed for c in self.chains)
        if failed_chains:
            parts.append(f"dependent-launch chains: {failed_chains} of {len(self.chains)}")
        return "; ".join(parts)

    def worst_by_distribution(self) -> dict[str, float]:
        """The worst error / budget of each input distribution checked, in the order checked."""
        worst: dict[str, float] = {}
        for result in self.results:
            worst[result.distribution] = max(worst.get(result.distribution, 0.0), result.err_budget_ratio)
        return worst

    def summary_lines(self, most_failures: int = 20) -> list[str]:
        """For a person: the worst error / budget per input distribution, then the failed checks
        (the first `most_failures` of them)."""
        worst = self.worst_by_distribution()
        lines = ["worst error / budget per input distribution (< 1 passes): "
                 + (", ".join(f"{name} {fixed(ratio)}" for name, ratio in worst.items()) or "none checked")]
        failed = [r for r in self.results if not r.passed]
        lines += ["  FAIL " + r.describe() for r in failed[:most_failures]]
        if len(failed) > most_failures:
            lines.append(f"  ... and {len(failed) - most_failures} more failed checks (the correctness table has all)")
        return lines + ([self.plans_line()] if self.declared_plans else [])

    def chain_frame(self) -> pd.DataFrame:
        return pd.DataFrame([c.as_row() for c in self.chains])

    def plan_gaps(self) -> PlanGaps:
        """Declared plans no check reached, and plans checks took that the build does not declare."""
        return PlanGaps.of(self.declared_plans, (r.plan for r in self.results))

    def plans_frame(self) -> pd.DataFrame:
        """The launch_plans table: per (problem, dtype, plan) the distributions and checks that took it,
        then each declared plan no check reached (no problem, 0 checks); empty without plans."""
        taken: dict[tuple[str, str, str], list[str]] = {}
        for r in self.results:
            if r.plan:
                taken.setdefault((r.shape, r.dtype, r.plan), []).append(r.distribution)
        rows = [{"shape": shape, "dtype": dtype, "distributions": ", ".join(dict.fromkeys(names)),
                 "checks": len(names), "plan": plan} for (shape, dtype, plan), names in taken.items()]
        rows += [{"shape": "", "dtype": "", "distributions": "", "checks": 0, "plan": plan}
                 for plan in self.plan_gaps().unreached]
        return pd.DataFrame(rows)

    def plans_line(self) -> str:
        """For a person: how many declared plans the checks reached ('' for a stage without plans)."""
        if not self.declared_plans:
            return ""
        gaps = self.plan_gaps()
        line = f"launch plans: the checks reached {gaps.reached} of the {gaps.declared} declared"
        return line + (f" ({gaps.describe()})" if gaps else "")


def variant_label(stage_label: str, variant: str) -> str:
    """The timing label of one of the stage's launch variants."""
    return f"{stage_label}{VARIANT_SEPARATOR}{variant}"


def contender_name(label: str, library_prefix: str) -> str:
    """The name a contender's label carries in speedup keys: `parent`, or the library contender's."""
    if label.startswith(PARENT_PREFIX):
        return metrics.PARENT
    return label.removeprefix(library_prefix)


@dataclass
class TimingReport:
    stats: list[TimingStats]
    stage_label: str
    library_prefix: str            # library contenders are labelled <prefix><name>, e.g. sdpa_flash
    primary_mode: str
    floor_us: dict[str, float] = field(default_factory=dict)   # empty kernel, per mode
    unavailable: dict[str, str] = field(default_factory=dict)  # contender/problem -> why it could not run
    skipped: dict[str, str] = field(default_factory=dict)  # build label/problem -> why the stage does not take it
    clocks: dict[str, str] = field(default_factory=dict)

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame([t.as_row() for t in self.stats])

    def speedups(self) -> pd.DataFrame:
        """Per problem and mode: the stage's p50 and each other contender's p50 over it."""
        frame = self.frame()
        if frame.empty:
            return frame
        wide = frame.pivot_table(index=["shape", "mode"], columns="contender", values="p50_us")
        if self.stage_label not in wide:  # the stage took none of the timed problems
            return pd.DataFrame()
        wide = wide[wide[self.stage_label].notna()]  # problems the stage skipped have nothing to compare
        mine = wide[self.stage_label]
        out = pd.DataFrame({"stage_p50_us": mine})
        variants = {variant_label(self.stage_label, v) for v in self.variants()}
        for label in wide.columns:
            if label != self.stage_label and label not in variants:  # a variant is the stage, not a contender
                out[metrics.speedup(contender_name(label, self.library_prefix)).name] = wide[label] / mine
        library = [c for c in wide.columns if c.startswith(self.library_prefix)]
        if library:
            out[metrics.speedup(metrics.BEST_CONTENDER).name] = wide[library].min(axis=1) / mine
        return out.reset_index()

    def variants(self) -> tuple[str, ...]:
        """The stage's launch variants timed here (variant_label), in the order first timed."""
        prefix = variant_label(self.stage_label, "")
        names = (s.contender.removeprefix(prefix) for s in self.stats if s.contender.startswith(prefix))
        return tuple(dict.fromkeys(names))

    def variant_report(self, variant: str) -> TimingReport:
        """The timing as if the variant were the stage: its rows under the stage's label beside the
        parent and the library contenders (the stage's own rows and the other variants left out)."""
        label = variant_label(self.stage_label, variant)
        others = {self.stage_label, *(variant_label(self.stage_label, v) for v in self.variants())}
        stats = [replace(s, contender=self.stage_label) if s.contender == label else s
                 for s in self.stats if s.contender == label or s.contender not in others]
        return replace(self, stats=stats)

    def stage_p50_geomean(self) -> float:
        """Geometric mean of the stage's p50 over the timed problems, primary mode (nan when never timed)."""
        frame = self.frame()
        if frame.empty:
            return float("nan")
        mine = frame[(frame["contender"] == self.stage_label) & (frame["mode"] == self.primary_mode)]
        return geometric_mean(mine["p50_us"].tolist())

    def speedup_geomean(self, contender: str) -> float | None:
        """Geometric mean over the timed problems, primary mode; None when never timed."""
        table = self.speedups()
        column = metrics.speedup(contender).name
        if table.empty or column not in table:
            return None
        return geometric_mean(table[table["mode"] == self.primary_mode][column].dropna().tolist())


@dataclass
class StageResults:
    """Everything one run measured so far; a step that has not run leaves its field None."""

    built: Built | None = None
    build_error: str | None = None
    resources: ResourceReport | None = None
    checks: CheckReport | None = None
    timing: TimingReport | None = None
    sanitize: SanitizeReport | None = None
    profile: ProfileReport | None = None
    hang: str | None = None               # what hung (stagelab.measure.watchdog): the run ended there
    stress: "StressReport | None" = None  # stagelab.measure.stress
    protocol: "ProtocolReport | None" = None  # stagelab.measure.protocol
