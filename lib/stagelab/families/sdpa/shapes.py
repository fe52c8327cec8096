"""Attention problems: [batch, heads, seq_len, head_dim], causal or not."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...core.errors import ConfigError

# The head dimensions every sdpa stage is instantiated for (its templates' D).
SUPPORTED_HEAD_DIMS = (64, 128)
_SHAPE_KEYS = {"shape", "causal"}
_DIM_NAMES = ("batch", "heads", "seq_len", "head_dim")


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
        base = "x".join(str(d) for d in self.dims)
        return base + ("_causal" if self.causal else "")

    @property
    def dims(self) -> tuple[int, int, int, int]:
        return (self.batch, self.heads, self.seq_len, self.head_dim)

    def flops(self) -> float:
        """Q.K^T and P.V: 2 matmuls x 2 flops per MAC x B*H*S*S*D; causal does half."""
        total = 4.0 * self.batch * self.heads * self.seq_len * self.seq_len * self.head_dim
        return total / 2 if self.causal else total

    def bytes_moved(self, element_bytes: int) -> float:
        """The floor: Q, K, V read once and O written once."""
        return 4.0 * self.batch * self.heads * self.seq_len * self.head_dim * element_bytes


def _positive_int(where: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"{where}: expected a positive integer, got {value!r}")
    return value


def parse_shapes(where: str, entry: Any) -> list[Shape]:
    """`{shape: [batch, heads, seq_len, head_dim], causal: bool | [bool, ...]}` -> one Shape per causal value."""
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: expected {{shape: [batch, heads, seq_len, head_dim], causal: ...}}")
    unknown = sorted(set(entry) - _SHAPE_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(_SHAPE_KEYS)}")
    dims = entry.get("shape")
    if not isinstance(dims, list) or len(dims) != 4:
        raise ConfigError(f"{where}.shape: expected [batch, heads, seq_len, head_dim], got {dims!r}")
    batch, heads, seq_len, head_dim = (_positive_int(f"{where}.shape.{n}", v) for n, v in zip(_DIM_NAMES, dims))
    if head_dim not in SUPPORTED_HEAD_DIMS:
        raise ConfigError(f"{where}.shape.head_dim: {head_dim} is not supported; supported: {list(SUPPORTED_HEAD_DIMS)}")
    causal = entry.get("causal", False)
    causal_values = causal if isinstance(causal, list) else [causal]
    if not causal_values or not all(isinstance(c, bool) for c in causal_values):
        raise ConfigError(f"{where}.causal: expected true, false or a list of them, got {causal!r}")
    return [Shape(batch, heads, seq_len, head_dim, c) for c in causal_values]
