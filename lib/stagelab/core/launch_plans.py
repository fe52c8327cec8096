"""Launch plans: the ways one stage's build may launch its kernel, as the stage itself names them.

A stage whose host code picks among configurations per problem (tile sizes, warpgroups, scheduler,
epilogue, split) exports its plans; a check that passes says nothing of a plan no check took (issue
43: a bug planted in s18's three-warpgroup path passed every acceptance check, because no acceptance
problem took three warpgroups). The lab keeps each plan as an opaque string: only the family knows
what a plan means, the lab compares and counts them. A family's hooks (`LaunchPlanHooks`, mixed into
`Family`) default to "no plans": such a stage has one implicit plan and coverage has nothing to say.

A parameter file asking `coverage: every_plan` (EVERY_PLAN) makes a stage run whose checks did not
reach every plan of the stage's own build not `pass` (stagelab.judge: outcome `uncovered`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from .errors import ConfigError

# A parameter file's `coverage:` rules (core.params): every plan the stage declares must be reached
# by its checks.
EVERY_PLAN = "every_plan"
COVERAGE_RULES = (EVERY_PLAN,)
# A reason names at most this many plans of each kind (plans are long; the launch_plans table has all).
PLANS_NAMED = 8
MIB = 2**20


@dataclass(frozen=True)
class DeviceModel:
    """The device a host plan is computed for, without a GPU: its SM count and L2 size."""

    name: str
    sms: int
    l2_bytes: int

    def __post_init__(self) -> None:
        for field_name in ("sms", "l2_bytes"):
            value = getattr(self, field_name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(f"device model {self.name!r}: {field_name} must be a positive integer, got {value!r}")


# The lab's reference GPU (132 SMs, 50 MiB of L2): what `stagelab coverage` plans for by default.
H100_SXM = DeviceModel("H100 SXM", 132, 50 * MIB)


def device_model(sms: int | None = None, l2_mib: int | None = None) -> DeviceModel:
    """H100 SXM, or a device of its own SM count and (or) L2 size where either is given."""
    if sms is None and l2_mib is None:
        return H100_SXM
    sms = H100_SXM.sms if sms is None else sms
    l2_bytes = H100_SXM.l2_bytes if l2_mib is None else l2_mib * MIB
    return DeviceModel(f"{sms} SMs, {l2_bytes // MIB} MiB L2", sms, l2_bytes)


def coverage_rule(where: str, value: object) -> str:
    """A parameter file's `coverage:` value, checked ('' when the file states none)."""
    if value is None:
        return ""
    if value not in COVERAGE_RULES:
        raise ConfigError(f"{where}: {value!r} is not a coverage rule; supported: {list(COVERAGE_RULES)} "
                          "(every launch plan the stage declares must be reached by its checks)")
    return str(value)


class LaunchPlanHooks:
    """A family's launch-plan hooks (mixed into core.family.Family); the defaults mean "no plans"."""

    def declared_launch_plans(self, module: ModuleType) -> tuple[str, ...]:
        """Every launch plan the built stage can take, one string each; () for a stage without plans."""
        return ()

    def launch_plan_of(self, module: ModuleType, problem: Any, dtype: str, device: DeviceModel) -> str:
        """The plan the built stage takes for `problem` (the family's Problem) in `dtype` (a parameter-file
        name) on `device`, computed on the host without a GPU; '' for a stage without plans. Raises
        ValueError when the stage rejects the problem."""
        return ""

    def last_launch_plan(self, module: ModuleType) -> str:
        """The plan of this thread's last launch of the module ('' before any, or without plans)."""
        return ""


def _named(plans: tuple[str, ...]) -> str:
    more = len(plans) - PLANS_NAMED
    return "; ".join(plans[:PLANS_NAMED]) + (f"; and {more} more" if more > 0 else "")


@dataclass(frozen=True)
class PlanGaps:
    """Declared plans nothing took, and plans taken that the stage does not declare (with the counts
    of distinct declared plans and of those some launch took)."""

    unreached: tuple[str, ...] = ()
    undeclared: tuple[str, ...] = ()
    declared: int = 0
    reached: int = 0

    @classmethod
    def of(cls, declared: Iterable[str], taken: Iterable[str]) -> PlanGaps:
        """The gaps between a stage's declared plans and the plans some launch took ('' is no plan)."""
        declared, taken = tuple(dict.fromkeys(declared)), tuple(dict.fromkeys(p for p in taken if p))
        unreached = tuple(p for p in declared if p not in taken)
        return cls(unreached, tuple(p for p in taken if p not in declared), len(declared),
                   len(declared) - len(unreached))

    def __bool__(self) -> bool:
        return bool(self.unreached or self.undeclared)

    def describe(self) -> str:
        """One line naming the gaps (the first PLANS_NAMED of each kind); '' when there are none."""
        parts = []
        if self.unreached:
            parts.append(f"{len(self.unreached)} declared plan(s) not reached: {_named(self.unreached)}")
        if self.undeclared:
            parts.append(f"{len(self.undeclared)} plan(s) taken but not declared: {_named(self.undeclared)}")
        return "; ".join(parts)
