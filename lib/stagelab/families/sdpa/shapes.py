"""Attention problems: Q [batch, heads, seq_len, head_dim], K and V [batch, kv_heads, kv_seq_len, head_dim],
causal or not, in memory as [B, H, S, D] (bhsd) or as strided [B, S, H, D] views (bshd).

- kv_heads < heads is grouped-query attention: query head h reads K/V head h // (heads / kv_heads),
  as torch's `enable_gqa` and FlashAttention do.
- kv_seq_len != seq_len (a prefill after a cached prefix, cross-attention): the causal mask is
  aligned bottom-right as FlashAttention's, so query i sees keys j <= i + kv_seq_len - seq_len and
  the last query sees every key.
- bshd: each of Q, K, V (and the output) is a [B, H, S, D] view of [B, S, H, D] memory, the layout a
  model's projections produce (`x.view(B, S, H, D).transpose(1, 2)`): no transpose copy.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ...core.errors import ConfigError

# The head dimensions every sdpa stage is instantiated for (its templates' D).
SUPPORTED_HEAD_DIMS = (64, 128)
BHSD, BSHD = "bhsd", "bshd"
LAYOUTS = (BHSD, BSHD)
_SHAPE_KEYS = {"shape", "causal", "name", "kv_heads", "kv_seq_len", "layout"}
_DIM_NAMES = ("batch", "heads", "seq_len", "head_dim")
# A name goes into the problem's tag, hence into metric keys and file names: letters, digits, '-' and
# '.' (no '/', which splits metric keys, and no '_', which separates the tag's parts).
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]{0,39}$")

# What a problem may need beyond plain attention, by the name a stage's stages.yaml `supports:` uses.
GQA, CROSS_LENGTH = "gqa", "cross_length"
PROBLEM_FEATURES = {
    GQA: "grouped-query attention (fewer K/V heads than query heads)",
    CROSS_LENGTH: "a key length apart from the query length (kv_seq_len != seq_len)",
    BSHD: "strided [batch, seq_len, heads, head_dim] inputs (layout bshd)",
}


@dataclass(frozen=True, order=True)
class Shape:
    batch: int
    heads: int
    seq_len: int
    head_dim: int
    causal: bool
    kv_heads: int | None = None     # None: as many as `heads` (resolved in __post_init__)
    kv_seq_len: int | None = None   # None: `seq_len`
    layout: str = BHSD
    name: str = ""                  # the model the shape is from, e.g. vit-b16; shown in the tag

    def __post_init__(self) -> None:
        if self.kv_heads is None:
            object.__setattr__(self, "kv_heads", self.heads)
        if self.kv_seq_len is None:
            object.__setattr__(self, "kv_seq_len", self.seq_len)
        problem = problem_error(self)
        if problem:
            raise ConfigError(problem)

    @property
    def tag(self) -> str:
        """Metric-name friendly: 2x8x512x64 or 2x8x512x64_causal for plain problems (the tags of
        every earlier record); a name goes in front, the other fields after:
        llama3-8b-prefix_1x32x512x128_causal_kv8_sk4096_bshd."""
        parts = ["x".join(str(d) for d in self.dims)]
        if self.causal:
            parts.append("causal")
        if self.kv_heads != self.heads:
            parts.append(f"kv{self.kv_heads}")
        if self.kv_seq_len != self.seq_len:
            parts.append(f"sk{self.kv_seq_len}")
        if self.layout != BHSD:
            parts.append(self.layout)
        return "_".join([self.name, *parts] if self.name else parts)

    @property
    def dims(self) -> tuple[int, int, int, int]:
        """Q's (and the output's) logical [batch, heads, seq_len, head_dim]."""
        return (self.batch, self.heads, self.seq_len, self.head_dim)

    @property
    def kv_dims(self) -> tuple[int, int, int, int]:
        """K's and V's logical [batch, kv_heads, kv_seq_len, head_dim]."""
        return (self.batch, self.kv_heads, self.kv_seq_len, self.head_dim)

    @property
    def group(self) -> int:
        """Query heads per K/V head (1 without grouped-query attention)."""
        return self.heads // self.kv_heads

    @property
    def features(self) -> tuple[str, ...]:
        """What the problem needs beyond plain attention (PROBLEM_FEATURES), for stages' `supports:`."""
        return tuple(name for name, needed in ((GQA, self.kv_heads != self.heads),
                                               (CROSS_LENGTH, self.kv_seq_len != self.seq_len),
                                               (BSHD, self.layout == BSHD)) if needed)

    @property
    def input_key(self) -> tuple:
        """What the input generator is keyed by besides the seed: plain problems keep the key of every
        earlier run; K/V dimensions of their own join it. The layout and the name do not: a bshd
        problem draws the values of its bhsd twin, only stored apart."""
        key = (self.dims, self.causal)
        return key if self.kv_dims == self.dims else (*key, self.kv_dims)

    def visible_pairs(self) -> float:
        """(query, key) pairs the mask lets through, per (batch, head). Causal counts the continuous
        triangle, Sq * Sk - Sq^2 / 2 (S^2 / 2 at Sq == Sk, as every earlier record counted and
        FlashAttention's benchmarks count: seqlen^2 / 2, and Sq * (Sk - Sq / 2) for Sq != Sk)."""
        full = float(self.seq_len) * self.kv_seq_len
        return full - self.seq_len * self.seq_len / 2 if self.causal else full

    def flops(self) -> float:
        """Q.K^T and P.V: 2 matmuls x 2 flops per MAC x B*H*(visible pairs)*D."""
        return 4.0 * self.batch * self.heads * self.visible_pairs() * self.head_dim

    def bytes_moved(self, element_bytes: int) -> float:
        """The floor: Q, K, V read once and O written once (K and V at their own heads and length)."""
        q_or_o = self.batch * self.heads * self.seq_len * self.head_dim
        k_or_v = self.batch * self.kv_heads * self.kv_seq_len * self.head_dim
        return 2.0 * (q_or_o + k_or_v) * element_bytes


