"""Parameter files (params/*.yaml): which problems a stage is checked and timed on.

    description: what this file is for
    family: sdpa                     # the kernel family (default sdpa); its problems' form follows
    dtypes: [float16, bfloat16]      # correctness is checked in each
    seeds: [0, 1]                    # fresh random inputs per seed (>= 2)
    distributions: [normal, large]   # named input distributions every check runs on (default
                                     # [normal]); the family's own, e.g. sdpa's normal, large,
                                     # positive, peaky, zero_head, tiny, outlier
    shapes:                          # the family's problem entries, e.g. for sdpa:
      - {shape: [1, 8, 512, 64], causal: [false, true]}
      - {name: llama3-8b, shape: [1, 32, 512, 128], kv_heads: 8, kv_seq_len: 4096, causal: true,
         layout: bshd}               # sdpa's optional keys (families/sdpa/shapes.py)
    mission: {shape: [2, 8, 512, 64], causal: false}      # headline timing problem, always timed
    timed: [{shape: [4, 16, 4096, 128], causal: false}]  # optional: time these instead of `shapes`
                                     # (a file of tiny ragged check problems, params/try.yaml)
    timing: {dtype: float16, warmup: 10, repetitions: 100, modes: [cold],
             contenders: [flash, efficient, cudnn, math],  # `backends` is the older name
             visits: 4, seconds_per_contender: 2}  # optional: core/timing_spec.py
    timeout_s: 1800                  # per-notebook limit in batch runs
    steps: [sanitize, profile, explore, stress, protocol]  # optional steps this file runs (default none):
                                     # each costs minutes per stage on a GPU, so a file opts in
    stress: {rounds: 10, delay_ns: 2000, sides: [producer, consumer, poison, poison_freed], load: true}  # stress.py
    coverage: every_plan             # optional: a stage's checks must reach every launch plan its build
                                     # declares, or its run is `uncovered`, not `pass` (launch_plans.py)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import ConfigError
from .timing_spec import TimingSpec, parse_timing
from .yaml_file import check_keys, choice_list, positive_int, read_yaml
from .family import DEFAULT_DISTRIBUTION, Family, Problem, load_family
from .launch_plans import coverage_rule
from .problems import Problems
from .stress_spec import StressSpec, parse_stress

DEFAULT_FAMILY = "sdpa"

_TOP_KEYS = {"description", "family", "dtypes", "seeds", "distributions", "shapes", "mission", "timing", "timeout_s",
             "steps", "stress", "timed", "coverage"}
# Steps a parameter file may switch on: compute-sanitizer (sanitize.py), Nsight Compute (profile.py)
# the stage notebook's own exploration cells (notebooks/explore/<stage>.py: variant sweeps), the
# stress rounds under perturbed timing (stress.py; the file's `stress:` mapping tunes them) and the
# ring-protocol-checking build at the check problems (protocol.py).
OPTIONAL_STEPS = ("sanitize", "profile", "explore", "stress", "protocol")


@dataclass(frozen=True)
class RunParams:
    path: Path
    description: str
    family: Family
    dtypes: tuple[str, ...]
    seeds: tuple[int, ...]
    shapes: tuple[Problem, ...]
    mission: Problem
    timing: TimingSpec
    timeout_s: int = 1800
    steps: tuple[str, ...] = ()
    distributions: tuple[str, ...] = (DEFAULT_DISTRIBUTION,)
    stress: StressSpec = StressSpec()
    timed: tuple[Problem, ...] = ()  # timed instead of `shapes` when given
    coverage: str = ""               # launch_plans.EVERY_PLAN, or '' for no coverage rule

    @property
    def name(self) -> str:
        return self.path.stem

    def timed_shapes(self) -> list[Problem]:
        """Every checked problem (or the file's `timed` list), plus the mission problem when it lacks it."""
        shapes = list(self.timed or self.shapes)
        if self.mission not in shapes:
            shapes.append(self.mission)
        return shapes


def with_steps(params: RunParams, steps: str | list[str] | tuple[str, ...]) -> RunParams:
    """The parameter file with its optional steps replaced (`stagelab run --steps`, a notebook's
    `steps` parameter): a list, or one comma-separated string ("" for none)."""
    from dataclasses import replace

    names = [s for s in steps.split(",") if s.strip()] if isinstance(steps, str) else list(steps)
    names = [s.strip() for s in names]
    return replace(params, steps=choice_list("steps", names, OPTIONAL_STEPS) if names else ())


def _problem_list(path: Path, key: str, entries: Any, family: Family) -> tuple[Problem, ...]:
    if not isinstance(entries, list) or not entries:
        raise ConfigError(f"{path}: {key}: expected a non-empty list")
    problems = Problems(str(path))
    shapes: list[Problem] = []
    for index, entry in enumerate(entries):
        for shape in problems.check(family.parse_problem, f"{path}: {key}[{index}]", entry, otherwise=[]):
            if shape not in shapes:
                shapes.append(shape)
    problems.raise_any()  # each entry's problem, not only the first
    return tuple(shapes)


def _mission(path: Path, raw: dict, family: Family) -> Problem:
    mission = family.parse_problem(f"{path}: mission", raw.get("mission", family.default_mission))
    if len(mission) != 1:
        raise ConfigError(f"{path}: mission: give exactly one problem (one causal value)")
    return mission[0]


def _seeds(where: str, seeds: Any) -> tuple[int, ...]:
    whole = isinstance(seeds, list) and all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds)
    if not whole or len(seeds) < 2:
        raise ConfigError(f"{where}: expected a list of two or more integers >= 0, got {seeds!r}")
    return tuple(seeds)


