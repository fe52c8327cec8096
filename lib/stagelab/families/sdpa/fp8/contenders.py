"""PyTorch's FP8 attention as contenders of an FP8 stage (torch's experimental quantized SDPA).

`_scaled_dot_product_attention_quantized` (torch.nn.attention.experimental, torch >= 2.11) takes
e4m3 Q, K, V and their descales. Per-head descales (B, H) run FlashAttention-3's FP8 forward;
per-tensor ones (1, 1, 1, 1) run cuDNN's FP8 attention, in torch builds that have that path.
Where the installed torch lacks the function, the descaling mode or the backend, the contender
raises RuntimeError, which the timing step records as its absence, never as an error.
Quantization happens once, outside the timed call, like FA4's layout copies.

torch 2.11 runs the per-head (FA3) path only once FlashAttention-3 is activated
(`torch.nn.attention.activate_flash_attention_impl("FA3")`), which imports FA3's own package
(`flash_attn_interface`, a separate CUDA build). flash_fp8 activates it where that package is
installed, for the rest of the process: SDPA's flash backend is FA3 from then on. Where it is not
installed, that is the recorded reason.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

import torch

QUANTIZED_SDPA_MODULE = "torch.nn.attention.experimental._scaled_dot_product_attention_quantized"
QUANTIZED_SDPA = "_scaled_dot_product_attention_quantized"
# stagelab's contender name -> the DescaleType member (= the backend torch routes it to).
FP8_CONTENDERS = {"flash_fp8": "PER_HEAD", "cudnn_fp8": "PER_TENSOR"}
PER_TENSOR_SHAPE = (1, 1, 1, 1)
FA3_IMPL = "FA3"
FA3_MODULE = "flash_attn_interface"


def _activate_fa3() -> None:
    """Route torch's flash attention to FlashAttention-3, or RuntimeError saying what is missing."""
    import importlib.util

    from torch.nn import attention

    if not hasattr(attention, "activate_flash_attention_impl"):
        return  # an older torch: its quantized SDPA says itself whether it can run
    if attention.current_flash_attention_impl() == FA3_IMPL:
        return
    if importlib.util.find_spec(FA3_MODULE) is None:
        raise RuntimeError(f"flash_fp8 runs on FlashAttention-3, whose package ({FA3_MODULE}) is not installed")
    try:
        attention.activate_flash_attention_impl(FA3_IMPL)
    except Exception as exc:
        raise RuntimeError(f"activate_flash_attention_impl({FA3_IMPL!r}) failed: {type(exc).__name__}: {exc}") from exc


def _quantized_sdpa():
    """torch's quantized SDPA module, or RuntimeError naming the torch that lacks it."""
    try:
        module = importlib.import_module(QUANTIZED_SDPA_MODULE)
    except ImportError as exc:
        raise RuntimeError(f"torch {torch.__version__} has no FP8 attention ({QUANTIZED_SDPA_MODULE}): {exc}") from exc
    if not hasattr(module, QUANTIZED_SDPA) or not hasattr(module, "DescaleType"):
        raise RuntimeError(f"torch {torch.__version__}'s {QUANTIZED_SDPA_MODULE} lacks {QUANTIZED_SDPA}/DescaleType")
    return module


def _per_tensor(x: torch.Tensor, name: str) -> tuple[torch.Tensor, torch.Tensor]:
    """e4m3 data and a (1, 1, 1, 1) descale from the whole tensor's amax: the quantizer's own rules
    (zero tensor -> scale 1, saturation), with the tensor seen as one head."""
    from .quantize import quantize_e4m3

    whole = quantize_e4m3(x.reshape(1, 1, -1, x.shape[-1]), name)
    return whole.data.reshape(x.shape), whole.descale.reshape(PER_TENSOR_SHAPE)


def _quantize(mode: str, q, k, v) -> tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]:
    """(e4m3 q, k, v), (their descales) in the shape the descaling mode asks for."""
    if mode == "PER_TENSOR":
        pairs = [_per_tensor(t, name) for name, t in (("q", q), ("k", k), ("v", v))]
        return tuple(p[0] for p in pairs), tuple(p[1] for p in pairs)
    from .quantize import quantize_qkv

    fp8 = quantize_qkv(q, k, v)
    parts = (fp8.q, fp8.k, fp8.v)
    return tuple(t.data for t in parts), tuple(t.descale.contiguous() for t in parts)


def fp8_contender(name: str, q, k, v, scale: float, causal: bool) -> Callable[[], None]:
    """torch's FP8 attention on these inputs, quantized once; RuntimeError where it cannot run."""
    module = _quantized_sdpa()
    mode = FP8_CONTENDERS[name]
    descale_type = getattr(module.DescaleType, mode, None)
    if descale_type is None:
        raise RuntimeError(f"torch {torch.__version__}'s FP8 attention has no {mode} descaling (the {name} backend)")
    if name == "flash_fp8":
        _activate_fa3()
    (q8, k8, v8), (q_descale, k_descale, v_descale) = _quantize(mode, q, k, v)
    attention = getattr(module, QUANTIZED_SDPA)

    def run() -> None:
        attention(q8, k8, v8, is_causal=causal, scale=scale, q_descale=q_descale, k_descale=k_descale,
                  v_descale=v_descale, q_descale_type=descale_type, k_descale_type=descale_type,
                  v_descale_type=descale_type)

    try:
        run()  # fails fast, before timing, where this torch build or GPU has no such backend
        torch.cuda.synchronize()
    except Exception as exc:
        raise RuntimeError(f"{name} cannot run this problem: {type(exc).__name__}: {exc}") from exc
    return run
