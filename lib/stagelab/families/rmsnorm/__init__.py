"""The rmsnorm family: out[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + EPS) * weight.

The lab's example family: x is [rows, cols] row-major fp16/bf16, weight [cols] in the same dtype,
math in fp32. A `TensorFamily` (stagelab.core.family_kit): every stage's module has
`forward(x, weight, out, eps, stream)` and `stage_config()` (kernels/rmsnorm/binding.cpp for CUDA
stages, the stage file itself for Triton ones); eps is the family's one launch argument.
"""

from __future__ import annotations

import functools

import torch

from ...core.distributions import DEFAULT_DISTRIBUTION, input_generator
from ...core.errors import InputError
from ...core.family_kit import ShapeProblem, TensorFamily, describe

EPS = 1e-6  # Llama's
# Gains near 1, as a trained model's are.
WEIGHT_SPREAD = 0.1
# x ~ N(0, spread^2) per named distribution. `large`: squares up to ~(5 * 1000)^2, far past fp16's
# 65504, so only a statistic kept in fp32 survives; `tiny`: a mean square of 1e-6 = EPS, so eps counts.
SPREADS = {DEFAULT_DISTRIBUTION: 1.0, "large": 1000.0, "tiny": 1e-3}


class RmsNormProblem(ShapeProblem):
    """A [rows, cols] problem whose floor counts the weight too."""

    def bytes_moved(self, element_bytes: int) -> float:
        """The floor: x read once, out written once, the weight read once."""
        rows, cols = self.shape
        return float((2 * rows + 1) * cols * element_bytes)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """RMSNorm as a model layer computes it in `dtype` (Hugging Face's LlamaRMSNorm): the statistic in
    float32 (float64 for the truth), x * rstd rounded to `dtype`, then times the weight in `dtype`."""
    stat = x.to(torch.promote_types(dtype, torch.float32))
    normed = stat * torch.rsqrt(stat.pow(2).mean(-1, keepdim=True) + EPS)
    return normed.to(dtype) * weight.to(dtype)


def torch_rms_norm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.rms_norm(x, (x.shape[-1],), weight, EPS)


@functools.cache
def _liger_apply():
    """Liger's autograd function, imported once (not in every timed call); an ImportError where it
    is not installed, which TensorFamily.contender reports as such."""
    try:
        from liger_kernel.ops.rms_norm import LigerRMSNormFunction
    except ImportError as exc:
        raise ImportError(f"Liger-Kernel (pip install stagelab[liger]): {exc}") from exc
    return LigerRMSNormFunction.apply


def liger_rms_norm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    # "gemma" casting: every operation in fp32, one rounding of the output, as the stages compute.
    return _liger_apply()(x, weight, EPS, 0.0, "gemma")


class RmsNormFamily(TensorFamily):
    name = "rmsnorm"
    default_mission = {"shape": [16384, 4096]}
    acceptance_params = "params/rmsnorm-acceptance.yaml"
    try_params = "params/rmsnorm-try.yaml"
    long_params = "params/rmsnorm-long.yaml"
    report_params = ("rmsnorm-acceptance", "rmsnorm-long")
    knob_example = '{"BLOCK_THREADS": 128}'
    # A row narrower than a warp, and one wider than a block's stride with an odd width.
    sanitize_problems = ({"shape": [5, 7]}, {"shape": [3, 4097]})
    distributions = tuple(SPREADS)
    # Per element: a square added to the row's sum, then a multiply by rstd and one by the weight.
    flops_per_element = 4
    problem_type = RmsNormProblem
    launch_arguments = (EPS,)
    contender_functions = {"torch": torch_rms_norm, "liger": liger_rms_norm}

    def make_inputs(self, problem: RmsNormProblem, dtype: torch.dtype, seed: int, device,
                    distribution: str = DEFAULT_DISTRIBUTION) -> tuple[torch.Tensor, torch.Tensor]:
        self.require_distribution(distribution)
        rows, cols = problem.shape
        generator = input_generator((seed, rows, cols), distribution)
        x = torch.randn(rows, cols, generator=generator) * SPREADS[distribution]
        weight = 1.0 + WEIGHT_SPREAD * torch.randn(cols, generator=generator)
        return x.to(device=device, dtype=dtype), weight.to(device=device, dtype=dtype)

    def reference(self, problem: RmsNormProblem, inputs, compute_dtype: torch.dtype) -> torch.Tensor:
        return rms_norm(*inputs, compute_dtype)

    def check_inputs(self, x, weight, *, out) -> None:
        """x a [rows, cols] fp16/bf16 tensor, last dim contiguous; weight a contiguous [cols] of x's
        dtype and device; then the kit's checks (CUDA, out like x)."""
        if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.dtype not in self.dtypes.values():
            raise InputError(f"x must be a [rows, cols] {' or '.join(self.dtypes)} tensor; got {describe(x)}")
        if min(x.shape) < 1 or x.stride(-1) != 1:
            raise InputError(f"x must have rows, cols >= 1 and its last dim contiguous; got {describe(x)} "
                             f"with strides {x.stride()}")
        if not isinstance(weight, torch.Tensor) or weight.shape != x.shape[1:] or weight.stride(-1) != 1:
            raise InputError(f"weight must be a contiguous [cols] = [{x.shape[1]}] tensor; got {describe(weight)}")
        if weight.dtype != x.dtype or weight.device != x.device:
            raise InputError(f"weight is {describe(weight)}; x is {describe(x)}")
        super().check_inputs(x, weight, out=out)


FAMILY = RmsNormFamily()
__all__ = ["EPS", "FAMILY", "RmsNormProblem", "liger_rms_norm", "rms_norm", "torch_rms_norm"]
