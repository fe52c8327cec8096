"""Named input distributions of the sdpa family's checks: Q, K and V in float32 on the CPU, fresh per
seed, drawn from a generator keyed by seed, problem and distribution (family.input_generator).

- `normal`: Q, K, V ~ N(0, 1), the inputs every check had before distributions had names (same
  generator, same values).
- `large`: logits q.k/sqrt(d) in the hundreds and V in the hundreds, the regime where a kernel's
  max, exponent range and scale folding are tested (FP8's failure of issue 28).
- `positive`: Q, K, V uniform on (0, 1]: no signs to cancel, so rounding errors add coherently.
- `peaky`: near-one-hot rows: each query has one key whose logit stands far above all others.
- `zero_head`: N(0, 1) with one (batch, head) of K and V all zeros (Q untouched): a row of equal
  logits and a zero output, and for FP8 the quantizer's zero-scale case in K and V alone.
- `tiny`: Q, K, V ~ N(0, (1e-3)^2): logits near zero (uniform rows) and outputs around 1e-3.
- `outlier`: N(0, 1) with a few channels of K and V 100x the rest, as activations with outlier
  features have; the per-head FP8 scale is then set by those channels (FP8 stages only).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ...core.distributions import DEFAULT_DISTRIBUTION, input_generator
from ...core.errors import ConfigError
from .shapes import Shape

NORMAL = DEFAULT_DISTRIBUTION
LARGE = "large"
POSITIVE = "positive"
PEAKY = "peaky"
ZERO_HEAD = "zero_head"
TINY = "tiny"
OUTLIER = "outlier"

# large: with q_i, k_i independent N(0, s^2), q.k sums d products of variance s^4, so q.k/sqrt(d)
# has standard deviation s^2 whatever the head dimension. A logit spread of 484 (s = 22) puts a
# row's scores hundreds apart (its maximum over 2048 keys near 3.5 * 484 = 1700): enough for the
# e4m3 tensor core's ~13-bit Q.K^T accumulation to misweight the top keys (issue 28), which a
# spread of 256 did not show. The plain fp16 yardstick forms q.k before the scale: its spread
# s^2 * sqrt(128) = 5.5e3 leaves fp16's 65504 twelve spreads away (the issue's s = 30 would leave
# 6.4: an overflow in about one check in a hundred).
LARGE_LOGIT_STD = 484.0
LARGE_QK_STD = math.sqrt(LARGE_LOGIT_STD)
LARGE_V_STD = 200.0  # outputs, averages of few V rows in such peaked rows, are then in the hundreds too
TINY_STD = 1e-3
# peaky: each query is its chosen key k_j scaled so that their logit is PEAK_LOGIT. Another key's
# logit is then PEAK_LOGIT * Z / |k_j| with Z ~ N(0, 1), so the gap to the peak is
# PEAK_LOGIT * (1 - Z / |k_j|). The worst row meets the largest Z of up to 8192 keys,
# sqrt(2 ln 8192) = 4.2, with a short chosen key (|k_j| ~ sqrt(64) - 3 = 5 at d = 64): a gap of
# PEAK_LOGIT * 0.16 = 10 at 64, so even that row is one-hot to within e^-10 = 5e-5 (tests check
# 1e-3), while the logits stay tens, not `large`'s hundreds.
PEAK_LOGIT = 64.0
# outlier: a few fixed channels (the same in every token and head, as outlier features are) of K
# and V scaled up. Not Q too: Q's and K's outliers in one channel would multiply into logits of
# 10^4 and overflow the plain fp16 yardstick's q.k.
OUTLIER_CHANNELS = 4
OUTLIER_FACTOR = 100.0

Inputs = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


def tensor_dims(shape: Shape) -> tuple[tuple[int, ...], ...]:
    """The logical dimensions of Q, K and V, in the order they are drawn."""
    return shape.dims, shape.kv_dims, shape.kv_dims


def _normal(dims: tuple[int, ...], generator: torch.Generator, std: float = 1.0) -> torch.Tensor:
    return torch.randn(dims, generator=generator, dtype=torch.float32) * std


def normal(shape: Shape, generator: torch.Generator) -> Inputs:
    return tuple(_normal(dims, generator) for dims in tensor_dims(shape))  # x * 1.0 is x: earlier runs' values


def large(shape: Shape, generator: torch.Generator) -> Inputs:
    q, k = (_normal(dims, generator, LARGE_QK_STD) for dims in (shape.dims, shape.kv_dims))
    return q, k, _normal(shape.kv_dims, generator, LARGE_V_STD)


def positive(shape: Shape, generator: torch.Generator) -> Inputs:
    # 1 - U[0, 1): float32's uniform steps are 2^-24, which fp16 still holds, so no element is 0.
    return tuple(1.0 - torch.rand(dims, generator=generator, dtype=torch.float32) for dims in tensor_dims(shape))


def chosen_keys(shape: Shape, generator: torch.Generator) -> torch.Tensor:
    """For each query row, one key it may see: any key, or under the causal mask (bottom-right
    aligned) one at or before i + kv_seq_len - seq_len."""
    offset = shape.kv_seq_len - shape.seq_len
    visible = (torch.arange(1, shape.seq_len + 1) + offset if shape.causal
               else torch.full((shape.seq_len,), shape.kv_seq_len))
    uniform = torch.rand(shape.dims[:3], generator=generator, dtype=torch.float64)
    return (uniform * visible).long().clamp(max=shape.kv_seq_len - 1)


def peaky(shape: Shape, generator: torch.Generator) -> Inputs:
    k, v = _normal(shape.kv_dims, generator), _normal(shape.kv_dims, generator)
    chosen = chosen_keys(shape, generator)
    # each query head picks among the keys of the K/V head it reads (grouped-query attention)
    k_seen = k.repeat_interleave(shape.group, dim=1) if shape.group > 1 else k
    k_chosen = k_seen.gather(2, chosen[..., None].expand(shape.dims))
    # q = c * k_j with c = PEAK_LOGIT * sqrt(d) / |k_j|^2, so that q.k_j / sqrt(d) = PEAK_LOGIT
    q = k_chosen * (PEAK_LOGIT * math.sqrt(shape.head_dim) / k_chosen.square().sum(-1, keepdim=True))
    return q, k, v


def zeroed_head(shape: Shape, generator: torch.Generator) -> tuple[int, int]:
    """(batch, K/V head) of the zeroed K/V head: any but the last where there are several, since the
    FP8 check zeroes the last head of Q, K and V itself (fp8.plant_zero_head): it sees both cases.
    Under grouped-query attention every query head of its group sees the zeros."""
    choices = max(1, shape.batch * shape.kv_heads - 1)
    return divmod(int(torch.randint(choices, (1,), generator=generator)), shape.kv_heads)


def zero_head(shape: Shape, generator: torch.Generator) -> Inputs:
    q, k, v = (_normal(dims, generator) for dims in tensor_dims(shape))
    batch, head = zeroed_head(shape, generator)
    k[batch, head] = 0
    v[batch, head] = 0
    return q, k, v


def tiny(shape: Shape, generator: torch.Generator) -> Inputs:
    return tuple(_normal(dims, generator, TINY_STD) for dims in tensor_dims(shape))


def outlier_channels(shape: Shape, generator: torch.Generator) -> torch.Tensor:
    return torch.randperm(shape.head_dim, generator=generator)[:OUTLIER_CHANNELS]


def outlier(shape: Shape, generator: torch.Generator) -> Inputs:
    q, k, v = (_normal(dims, generator) for dims in tensor_dims(shape))
    channels = outlier_channels(shape, generator)
    k[..., channels] *= OUTLIER_FACTOR
    v[..., channels] *= OUTLIER_FACTOR
    return q, k, v


DRAWS: dict[str, Callable[[Shape, torch.Generator], Inputs]] = {
    NORMAL: normal, LARGE: large, POSITIVE: positive, PEAKY: peaky, ZERO_HEAD: zero_head, TINY: tiny,
    OUTLIER: outlier,
}
DISTRIBUTIONS = tuple(DRAWS)
# Not what an fp16/bf16 stage is checked on: `outlier` tests the scales of quantized stages (FP8's per
# head, INT8's per block and channel, K smoothing), so those stages alone (kinds.py).
QUANTIZED_ONLY = (OUTLIER,)


# The last draw, kept: the key leaves out the dtype, so a check's float16 and bfloat16 runs (check_each
# puts them side by side) share one draw. A draw of acceptance's 1x683x2945x64 (386M float32 values
# from one CPU generator) took 2.1-2.6 s on the H200 machine, about half of each of its checks.
_last_draw: dict[tuple, Inputs] = {}


def draw(shape: Shape, seed: int, distribution: str) -> Inputs:
    """Q, K and V in float32 on the CPU, contiguous [B, H, S, D], for one check (the caller converts
    them, moves them and lays them out). The same key returns the same tensors: read them, copy
    before writing (inputs.make_inputs does)."""
    key = (seed, *shape.input_key, distribution)
    if key not in _last_draw:
        _last_draw.clear()  # before drawing, so two large draws are never held at once
        _last_draw[key] = DRAWS[distribution](shape, input_generator((seed, *shape.input_key), distribution))
    return _last_draw[key]


def known_distributions(distributions) -> tuple[str, ...]:
    """The names as a tuple, or ConfigError naming the first this family cannot draw (checked
    before any launch, so a misspelt name fails a check run at once)."""
    distributions = tuple(distributions)
    unknown = [d for d in distributions if d not in DISTRIBUTIONS]
    if unknown:
        raise ConfigError(f"the sdpa family has no input distribution {unknown[0]!r}; supported: {list(DISTRIBUTIONS)}")
    return distributions
