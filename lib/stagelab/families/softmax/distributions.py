"""Named input distributions of the softmax family's checks: x in float32 on the CPU, fresh per seed,
drawn from a generator keyed by seed, problem and distribution (family.input_generator).

- `normal`: x ~ N(0, INPUT_SPREAD^2), the inputs every check had before distributions had names.
- `large`: x ~ N(0, 256^2), logits hundreds apart, as sdpa's `large` gives its softmax.
- `positive`: x uniform on (0, 1]: every exponential near 1, so errors of the sum add coherently.
- `peaky`: near-one-hot rows: N(0, 1) with one element per row PEAK_LOGIT above.
- `tiny`: x ~ N(0, (1e-3)^2): rows nearly uniform.

sdpa's `zero_head` and `outlier` name attention's K/V heads and FP8 channels; a softmax row has
neither, so this family does not offer them (a parameter file naming them is rejected).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ...core.distributions import DEFAULT_DISTRIBUTION, input_generator

# Standard normal times this: logits spread over about +-12, so rows are peaked (a few elements
# near 1) and long tails near 0 both occur, as in attention or classification.
INPUT_SPREAD = 4.0
LARGE_SPREAD = 256.0
TINY_SPREAD = 1e-3
# The other elements' total weight against the peak, cols * exp(1/2 - PEAK_LOGIT) for N(0, 1) others,
# is 2^16 * exp(-31.5) = 1.4e-9 at the widest row (65536 columns): one-hot to within 1e-8.
PEAK_LOGIT = 32.0


def _normal(dims: tuple[int, int], generator: torch.Generator, spread: float) -> torch.Tensor:
    return torch.randn(dims, generator=generator, dtype=torch.float32) * spread


def positive(dims: tuple[int, int], generator: torch.Generator) -> torch.Tensor:
    # 1 - U[0, 1): float32's uniform steps are 2^-24, which fp16 still holds, so no element is 0.
    return 1.0 - torch.rand(dims, generator=generator, dtype=torch.float32)


def peaky(dims: tuple[int, int], generator: torch.Generator) -> torch.Tensor:
    x = _normal(dims, generator, 1.0)
    peaks = torch.randint(dims[1], (dims[0], 1), generator=generator)
    return x.scatter_add(1, peaks, torch.full((dims[0], 1), PEAK_LOGIT))


DRAWS: dict[str, Callable[[tuple[int, int], torch.Generator], torch.Tensor]] = {
    DEFAULT_DISTRIBUTION: lambda dims, g: _normal(dims, g, INPUT_SPREAD),
    "large": lambda dims, g: _normal(dims, g, LARGE_SPREAD),
    "positive": positive,
    "peaky": peaky,
    "tiny": lambda dims, g: _normal(dims, g, TINY_SPREAD),
}
DISTRIBUTIONS = tuple(DRAWS)


def draw(rows: int, cols: int, seed: int, distribution: str) -> torch.Tensor:
    """x in float32 on the CPU for one check (the caller converts and moves it)."""
    return DRAWS[distribution]((rows, cols), input_generator((seed, rows, cols), distribution))
