"""Parameter files (params/*.yaml): which shapes a stage is checked and timed on.

    description: what this file is for
    dtypes: [float16, bfloat16]      # correctness is checked in each
    seeds: [0, 1]                    # fresh random inputs per seed (>= 2)
    shapes:
      - {shape: [1, 8, 512, 64], causal: [false, true]}   # [batch, heads, seq_len, head_dim]
    mission: {shape: [2, 8, 512, 64], causal: false}      # headline timing shape, always timed
    timing: {dtype: float16, warmup: 10, repetitions: 100, modes: [cold],
             backends: [flash, efficient, cudnn, math]}
    timeout_s: 1800                  # per-notebook limit in batch runs
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .errors import ConfigError

SUPPORTED_DTYPES = ("float16", "bfloat16")
SUPPORTED_HEAD_DIMS = (64, 128)
SDPA_BACKENDS = ("flash", "efficient", "cudnn", "math")
TIMING_MODES = ("cold", "hot")
# Fewer samples than this leave the p99 resting on a single launch.
MIN_REPETITIONS = 100

_TOP_KEYS = {"description", "dtypes", "seeds", "shapes", "mission", "timing", "timeout_s"}
_SHAPE_KEYS = {"shape", "causal"}
_TIMING_KEYS = {"dtype", "warmup", "repetitions", "modes", "backends"}
DEFAULT_MISSION = {"shape": [2, 8, 512, 64], "causal": False}


@dataclass(frozen=True, order=True)
class Shape:
    batch: int
    heads: int
    seq_len: int
    head_dim: int
    causal: bool

    @property
    def tag(self) -> str:
        """Metric-name friendly: 2x8x512x64 or 2x8x512x64_causal."""
        base = f"{self.batch}x{self.heads}x{self.seq_len}x{self.head_dim}"
        return base + ("_causal" if self.causal else "")

    @property
    def dims(self) -> tuple[int, int, int, int]:
        return (self.batch, self.heads, self.seq_len, self.head_dim)

    def flops(self) -> float:
        """Q.K^T and P.V: 2 matmuls x 2 flops per MAC x B*H*S*S*D; causal does half."""
        total = 4.0 * self.batch * self.heads * self.seq_len * self.seq_len * self.head_dim
        return total / 2 if self.causal else total


@dataclass(frozen=True)
class TimingSpec:
    dtype: str = "float16"
    warmup: int = 10
    repetitions: int = MIN_REPETITIONS
    modes: tuple[str, ...] = ("cold",)
    backends: tuple[str, ...] = SDPA_BACKENDS


@dataclass(frozen=True)
class RunParams:
    path: Path
    description: str
    dtypes: tuple[str, ...]
    seeds: tuple[int, ...]
    shapes: tuple[Shape, ...]
    mission: Shape
    timing: TimingSpec = field(default_factory=TimingSpec)
    timeout_s: int = 1800

    @property
    def name(self) -> str:
        return self.path.stem

    def timed_shapes(self) -> list[Shape]:
        """Every checked shape, plus the mission shape when the file lacks it."""
        shapes = list(self.shapes)
        if self.mission not in shapes:
            shapes.append(self.mission)
        return shapes


def _positive_int(where: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"{where}: expected a positive integer, got {value!r}")
    return value


def _shapes(where: str, entry: Any) -> list[Shape]:
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: expected {{shape: [batch, heads, seq_len, head_dim], causal: ...}}")
    unknown = sorted(set(entry) - _SHAPE_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(_SHAPE_KEYS)}")
    dims = entry.get("shape")
    if not isinstance(dims, list) or len(dims) != 4:
        raise ConfigError(f"{where}.shape: expected [batch, heads, seq_len, head_dim], got {dims!r}")
    names = ("batch", "heads", "seq_len", "head_dim")
    batch, heads, seq_len, head_dim = (_positive_int(f"{where}.shape.{n}", v) for n, v in zip(names, dims))
    if head_dim not in SUPPORTED_HEAD_DIMS:
        raise ConfigError(f"{where}.shape.head_dim: {head_dim} is not supported; supported: {list(SUPPORTED_HEAD_DIMS)}")
    causal = entry.get("causal", False)
    causal_values = causal if isinstance(causal, list) else [causal]
    if not causal_values or not all(isinstance(c, bool) for c in causal_values):
        raise ConfigError(f"{where}.causal: expected true, false or a list of them, got {causal!r}")
    return [Shape(batch, heads, seq_len, head_dim, c) for c in causal_values]


def _choice_list(where: str, value: Any, allowed: tuple[str, ...]) -> tuple[str, ...]:
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not values:
        raise ConfigError(f"{where}: expected a non-empty list drawn from {list(allowed)}")
    for item in values:
        if item not in allowed:
            raise ConfigError(f"{where}: {item!r} is not supported; supported: {list(allowed)}")
    return tuple(values)


def _timing(where: str, raw: Any) -> TimingSpec:
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a mapping")
    unknown = sorted(set(raw) - _TIMING_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(_TIMING_KEYS)}")
    spec = TimingSpec()
    dtype = raw.get("dtype", spec.dtype)
    if dtype not in SUPPORTED_DTYPES:
        raise ConfigError(f"{where}.dtype: {dtype!r} is not supported; supported: {list(SUPPORTED_DTYPES)}")
    warmup = raw.get("warmup", spec.warmup)
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ConfigError(f"{where}.warmup: expected an integer >= 0, got {warmup!r}")
    repetitions = _positive_int(f"{where}.repetitions", raw.get("repetitions", spec.repetitions))
    if repetitions < MIN_REPETITIONS:
        raise ConfigError(f"{where}.repetitions: {repetitions} is too few for a p99; use at least {MIN_REPETITIONS}")
    return TimingSpec(
        dtype=dtype,
        warmup=warmup,
        repetitions=repetitions,
        modes=_choice_list(f"{where}.modes", raw.get("modes", list(spec.modes)), TIMING_MODES),
        backends=_choice_list(f"{where}.backends", raw.get("backends", list(spec.backends)), SDPA_BACKENDS),
    )


def load_params(path: Path | str) -> RunParams:
    """Read and validate a parameter file; errors name the file and the key."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"parameter file not found: {path}")
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    unknown = sorted(set(raw) - _TOP_KEYS)
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {unknown}; allowed: {sorted(_TOP_KEYS)}")

    dtypes = _choice_list(f"{path}: dtypes", raw.get("dtypes", list(SUPPORTED_DTYPES)), SUPPORTED_DTYPES)
    seeds = raw.get("seeds", [0, 1])
    if not isinstance(seeds, list) or len(seeds) < 2 or not all(
        isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds
    ):
        raise ConfigError(f"{path}: seeds: expected a list of two or more integers >= 0, got {seeds!r}")
    entries = raw.get("shapes")
    if not isinstance(entries, list) or not entries:
        raise ConfigError(f"{path}: shapes: expected a non-empty list")
    shapes: list[Shape] = []
    for index, entry in enumerate(entries):
        for shape in _shapes(f"{path}: shapes[{index}]", entry):
            if shape not in shapes:
                shapes.append(shape)
    mission_list = _shapes(f"{path}: mission", raw.get("mission", DEFAULT_MISSION))
    if len(mission_list) != 1:
        raise ConfigError(f"{path}: mission: give exactly one shape with one causal value")
    timeout_s = _positive_int(f"{path}: timeout_s", raw.get("timeout_s", 1800))
    return RunParams(
        path=path,
        description=str(raw.get("description", "")),
        dtypes=dtypes,
        seeds=tuple(seeds),
        shapes=tuple(shapes),
        mission=mission_list[0],
        timing=_timing(f"{path}: timing", raw.get("timing") or {}),
        timeout_s=timeout_s,
    )