def _family(path: Path, raw: dict) -> Family:
    family_name = raw.get("family", DEFAULT_FAMILY)
    if not isinstance(family_name, str):
        raise ConfigError(f"{path}: family: expected a family name like {DEFAULT_FAMILY!r}")
    try:
        return load_family(family_name)
    except ConfigError as exc:
        raise ConfigError(f"{path}: family: {exc}") from exc


def _family_fields(path: Path, raw: dict, family: Family, problems: Problems) -> dict:
    """The fields whose checks need the family (its dtypes, problems, contenders, distributions)."""
    check = problems.check
    return {
        "dtypes": check(choice_list, f"{path}: dtypes", raw.get("dtypes", list(family.dtypes)), tuple(family.dtypes)),
        "shapes": check(_problem_list, path, "shapes", raw.get("shapes"), family),
        "mission": check(_mission, path, raw, family),
        "timing": check(parse_timing, f"{path}: timing", raw.get("timing") or {}, family),
        "distributions": check(_distributions, f"{path}: distributions",
                               raw.get("distributions", [DEFAULT_DISTRIBUTION]), family),
        "timed": check(_problem_list, path, "timed", raw["timed"], family) if "timed" in raw else (),
    }


def load_params(path: Path | str) -> RunParams:
    """Read and validate a parameter file; errors name the file and the key, and a file with
    several problems is one error listing them all."""
    path = Path(path)
    raw = read_yaml(path, f"parameter file not found: {path}")
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    problems = Problems(str(path))
    problems.check(check_keys, str(path), raw, _TOP_KEYS)
    family = problems.check(_family, path, raw)
    fields = {
        "seeds": problems.check(_seeds, f"{path}: seeds", raw.get("seeds", [0, 1])),
        "timeout_s": problems.check(positive_int, f"{path}: timeout_s", raw.get("timeout_s", 1800)),
        "steps": problems.check(_steps, f"{path}: steps", raw.get("steps", [])),
        "stress": problems.check(parse_stress, f"{path}: stress", raw.get("stress")),
        "coverage": problems.check(coverage_rule, f"{path}: coverage", raw.get("coverage")),
    }
    if family is not None:
        fields |= _family_fields(path, raw, family, problems)
    problems.raise_any()
    return RunParams(path=path, description=str(raw.get("description", "")), family=family, **fields)


def _distributions(where: str, value: Any, family: Family) -> tuple[str, ...]:
    """The family's named input distributions, each once (a name twice would check it twice)."""
    if isinstance(value, list):
        repeated = sorted({str(name) for name in value if value.count(name) > 1})
        if repeated:
            raise ConfigError(f"{where}: {repeated} listed more than once")
    try:
        return choice_list(where, value, family.distributions)
    except ConfigError as exc:
        raise ConfigError(f"{exc} (the {family.name} family's input distributions)") from exc


def _steps(where: str, value: Any) -> tuple[str, ...]:
    if value in (None, []):
        return ()
    return choice_list(where, value, OPTIONAL_STEPS)
