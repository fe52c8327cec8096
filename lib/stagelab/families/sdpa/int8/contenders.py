"""SageAttention as the contender of an INT8 stage: the package's own kernel, where installed.

`sageattention` 1.0.6 (pip; a pure-Python wheel, `stagelab[sage]`, in the wheelhouse) is Triton:
Q and K smoothed and quantized to int8 per block (Q 128 rows, K 64 keys), P.V in fp16, its output
in the inputs' dtype. `sageattn(q, k, v, tensor_layout="HND", is_causal, sm_scale, smooth_k=True)`
reads each tensor's strides, so the family's bhsd tensors and bshd views go in as they are, and it
takes grouped-query attention (K/V heads dividing Q's).

What it cannot take, the contender refuses with RuntimeError (the timing step records the reason
among the unavailable contenders, never as an error): the package missing or failing to import,
causal attention with Sq != Sk (its causal kernel asserts equal lengths: its mask is aligned
top-left, the family's bottom-right), a head_dim other than 64, 96 or 128, and any failure of the
first call, made before timing.

`sageattn` smooths K in place (k -= mean): the contender gives it a private copy of K, made once
outside the timed call, so the family's inputs are never written. After the first call the copy's
mean is ~0 and each call still computes and subtracts it, as a user's call would.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

SAGEATTENTION = "sageattention"
INT8_CONTENDERS = (SAGEATTENTION,)
SAGEATTENTION_HEAD_DIMS = (64, 96, 128)
HND = "HND"  # sageattn's name for [batch, heads, seq_len, head_dim] (read through the tensors' strides)


def _sageattn() -> Callable:
    try:
        from sageattention import sageattn
    except Exception as exc:  # ImportError, or a Triton/torch mismatch raised while importing its kernels
        raise RuntimeError(f"sageattention is not installed or cannot be imported (pip install 'stagelab[sage]'): "
                           f"{type(exc).__name__}: {exc}") from exc
    return sageattn


def sageattention_refusal(q: torch.Tensor, k: torch.Tensor, causal: bool) -> str | None:
    """Why sageattn cannot compute the family's problem on these inputs, or None."""
    if causal and q.shape[2] != k.shape[2]:
        return (f"sageattention's causal kernel needs equal lengths (its mask is aligned top-left); "
                f"got {q.shape[2]} queries and {k.shape[2]} keys")
    if q.shape[-1] not in SAGEATTENTION_HEAD_DIMS:
        return f"sageattention takes head_dim {list(SAGEATTENTION_HEAD_DIMS)}, not {q.shape[-1]}"
    return None


def _runnable_sageattn(q: torch.Tensor, k: torch.Tensor, causal: bool) -> Callable:
    """sageattn, or RuntimeError saying why it cannot compute this problem here."""
    sageattn = _sageattn()
    refusal = sageattention_refusal(q, k, causal)
    if refusal:
        raise RuntimeError(refusal)
    return sageattn


def sageattention_output(q, k, v, scale: float, causal: bool) -> torch.Tensor:
    """sageattn's output [B, H, S, D] (for checking the contender itself); K is copied first."""
    return _runnable_sageattn(q, k, causal)(q, k.clone(), v, tensor_layout=HND, is_causal=causal, sm_scale=scale,
                                            smooth_k=True)


def sageattention_contender(q, k, v, scale: float, causal: bool) -> Callable[[], None]:
    """SageAttention's kernel on the same inputs; RuntimeError where it cannot run here."""
    sageattn = _runnable_sageattn(q, k, causal)
    k_own = k.clone()  # sageattn writes K (k -= its mean); clone keeps a bshd view's strides

    def run() -> None:
        sageattn(q, k_own, v, tensor_layout=HND, is_causal=causal, sm_scale=scale, smooth_k=True)

    try:
        run()  # compiles its Triton kernels on first use and fails fast where it cannot run
        if q.is_cuda:
            torch.cuda.synchronize()
    except Exception as exc:
        raise RuntimeError(f"sageattention cannot run this problem: {type(exc).__name__}: {exc}") from exc
    return run


def int8_contender(name: str, q, k, v, scale: float, causal: bool) -> Callable[[], None]:
    if name != SAGEATTENTION:
        raise RuntimeError(f"no INT8 contender {name!r}; known: {list(INT8_CONTENDERS)}")
    return sageattention_contender(q, k, v, scale, causal)
