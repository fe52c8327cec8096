"""A parameter file's `timing:` mapping (core.params reads the file): how the timing step samples
each contender (measure.timing, measure.sampling)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import ConfigError
from .family import Family
from .yaml_file import check_keys, choice_list, positive_int

# How a stage may be timed (measure.timing): launches apart with the L2 flushed, back to back,
# or as many as the GPU takes in one graph.
TIMING_MODES = ("cold", "hot", "throughput")

# Fewer samples than this leave the p99 resting on a single launch.
MIN_REPETITIONS = 100
# A contender capped by a file's `seconds_per_contender` still takes this many samples a mode: its p50
# and p90 rest on several launches (its p99 is not given: measure.timing.summarize).
MIN_CAPPED_REPETITIONS = 20
_TIMING_KEYS = {"dtype", "warmup", "repetitions", "modes", "contenders", "backends", "visits",
                "seconds_per_contender"}


@dataclass(frozen=True)
class TimingSpec:
    dtype: str
    warmup: int
    repetitions: int
    modes: tuple[str, ...]
    contenders: tuple[str, ...]
    # Visits per contender per mode, each a run of repetitions / visits samples in a row, the
    # visits in round-robin order; None: one sample a visit (measure.sampling).
    visits: int | None = None
    # The GPU seconds one contender's samples may take in one mode: one slower than that takes fewer
    # than `repetitions` (at least MIN_CAPPED_REPETITIONS); None: every contender takes them all.
    # acceptance.yaml's 1x683x2945x64 spent 57 of a notebook's 83 s of timing, most of it in torch's
    # math contender, which materializes the 683 x 2945 x 2945 scores (H200, 2026-11-30).
    seconds_per_contender: float | None = None

    @property
    def primary_mode(self) -> str:
        """The mode the outcome and the unsuffixed metrics come from: the file's first."""
        return self.modes[0]


def parse_timing(where: str, raw: Any, family: Family) -> TimingSpec:
    raw = check_keys(where, raw, _TIMING_KEYS)
    if "contenders" in raw and "backends" in raw:
        raise ConfigError(f"{where}: give `contenders` (or its older name `backends`), not both")
    dtypes = tuple(family.dtypes)
    dtype = raw.get("dtype", dtypes[0])
    if dtype not in dtypes:
        raise ConfigError(f"{where}.dtype: {dtype!r} is not supported; supported: {list(dtypes)}")
    warmup = raw.get("warmup", 10)
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ConfigError(f"{where}.warmup: expected an integer >= 0, got {warmup!r}")
    repetitions = positive_int(f"{where}.repetitions", raw.get("repetitions", MIN_REPETITIONS))
    if repetitions < MIN_REPETITIONS:
        raise ConfigError(f"{where}.repetitions: {repetitions} is too few for a p99; use at least {MIN_REPETITIONS}")
    contenders = raw.get("contenders", raw.get("backends", list(family.contenders)))
    visits = raw.get("visits")
    if visits is not None:
        visits = positive_int(f"{where}.visits", visits)
        if visits % 2 or visits > repetitions:
            raise ConfigError(f"{where}.visits: {visits} must be even (each round's order is reversed in the next) "
                              f"and at most the repetitions ({repetitions})")
    return TimingSpec(
        dtype=dtype, warmup=warmup, repetitions=repetitions,
        modes=choice_list(f"{where}.modes", raw.get("modes", ["cold"]), TIMING_MODES),
        contenders=() if contenders == [] else choice_list(f"{where}.contenders", contenders, family.contenders),
        visits=visits, seconds_per_contender=_seconds_per_contender(where, raw.get("seconds_per_contender")),
    )


def _seconds_per_contender(where: str, value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ConfigError(f"{where}.seconds_per_contender: expected a number of seconds above 0, got {value!r}")
    return float(value)
