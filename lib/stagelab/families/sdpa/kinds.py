"""The sdpa family's quantized input kinds (a stage's stages.yaml `inputs:`), one object each.

A kind says how the family's standard fp16/bf16 inputs become its kernel's (quantize), which
wrapper a built module gets (stage_kernel), the timed launch (launch) and the other launches timed
beside it as the stage's variants (launch_variants: an INT8 stage's quantizer inside the launch),
the checks that judge it (checks: its own budget, emulation-relative) and the libraries timed beside
it (contenders). The family (__init__) dispatches through QUANTIZED_KINDS. Each kind's package is
imported on first use, so importing the family pulls in neither fp8/ nor int8/.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

FP8_INPUTS = "fp8"  # e4m3 Q, K, V per (batch, head): FA3's recipe (fp8/)
INT8_INPUTS = "int8"  # int8 Q and smoothed K per block, e4m3 V per channel: SageAttention2's recipe (int8/)
QUANTIZING = "quantizing"  # an INT8 stage's launch variant: its quantizer kernels inside the timed launch


class Fp8Kind:
    """An FP8 stage: kernel(fp8_inputs, out, softmax_scale, causal), judged by fp8/budget.py."""

    name = FP8_INPUTS

    @staticmethod
    def quantize(q, k, v):
        from .fp8 import quantize_qkv

        return quantize_qkv(q, k, v)

    @staticmethod
    def stage_kernel(module, stage_id: str):
        from .fp8.kernel import Fp8StageKernel

        return Fp8StageKernel(module, stage_id)

    @classmethod
    def launch(cls, module, inputs, out: torch.Tensor, scale: float, causal: bool) -> Callable[[], None]:
        """Quantized once, outside the timed launch (FA3 times its kernel on e4m3 inputs too); the
        stage's own pre-passes (V's transpose) run inside fp8_forward and count."""
        fp8 = cls.quantize(*inputs)
        q, k, v = fp8.q, fp8.k, fp8.v

        def launch() -> None:
            module.fp8_forward(q.data, k.data, v.data, q.descale, k.descale, v.descale, out, scale, causal,
                               torch.cuda.current_stream().cuda_stream)
        return launch

    @staticmethod
    def launch_variants(module, inputs, out: torch.Tensor, scale: float, causal: bool) -> dict:
        """None: the FP8 recipe's quantizer is torch's (fp8/quantize.py), not the stage's."""
        return {}

    @staticmethod
    def checks():
        from .fp8 import check_fp8_all

        return check_fp8_all

    @staticmethod
    def contenders() -> tuple[str, ...]:
        """torch's FP8 attention: FA3's and cuDNN's (fp8/contenders.py)."""
        from .fp8.contenders import FP8_CONTENDERS

        return tuple(FP8_CONTENDERS)

    @staticmethod
    def contender(name: str, q, k, v, scale: float, causal: bool):
        from .fp8.contenders import fp8_contender

        return fp8_contender(name, q, k, v, scale, causal)


class Int8Kind:
    """An INT8 stage: kernel(int8_inputs, out, softmax_scale, causal) on the default recipe's
    operands (int8/recipe.py), judged by int8/budget.py against the recipe's float64 emulation."""

    name = INT8_INPUTS

    @staticmethod
    def quantize(q, k, v):
        from .int8 import DEFAULT_RECIPE, quantize_int8_qkv

        return quantize_int8_qkv(q, k, v, **DEFAULT_RECIPE.quantizer_args())

    @staticmethod
    def stage_kernel(module, stage_id: str):
        from .int8.kernel import Int8StageKernel

        return Int8StageKernel(module, stage_id)

    @staticmethod
    def launch(module, inputs, out: torch.Tensor, scale: float, causal: bool) -> Callable[[], None]:
        """int8_launch: quantized and V^T built once outside; the timed launch is int8_forward alone."""
        from .int8.kernel import int8_launch

        return int8_launch(module, inputs, out, scale, causal)

    @staticmethod
    def launch_variants(module, inputs, out: torch.Tensor, scale: float, causal: bool) -> dict:
        """`quantizing`: the stage's quantizer kernels inside the timed launch (int8_launch_quantizing),
        where the stage exports them (has_int8_quantize); the issue's second timing."""
        from .int8.cuda_quantize import has_cuda_quantizer
        from .int8.kernel import int8_launch_quantizing

        if not has_cuda_quantizer(module):
            return {}
        return {QUANTIZING: int8_launch_quantizing(module, inputs, out, scale, causal)}

    @staticmethod
    def checks():
        from .int8 import check_int8_all

        return check_int8_all

    @staticmethod
    def contenders() -> tuple[str, ...]:
        """SageAttention's own kernel (int8/contenders.py)."""
        from .int8.contenders import INT8_CONTENDERS

        return INT8_CONTENDERS

    @staticmethod
    def contender(name: str, q, k, v, scale: float, causal: bool):
        from .int8.contenders import int8_contender

        return int8_contender(name, q, k, v, scale, causal)


QUANTIZED_KINDS = {kind.name: kind for kind in (Fp8Kind, Int8Kind)}
