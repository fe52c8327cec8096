"""The silu family: what the lab needs to judge its stages.

The skeleton's kernel is SiLU, out = x * sigmoid(x), elementwise over [rows, cols] fp16/bf16:
replace the reference, the inputs and the contender with your kernel's, and the stages with yours.
TensorFamily (stagelab.core.family_kit) does the rest: `{shape: [rows, cols]}` problems, calling
a built stage as `forward(*inputs, out, stream)`, timing the contenders beside it.
"""

import torch

from stagelab.core.family_kit import TensorFamily


def silu(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The function with every operation in `dtype`: float64 is the truth, the storage dtype the
    plain low-precision implementation whose error sets the budget."""
    x = x.to(dtype)
    return x * torch.sigmoid(x)


class SiluFamily(TensorFamily):
    name = "silu"
    default_mission = {"shape": [8192, 8192]}
    acceptance_params = "params/acceptance.yaml"
    try_params = "params/acceptance.yaml"
    # The sigmoid's negate, exp, add and divide, then the multiply.
    flops_per_element = 5
    contender_functions = {"torch": torch.nn.functional.silu}
    # Small, odd problems compute-sanitizer watches: a partial block, and more than one block.
    sanitize_problems = ({"shape": [3, 77]}, {"shape": [5, 1031]})

    def make_inputs(self, problem, dtype, seed, device, distribution="normal"):
        self.require_distribution(distribution)
        generator = torch.Generator().manual_seed(seed)
        return (torch.randn(problem.shape, generator=generator).to(device=device, dtype=dtype),)

    def reference(self, problem, inputs, compute_dtype):
        return silu(inputs[0], compute_dtype)


FAMILY = SiluFamily()
