"""The sdpa family: scaled-dot-product attention forward, [batch, heads, seq_len, head_dim].

Contenders are PyTorch's SDPA backends and, where installed, FlashAttention-4; the reference is attention in float64;
the absolute tolerance follows FlashAttention-3's tests (rounding at magnitude 0.3).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import torch

from ...family import Family, KernelFn
from .contenders import FA4, SDPA_BACKENDS
from .contenders import contender as library_contender
from .kernel import KERNEL_DTYPE_CODES, SUPPORTED_TORCH_DTYPES, StageKernel
from .reference import attention, default_scale
from .shapes import SUPPORTED_HEAD_DIMS, Shape, parse_shapes

# FlashAttention-3's tests set atol from the rounding error at this output magnitude:
# attention outputs of unit-normal inputs are averages of V rows, mostly well under 1.
FA3_ATOL_MAGNITUDE = 0.3


class SdpaFamily(Family):
    name = "sdpa"
    dtypes = SUPPORTED_TORCH_DTYPES
    contenders = (*SDPA_BACKENDS, FA4)
    default_mission = {"shape": [2, 8, 512, 64], "causal": False}
    knob_example = '{"BLOCK_N": 32}'
    sanitize_problems = ({"shape": [1, 2, 77, 64], "causal": [False, True]},
                         {"shape": [1, 1, 333, 128], "causal": [False, True]})
    long_params = "params/long.yaml"

    def parse_problem(self, where: str, entry: Any) -> list[Shape]:
        return parse_shapes(where, entry)

    def make_inputs(self, problem: Shape, dtype: torch.dtype, seed: int, device) -> tuple[torch.Tensor, ...]:
        """Fresh standard-normal q, k, v; the generator mixes seed and shape so no two checks share data."""
        generator = torch.Generator(device="cpu").manual_seed(hash((seed, problem.dims, problem.causal)) & (2**63 - 1))
        tensors = [torch.randn(problem.dims, generator=generator, dtype=torch.float32) for _ in range(3)]
        return tuple(t.to(device=device, dtype=dtype) for t in tensors)

    def reference(self, problem: Shape, inputs, compute_dtype: torch.dtype) -> torch.Tensor:
        q, k, v = inputs
        return attention(q, k, v, default_scale(problem.head_dim), problem.causal, compute_dtype)

    def atol_magnitude(self, reference: torch.Tensor) -> float:
        return FA3_ATOL_MAGNITUDE

    def call(self, kernel: KernelFn, problem: Shape, inputs, out: torch.Tensor) -> None:
        q, k, v = inputs
        kernel(q, k, v, out, default_scale(problem.head_dim), problem.causal)

    def stage_kernel(self, module: ModuleType, stage_id: str) -> StageKernel:
        return StageKernel(module, stage_id)

    def module_launch(self, module: ModuleType, problem: Shape, inputs, out: torch.Tensor):
        q, k, v = inputs
        scale = default_scale(problem.head_dim)

        def launch() -> None:  # the stream is read at call time, so graph capture sees its own
            module.forward(q, k, v, out, scale, problem.causal, torch.cuda.current_stream().cuda_stream)
        return launch

    def contender(self, name: str, problem: Shape, inputs):
        q, k, v = inputs
        return library_contender(name, q, k, v, default_scale(problem.head_dim), problem.causal)

    def dynamic_shared_memory(self, module: ModuleType, template_args: list[str]) -> int | None:
        """Kernels are templated <dtype, head_dim, ...>: the first argument names the dtype,
        the first 64 or 128 the head dimension."""
        query = getattr(module, "dynamic_shared_memory_bytes", None)
        head_dim = next((int(a) for a in template_args if a in {str(d) for d in SUPPORTED_HEAD_DIMS}), None)
        if query is None or head_dim is None or not template_args or template_args[0] not in KERNEL_DTYPE_CODES:
            return None
        return int(query(head_dim, KERNEL_DTYPE_CODES[template_args[0]]))


FAMILY = SdpaFamily()
__all__ = ["FAMILY", "Shape", "StageKernel", "attention", "default_scale", "SUPPORTED_HEAD_DIMS"]
