"""A stage's tuning search space: candidate values for some of its defines (stages.yaml `search_space`).

    search_space:
      BLOCK_N: [32, 64, 128]
      PIPELINE_STAGES: [1, 2, 3, 4]

Every configuration of the cartesian product is one build. A key must be a define the
stage declares in its compile_options (so a typo cannot silently tune nothing), each value
a non-empty list of distinct scalars. Combinations the kernel's static_asserts reject are
fine here: they become `build_failed` configurations of the tune, not registry errors.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Any

from .errors import ConfigError

_DEFINE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class SearchSpace:
    """Axes in declaration order: ((define, (value, ...)), ...); values as the -D strings."""

    axes: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.axes)

    @property
    def size(self) -> int:
        total = 1
        for _, values in self.axes:
            total *= len(values)
        return total if self.axes else 0

    def configurations(self) -> list[dict[str, str]]:
        """Every combination, as define overrides, first axis slowest."""
        names = [name for name, _ in self.axes]
        return [dict(zip(names, combo)) for combo in itertools.product(*(values for _, values in self.axes))]

    def as_params(self) -> dict[str, str]:
        """`space.<define>` -> comma-separated values, for the tune run's MLflow params."""
        return {f"space.{name}": ",".join(values) for name, values in self.axes}


def config_label(defines: dict[str, str]) -> str:
    """A configuration's stable name: its overrides sorted by define, `BLOCK_N=32,PIPELINE_STAGES=2`."""
    return ",".join(f"{k}={v}" for k, v in sorted(defines.items()))


def parse_label(label: str) -> dict[str, str]:
    """The defines of a configuration label (config_label's `BLOCK_N=32,PIPELINE_STAGES=2`)."""
    pairs = [item.split("=", 1) for item in label.split(",") if item]
    if not pairs or any(len(pair) != 2 or not pair[0] for pair in pairs):
        raise ConfigError(f"{label!r} is not a configuration label (KEY=VALUE,KEY=VALUE)")
    return {key: value for key, value in pairs}


def _values(where: str, name: str, raw: Any) -> tuple[str, ...]:
    if not isinstance(raw, list):
        raise ConfigError(f"{where}: search_space.{name}: expected a list of values like [32, 64], "
                          f"got {type(raw).__name__} {raw!r}")
    if not raw:
        raise ConfigError(f"{where}: search_space.{name}: the list of values is empty")
    if not all(isinstance(v, (int, str)) for v in raw):
        raise ConfigError(f"{where}: search_space.{name}: values must be numbers or names, got {raw!r}")
    values = tuple(str(int(v)) if isinstance(v, bool) else str(v) for v in raw)
    if len(set(values)) != len(values):
        raise ConfigError(f"{where}: search_space.{name}: duplicate values in {raw!r}")
    return values


def parse_search_space(where: str, raw: Any, defines: dict[str, str]) -> SearchSpace:
    """Validate a stage's `search_space` against its declared defines; errors name the stage and key."""
    if raw is None:
        return SearchSpace()
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: search_space: expected a mapping DEFINE: [values], got {type(raw).__name__}")
    if not raw:
        raise ConfigError(f"{where}: search_space is empty; leave it out or list a define and its values")
    axes = []
    for name, values in raw.items():
        if not isinstance(name, str) or not _DEFINE_RE.match(name):
            raise ConfigError(f"{where}: search_space key {name!r} is not a preprocessor name like BLOCK_N")
        if name not in defines:
            raise ConfigError(f"{where}: search_space.{name}: not a define of this stage; "
                              f"declare it in compile_options.defines (known: {sorted(defines) or 'none'})")
        axes.append((name, _values(where, name, values)))
    return SearchSpace(tuple(axes))


def parse_variants(where: str, raw: Any, defines: dict[str, str]) -> dict[str, dict[str, str]]:
    """A stage's named variants, {name: {DEFINE: value}} (a promoted tune result, say); each define
    must be one the stage declares."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: variants: expected a mapping NAME: {{DEFINE: value}}, got {type(raw).__name__}")
    variants = {}
    for name, overrides in raw.items():
        if not isinstance(name, str) or not _DEFINE_RE.match(name):
            raise ConfigError(f"{where}: variants key {name!r} is not a name of letters, digits and underscores")
        if not isinstance(overrides, dict) or not overrides:
            raise ConfigError(f"{where}: variants.{name}: expected a non-empty mapping DEFINE: value")
        unknown = sorted(set(map(str, overrides)) - set(defines))
        if unknown:
            raise ConfigError(f"{where}: variants.{name}: {unknown} are not defines of this stage "
                              f"(known: {sorted(defines) or 'none'})")
        if not all(isinstance(v, (int, str)) for v in overrides.values()):
            raise ConfigError(f"{where}: variants.{name}: values must be numbers or names, got {overrides!r}")
        variants[name] = {str(k): str(int(v)) if isinstance(v, bool) else str(v) for k, v in overrides.items()}
    return variants
