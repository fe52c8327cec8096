"""The sdpa family: scaled-dot-product attention forward, Q [batch, heads, seq_len, head_dim], K and V
[batch, kv_heads, kv_seq_len, head_dim], bhsd or strided bshd (shapes.py).

Contenders are PyTorch's SDPA backends and, where installed, FlashAttention-4; the reference is attention in float64;
the absolute tolerance follows FlashAttention-3's tests (rounding at magnitude 0.3). Quantized stages (stages.yaml
`inputs: fp8` or `inputs: int8`) take their kind's operands and are judged by their kind's budget (kinds.py).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import torch

from ...core.family import DEFAULT_DISTRIBUTION, Family, KernelFn
from ...core.launch_plans import DeviceModel
from ...core.supports import declared_supports
from .contenders import FA4, SDPA_BACKENDS
from .contenders import contender as library_contender
from .distributions import DISTRIBUTIONS, QUANTIZED_ONLY
from .inputs import FA3_ATOL_MAGNITUDE, FAMILY_NAME, call_plain, make_inputs
from .kernel import DTYPE_CODES, KERNEL_DTYPE_CODES, SUPPORTED_TORCH_DTYPES, StageKernel
from .kinds import FP8_INPUTS, INT8_INPUTS, QUANTIZED_KINDS
from .reference import attention, default_scale
from .shapes import BSHD, PROBLEM_FEATURES, SUPPORTED_HEAD_DIMS, Shape, parse_shapes


class SdpaFamily(Family):
    name = FAMILY_NAME
    dtypes = SUPPORTED_TORCH_DTYPES
    contenders = (*SDPA_BACKENDS, FA4)
    default_mission = {"shape": [2, 8, 512, 64], "causal": False}
    knob_example = '{"BLOCK_N": 32}'
    sanitize_problems = ({"shape": [1, 2, 77, 64], "causal": [False, True]},
                         {"shape": [1, 1, 333, 128], "causal": [False, True]})
    long_params = "params/long.yaml"
    input_kinds = tuple(QUANTIZED_KINDS)  # FP8_INPUTS, INT8_INPUTS (kinds.py)
    # fp8/ and int8/ are imported on their kinds' paths only; the INT8 recipe reuses fp8/'s e4m3 helpers.
    kind_packages = {"fp8": (FP8_INPUTS, INT8_INPUTS), "int8": (INT8_INPUTS,)}
    distributions = DISTRIBUTIONS
    input_path = ("inputs.make_inputs", "distributions.draw")
    problem_features = PROBLEM_FEATURES
    report_params = ("acceptance", "long")
    # Tensor-core paths (HGMMA wgmma, HMMA mma.sync), copies (UTMALDG TMA, LDGSTS cp.async), local
    # memory (LDL/STL), mbarrier traffic (SYNCS) and register reallocation (USETMAXREG).
    watched_opcodes = ("HGMMA", "HMMA", "UTMALDG", "LDGSTS", "LDL", "STL", "SYNCS", "USETMAXREG")
    notebook_sanitize_problems = "small odd problems, causal and not"
    notebook_profile_focus = "tensor pipe, FLOP/s, DRAM, L2, occupancy, top stalls, bank conflicts"

    def parse_problem(self, where: str, entry: Any) -> list[Shape]:
        return parse_shapes(where, entry)

    def make_inputs(self, problem: Shape, dtype: torch.dtype, seed: int, device,
                    distribution: str = DEFAULT_DISTRIBUTION) -> tuple[torch.Tensor, ...]:
        """Fresh q, k, v from a named distribution (distributions.py; standard normal by default);
        a bshd problem gets [B, H, S, D] views of [B, S, H, D] memory (inputs.make_inputs)."""
        self.require_distribution(distribution)
        return make_inputs(problem, dtype, seed, device, distribution)

    def distributions_for(self, input_kind: str = "") -> tuple[str, ...]:
        if input_kind in QUANTIZED_KINDS:
            return self.distributions
        return tuple(d for d in self.distributions if d not in QUANTIZED_ONLY)

    def reference(self, problem: Shape, inputs, compute_dtype: torch.dtype) -> torch.Tensor:
        q, k, v = inputs
        return attention(q, k, v, default_scale(problem.head_dim), problem.causal, compute_dtype)

    def atol_magnitude(self, reference: torch.Tensor) -> float:
        return FA3_ATOL_MAGNITUDE

    def call(self, kernel: KernelFn, problem: Shape, inputs, out: torch.Tensor, input_kind: str = "") -> None:
        """A quantized stage gets its kind's operands (kinds.py), quantized from the standard inputs."""
        self.require_input_kind(input_kind)
        if input_kind:
            kernel(QUANTIZED_KINDS[input_kind].quantize(*inputs), out, default_scale(problem.head_dim), problem.causal)
            return
        call_plain(kernel, problem, inputs, out)

    def stage_kernel(self, module: ModuleType, stage_id: str, input_kind: str = ""):
        self.require_input_kind(input_kind)
        if input_kind:
            return QUANTIZED_KINDS[input_kind].stage_kernel(module, stage_id)
        return StageKernel(module, stage_id, declared_supports(self, stage_id))

    def module_launch(self, module: ModuleType, problem: Shape, inputs, out: torch.Tensor, input_kind: str = ""):
        """The timed launch. A quantized stage's (kinds.py) is timed with the caller bringing 8-bit
        inputs: its kind quantizes once, outside the returned launch."""
        self.require_input_kind(input_kind)
        scale = default_scale(problem.head_dim)
        if input_kind:
            return QUANTIZED_KINDS[input_kind].launch(module, inputs, out, scale, problem.causal)
        q, k, v = inputs

        def launch() -> None:  # the stream is read at call time, so graph capture sees its own
            module.forward(q, k, v, out, scale, problem.causal, torch.cuda.current_stream().cuda_stream)
        return launch

    def launch_variants(self, module: ModuleType, problem: Shape, inputs, out: torch.Tensor, input_kind: str = ""):
        """An INT8 stage's `quantizing` launch: its quantizer kernels on the standard inputs inside the
        timed launch (kinds.py); none for the other kinds."""
        self.require_input_kind(input_kind)
        kind = QUANTIZED_KINDS.get(input_kind)
        if kind is None:
            return {}
        return kind.launch_variants(module, inputs, out, default_scale(problem.head_dim), problem.causal)

    def kind_checks(self, input_kind: str):
        """Quantized stages against their kind's budget (emulation-relative: fp8/budget.py,
        int8/budget.py), the others as every family's."""
        kind = QUANTIZED_KINDS.get(input_kind)
        return kind.checks() if kind is not None else None

    def contender(self, name: str, problem: Shape, inputs):
        q, k, v = inputs
        scale = default_scale(problem.head_dim)
        for kind in QUANTIZED_KINDS.values():
            if name in kind.contenders():
                return kind.contender(name, q, k, v, scale, problem.causal)
        return library_contender(name, q, k, v, scale, problem.causal)

    def kind_contenders(self, input_kind: str) -> tuple[str, ...]:
        """FP8 stages also meet torch's FP8 attention (FA3's and cuDNN's; fp8/contenders.py), INT8
        stages SageAttention's kernel (int8/contenders.py)."""
        kind = QUANTIZED_KINDS.get(input_kind)
        return kind.contenders() if kind is not None else ()

    def dynamic_shared_memory(self, module: ModuleType, template_args: list[str]) -> int | None:
        """Kernels are templated <dtype, head_dim, ...>: the first argument names the dtype,
        the first 64 or 128 the head dimension."""
        query = getattr(module, "dynamic_shared_memory_bytes", None)
        head_dim = next((int(a) for a in template_args if a in {str(d) for d in SUPPORTED_HEAD_DIMS}), None)
        if query is None or head_dim is None or not template_args or template_args[0] not in KERNEL_DTYPE_CODES:
            return None
        return int(query(head_dim, KERNEL_DTYPE_CODES[template_args[0]]))

    # -- launch plans: the persistent stages' host plans, exported by the binding (kernels/sdpa) ------
    def declared_launch_plans(self, module: ModuleType) -> tuple[str, ...]:
        return tuple(module.launch_plans())

    def launch_plan_of(self, module: ModuleType, problem: Shape, dtype: str, device: DeviceModel) -> str:
        """The binding's host plan; the dtype matters only through K/V's bytes (what fits in L2)."""
        return module.launch_plan(problem.batch, problem.heads, problem.kv_heads, problem.seq_len, problem.kv_seq_len,
                                  problem.head_dim, DTYPE_CODES[dtype], problem.causal, problem.layout == BSHD,
                                  device.sms, device.l2_bytes)

    def last_launch_plan(self, module: ModuleType) -> str:
        return module.last_launch_plan()


FAMILY = SdpaFamily()
__all__ = ["FAMILY", "FP8_INPUTS", "INT8_INPUTS", "Shape", "StageKernel", "attention", "default_scale",
           "SUPPORTED_HEAD_DIMS"]
