"""Per-(batch, head) e4m3 quantization of attention inputs laid out [batch, heads, seq_len, head_dim].

Each head gets its own scale, FA3's granularity (its q/k/v descales are indexed by batch and
KV head): scale = E4M3_MAX / amax(|head|), so the head's largest value lands on e4m3's largest
finite value; descale = 1 / scale undoes it. Guarantees:

- an all-zero head gets scale 1, descale 1 and exact zeros (never 0/0 = NaN);
- a head holding inf or NaN is rejected, naming the tensor and the head (its amax, and so its
  scale, would be meaningless, and e4m3fn has no inf to carry one);
- every value, negative and sub-normal ones included, round-trips within e4m3's precision:
  |dequantize(quantize(x)) - x| <= e4m3_rounding_bound(x, descale).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ....core.errors import InputError

E4M3 = torch.float8_e4m3fn
_E4M3_INFO = torch.finfo(E4M3)
# 448: e4m3fn's largest finite value (it has no inf; the all-ones pattern is NaN).
E4M3_MAX = _E4M3_INFO.max
# Round to nearest is off by at most half a unit in the last place: 2^-4 of a normal value.
E4M3_HALF_ULP = _E4M3_INFO.eps / 2
# Below e4m3's smallest normal the spacing is fixed (2^-9): half of it bounds the rounding there.
E4M3_HALF_SUBNORMAL_STEP = _E4M3_INFO.tiny * _E4M3_INFO.eps / 2
# Kernels read their descales as float32.
SCALE_DTYPE = torch.float32
# A round trip rounds in float32 twice besides e4m3 (x * scale, and 1 / scale for the descale).
_FLOAT32_ROUNDINGS_RELATIVE = 2 * torch.finfo(SCALE_DTYPE).eps
# The largest scale: its descale (1 / scale) stays a normal float32, since kernels built with
# fast math flush sub-normals to zero. Only heads with amax below E4M3_MAX / this (~5e-36) hit it;
# their values then sit at or below e4m3's precision floor, which the rounding bound allows for.
MAX_SCALE = 1.0 / torch.finfo(SCALE_DTYPE).tiny
_LAYOUT = "[batch, heads, seq_len, head_dim]"
_HEAD_DIMS = (-2, -1)  # seq_len and head_dim: the dimensions one head's amax reduces over


@dataclass(frozen=True)
class Fp8Tensor:
    """e4m3 data with its per-(batch, head) scales: data ~= x * scale, x ~= data * descale."""

    data: torch.Tensor  # float8_e4m3fn, [batch, heads, seq_len, head_dim]
    scale: torch.Tensor  # float32, [batch, heads]
    descale: torch.Tensor  # float32, [batch, heads]

    def dequantize(self, dtype: torch.dtype = torch.float64) -> torch.Tensor:
        return self.data.to(dtype) * self.descale.to(dtype)[..., None, None]


@dataclass(frozen=True)
class Fp8Inputs:
    """Q, K and V quantized head by head, and the dtype they came in (the output's dtype)."""

    q: Fp8Tensor
    k: Fp8Tensor
    v: Fp8Tensor
    source_dtype: torch.dtype

    def dequantized(self, dtype: torch.dtype = torch.float64) -> tuple[torch.Tensor, ...]:
        return tuple(t.dequantize(dtype) for t in (self.q, self.k, self.v))


def _reject_nonfinite(name: str, x: torch.Tensor) -> None:
    bad_per_head = (~torch.isfinite(x)).flatten(-2).sum(-1)
    if bad_per_head.any():
        batch, head = (int(i) for i in torch.nonzero(bad_per_head)[0])
        heads = int((bad_per_head > 0).sum())
        raise InputError(
            f"{name}: head (batch {batch}, head {head}) holds {int(bad_per_head[batch, head])} inf or NaN "
            f"value(s) ({heads} head(s) in all); an FP8 scale comes from the head's amax, so it cannot be "
            f"quantized")


def _validate(name: str, x: torch.Tensor) -> None:
    if not isinstance(x, torch.Tensor):
        raise InputError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 4:
        raise InputError(f"{name} must have 4 dims {_LAYOUT}, got shape {tuple(x.shape)}")
    if not x.is_floating_point() or x.dtype == E4M3:
        raise InputError(f"{name} has dtype {x.dtype}; expected a floating-point dtype wider than e4m3")
    _reject_nonfinite(name, x)


def head_scales(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(scale, descale) per (batch, head), float32; an all-zero head gets 1 and 1."""
    amax = x.abs().amax(dim=_HEAD_DIMS).to(torch.float64)
    scale = torch.where(amax > 0, E4M3_MAX / amax, torch.ones_like(amax)).clamp(max=MAX_SCALE)
    scale = scale.to(SCALE_DTYPE)
    return scale, scale.reciprocal()


def quantize_e4m3(x: torch.Tensor, name: str) -> Fp8Tensor:
    """One tensor, head by head; `name` is what errors call it (q, k or v)."""
    _validate(name, x)
    scale, descale = head_scales(x)
    data = saturated_e4m3(x.to(SCALE_DTYPE) * scale[..., None, None])
    return Fp8Tensor(data=data, scale=scale, descale=descale)


def saturated_e4m3(scaled: torch.Tensor) -> torch.Tensor:
    """Scaled values in e4m3, saturating as the GPU's cvt .satfinite does: float32 rounding of
    amax * scale may land a hair above E4M3_MAX, which must stay the largest value, not NaN."""
    return scaled.clamp(-E4M3_MAX, E4M3_MAX).to(E4M3)


def quantize_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> Fp8Inputs:
    """Q, K and V, each with its own per-(batch, head) scales."""
    quantized = (quantize_e4m3(t, name) for name, t in (("q", q), ("k", k), ("v", v)))
    return Fp8Inputs(*quantized, source_dtype=q.dtype)


def e4m3_rounding_bound(x: torch.Tensor, descale: torch.Tensor) -> torch.Tensor:
    """The most a round trip may move each element of x (float64): half an ulp of the scaled value,
    or half the sub-normal step where the scaled value is below e4m3's smallest normal, plus the
    float32 rounding of the scaling itself."""
    return e4m3_broadcast_bound(x, descale[..., None, None])


def e4m3_broadcast_bound(x: torch.Tensor, descale: torch.Tensor) -> torch.Tensor:
    """e4m3_rounding_bound for descales of any granularity that broadcast against x (the INT8
    recipe's V: one per channel, [batch, heads, 1, head_dim])."""
    descale = descale.to(torch.float64)
    magnitude = x.to(torch.float64).abs()
    scaled = magnitude / descale
    e4m3_rounding = torch.maximum(scaled * E4M3_HALF_ULP, torch.full_like(scaled, E4M3_HALF_SUBNORMAL_STEP))
    return e4m3_rounding * descale + magnitude * _FLOAT32_ROUNDINGS_RELATIVE
