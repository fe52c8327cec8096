"""The rmsnorm family: out[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + EPS) * weight.

The lab's example family: x is [rows, cols] row-major fp16/bf16, weight [cols] in the same dtype,
math in fp32. Every stage's module has `forward(x, weight, out, eps, stream)` and `stage_config()`
(kernels/rmsnorm/binding.cpp for CUDA stages, the stage file itself for Triton ones).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ...core.distributions import DEFAULT_DISTRIBUTION, input_generator
from ...core.errors import InputError
from ...core.family import BuiltKernel, Family
from ..softmax import Rows as _Rows, parse_rows, validate_input

EPS = 1e-6  # Llama's
# Per element: a square added to the row's sum, then a multiply by rstd and one by the weight.
FLOPS_PER_ELEMENT = 4
# Gains near 1, as a trained model's are.
WEIGHT_SPREAD = 0.1
# x ~ N(0, spread^2) per named distribution. `large`: squares up to ~(5 * 1000)^2, far past fp16's
# 65504, so only a statistic kept in fp32 survives; `tiny`: a mean square of 1e-6 = EPS, so eps counts.
SPREADS = {DEFAULT_DISTRIBUTION: 1.0, "large": 1000.0, "tiny": 1e-3}


@dataclass(frozen=True, order=True)
class Rows(_Rows):
    def flops(self) -> float:
        return float(FLOPS_PER_ELEMENT * self.rows * self.cols)

    def bytes_moved(self, element_bytes: int) -> float:
        """The floor: x read once, out written once, the weight read once."""
        return float((2 * self.rows + 1) * self.cols * element_bytes)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """RMSNorm as a model layer computes it in `dtype` (Hugging Face's LlamaRMSNorm): the statistic in
    float32 (float64 for the truth), x * rstd rounded to `dtype`, then times the weight in `dtype`."""
    stat = x.to(torch.promote_types(dtype, torch.float32))
    normed = stat * torch.rsqrt(stat.pow(2).mean(-1, keepdim=True) + EPS)
    return normed.to(dtype) * weight.to(dtype)


def validate_inputs(x, weight) -> None:
    """InputError naming what is wrong, before a launch (the binding's checks are only the backstop)."""
    validate_input(x)  # a [rows, cols] fp16/bf16 CUDA tensor, the last dim contiguous
    if not isinstance(weight, torch.Tensor) or weight.shape != x.shape[1:] or weight.stride(-1) != 1:
        raise InputError(f"weight must be a contiguous [cols] = [{x.shape[1]}] tensor")
    if weight.dtype != x.dtype or weight.device != x.device:
        raise InputError(f"weight is {weight.dtype} on {weight.device}; x is {x.dtype} on {x.device}")


def _launch(module, x: torch.Tensor, weight: torch.Tensor, out: torch.Tensor) -> None:
    module.forward(x, weight, out, EPS, torch.cuda.current_stream(x.device).cuda_stream)


def _liger_rms_norm():
    try:
        from liger_kernel.ops.rms_norm import LigerRMSNormFunction
    except ImportError as exc:
        raise RuntimeError(f"liger: Liger-Kernel is not installed (pip install stagelab[liger]): {exc}") from exc
    # "gemma" casting: every operation in fp32, one rounding of the output, as the stages compute.
    return lambda x, weight: LigerRMSNormFunction.apply(x, weight, EPS, 0.0, "gemma")


class RmsNormKernel(BuiltKernel):
    """A built stage: `kernel(x, weight)` returns the normalized rows; `.into(x, weight, out)` fills out."""

    def into(self, x: torch.Tensor, weight: torch.Tensor, out: torch.Tensor) -> None:
        validate_inputs(x, weight)
        if out.shape != x.shape or out.dtype != x.dtype or out.device != x.device or out.stride(-1) != 1:
            raise InputError("out must have x's shape, dtype and device, last dim contiguous")
        _launch(self.module, x, weight, out)

    def __call__(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        self.into(x, weight, out)
        return out


class RmsNormFamily(Family):
    name = "rmsnorm"
    dtypes = {"float16": torch.float16, "bfloat16": torch.bfloat16}
    contenders = ("torch", "liger")
    default_mission = {"shape": [16384, 4096]}
    throughput_unit = "GB/s"
    acceptance_params = "params/rmsnorm-acceptance.yaml"
    try_params = "params/rmsnorm-try.yaml"
    long_params = "params/rmsnorm-long.yaml"
    report_params = ("rmsnorm-acceptance", "rmsnorm-long")
    knob_example = '{"BLOCK_THREADS": 128}'
    # A row narrower than a warp, and one wider than a block's stride with an odd width.
    sanitize_problems = ({"shape": [5, 7]}, {"shape": [3, 4097]})
    distributions = tuple(SPREADS)

    def parse_problem(self, where: str, entry) -> list[Rows]:
        return [Rows(p.rows, p.cols) for p in parse_rows(where, entry)]

    def make_inputs(self, problem: Rows, dtype: torch.dtype, seed: int, device,
                    distribution: str = DEFAULT_DISTRIBUTION) -> tuple[torch.Tensor, torch.Tensor]:
        self.require_distribution(distribution)
        generator = input_generator((seed, problem.rows, problem.cols), distribution)
        x = torch.randn(problem.rows, problem.cols, generator=generator) * SPREADS[distribution]
        weight = 1.0 + WEIGHT_SPREAD * torch.randn(problem.cols, generator=generator)
        return x.to(device=device, dtype=dtype), weight.to(device=device, dtype=dtype)

    def reference(self, problem: Rows, inputs, compute_dtype: torch.dtype) -> torch.Tensor:
        return rms_norm(*inputs, compute_dtype)

    def atol_magnitude(self, reference: torch.Tensor) -> float:
        return float(reference.abs().max().item())

    def call(self, kernel, problem: Rows, inputs, out: torch.Tensor, input_kind: str = "") -> None:
        self.require_input_kind(input_kind)
        kernel(*inputs, out)

    def stage_kernel(self, module, stage_id: str, input_kind: str = "") -> RmsNormKernel:
        self.require_input_kind(input_kind)
        return RmsNormKernel(module, stage_id)

    def module_launch(self, module, problem: Rows, inputs, out: torch.Tensor, input_kind: str = ""):
        self.require_input_kind(input_kind)
        return lambda: _launch(module, *inputs, out)  # the stream is read at call time, as graph capture needs

    def contender(self, name: str, problem: Rows, inputs):
        x, weight = inputs
        if name == "torch":
            run = lambda: torch.nn.functional.rms_norm(x, (x.shape[-1],), weight, EPS)  # noqa: E731
        elif name == "liger":
            liger = _liger_rms_norm()
            run = lambda: liger(x, weight)  # noqa: E731
        else:
            raise RuntimeError(f"unknown rmsnorm contender {name!r}; known: {list(self.contenders)}")
        run()  # fails here, before timing, where it cannot run these inputs
        torch.cuda.synchronize()
        return run


FAMILY = RmsNormFamily()
__all__ = ["EPS", "FAMILY", "RmsNormKernel", "Rows", "rms_norm", "validate_inputs"]
