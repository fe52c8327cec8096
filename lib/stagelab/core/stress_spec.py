"""The stress step's parameters and perturbations: what a parameter file's `stress:` asks for and
which builds (STRESS_DELAY_NS / STRESS_SIDE / STRESS_POISON, kernels/sdpa/sdpa_stress.cuh) each
perturbation needs. The step itself is measure.stress. Imports nothing of the lab but errors and core.knobs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import ConfigError

# STRESS_SIDE's values in kernels/sdpa/sdpa_stress.cuh (0: no side, the knob off). The other kind
# of perturbation a parameter file lists among the sides is a poison, STRESS_POISON's value: 1
# poisons each TMA destination as the copy is issued; 2 also poisons each slot as soon as it is
# freed (the release that no later load exploits: the last P.V's V slot).
SIDES = {"producer": 1, "consumer": 2}
POISON, POISON_FREED = "poison", "poison_freed"
POISONS = {POISON: 1, POISON_FREED: 2}
SIDE_CHOICES = (*SIDES, *POISONS)
NO_SIDE = "none"
DELAY_KNOB, SIDE_KNOB, POISON_KNOB = "STRESS_DELAY_NS", "STRESS_SIDE", "STRESS_POISON"
# Rounds per perturbation: a race that corrupts one launch in a few shows within ten; the delay:
# about one key tile's consumer work on an H100 (~1-2 us), so a delayed hand-off can move past
# the other side's whole next step.
STRESS_DEFAULTS = {"rounds": 10, "delay_ns": 2000, "sides": list(SIDE_CHOICES), "load": True}


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
    side: str        # "producer", "consumer" (delayed), a POISONS name, or NO_SIDE (the stage as built)
    delay_ns: int
    load: bool

    @property
    def label(self) -> str:
        knob = f"{self.side}_{self.delay_ns}ns" if self.side in SIDES else self.side
        return knob + ("_load" if self.load else "")

    def defines(self) -> dict[str, int]:
        if self.side in SIDES:
            return {DELAY_KNOB: self.delay_ns, SIDE_KNOB: SIDES[self.side]}
        return {POISON_KNOB: POISONS[self.side]} if self.side in POISONS else {}


def perturbations(spec: StressSpec) -> list[Perturbation]:
    """Each side delayed alone, then beside the load; the undelayed stage beside the load."""
    loads = (False, True) if spec.load else (False,)
    plans = [Perturbation(side, spec.delay_ns, load) for side in spec.sides for load in loads]
    return plans + ([Perturbation(NO_SIDE, 0, True)] if spec.load else [])




def includes_knob(source: Path, folder: Path, knob: str = DELAY_KNOB) -> bool:
    """Whether `source` or a header it includes (quoted includes, recursively: core.knobs) reads `knob`."""
    from .knobs import included_sources

    return any(knob in path.read_text(errors="replace") for path in included_sources(source, folder))