def problem_error(shape: Shape) -> str:
    """Why a Shape is not a problem the family can state ('' when it is)."""
    for field_name in (*_DIM_NAMES, "kv_heads", "kv_seq_len"):
        value = getattr(shape, field_name)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            label = f"shape.{field_name}" if field_name in _DIM_NAMES else field_name
            return f"{label}: expected a positive integer, got {value!r}"
    if shape.head_dim not in SUPPORTED_HEAD_DIMS:
        return f"shape.head_dim: {shape.head_dim} is not supported; supported: {list(SUPPORTED_HEAD_DIMS)}"
    if shape.heads % shape.kv_heads:
        return (f"kv_heads: {shape.kv_heads} does not divide heads {shape.heads} (each K/V head serves a whole "
                "group of query heads)")
    if shape.causal and shape.kv_seq_len < shape.seq_len:
        return (f"kv_seq_len: causal with {shape.kv_seq_len} keys for {shape.seq_len} queries leaves the first "
                f"{shape.seq_len - shape.kv_seq_len} queries no key to see (the mask is aligned bottom-right)")
    if shape.layout not in LAYOUTS:
        return f"layout: {shape.layout!r} is not supported; supported: {list(LAYOUTS)}"
    if not isinstance(shape.causal, bool):
        return f"causal: expected true or false, got {shape.causal!r}"
    if shape.name and not (isinstance(shape.name, str) and _NAME_RE.match(shape.name)):
        return (f"name: {shape.name!r} must be up to 40 letters, digits, '-' or '.', starting with a letter or "
                "digit (it becomes part of metric keys)")
    return ""


def _positive_int(where: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"{where}: expected a positive integer, got {value!r}")
    return value


def _optional(where: str, entry: dict, key: str) -> int | None:
    return _positive_int(f"{where}.{key}", entry[key]) if key in entry else None


def parse_shapes(where: str, entry: Any) -> list[Shape]:
    """`{shape: [batch, heads, seq_len, head_dim], causal: bool | [bool, ...]}`, with optional `name`,
    `kv_heads`, `kv_seq_len` and `layout` (bhsd | bshd) -> one Shape per causal value."""
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: expected {{shape: [batch, heads, seq_len, head_dim], causal: ...}}")
    unknown = sorted(set(entry) - _SHAPE_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(_SHAPE_KEYS)}")
    dims = entry.get("shape")
    if not isinstance(dims, list) or len(dims) != 4:
        raise ConfigError(f"{where}.shape: expected [batch, heads, seq_len, head_dim], got {dims!r}")
    batch, heads, seq_len, head_dim = (_positive_int(f"{where}.shape.{n}", v) for n, v in zip(_DIM_NAMES, dims))
    causal = entry.get("causal", False)
    causal_values = causal if isinstance(causal, list) else [causal]
    if not causal_values or not all(isinstance(c, bool) for c in causal_values):
        raise ConfigError(f"{where}.causal: expected true, false or a list of them, got {causal!r}")
    name, layout = entry.get("name", ""), entry.get("layout", BHSD)
    if not isinstance(name, str):
        raise ConfigError(f"{where}.name: expected a string, got {name!r}")
    extra = {"kv_heads": _optional(where, entry, "kv_heads"), "kv_seq_len": _optional(where, entry, "kv_seq_len"),
             "layout": layout, "name": name}
    try:
        return [Shape(batch, heads, seq_len, head_dim, c, **extra) for c in causal_values]
    except ConfigError as exc:
        raise ConfigError(f"{where}.{exc}") from exc
