"""PyTorch's SDPA backends as contenders, each pinned to one backend."""

from __future__ import annotations

from collections.abc import Callable

import torch

# stagelab's contender name -> torch.nn.attention.SDPBackend member.
SDPA_BACKENDS = {
    "flash": "FLASH_ATTENTION",
    "efficient": "EFFICIENT_ATTENTION",
    "cudnn": "CUDNN_ATTENTION",
    "math": "MATH",
}


def sdpa_backend_context(backend: str):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel([getattr(SDPBackend, SDPA_BACKENDS[backend])])


def sdpa_arguments(q: torch.Tensor, k: torch.Tensor, causal: bool) -> dict:
    """The keyword arguments that make torch's SDPA compute the family's problem: `enable_gqa` where K/V
    have fewer heads (torch >= 2.5), and where the lengths differ a bottom-right causal mask
    (torch's `is_causal` aligns top-left, so the last queries would miss keys they must see)."""
    arguments: dict = {}
    if k.shape[1] != q.shape[1]:
        arguments["enable_gqa"] = True
    if causal and k.shape[2] != q.shape[2]:
        from torch.nn.attention.bias import causal_lower_right

        arguments["attn_mask"] = causal_lower_right(q.shape[2], k.shape[2])
    else:
        arguments["is_causal"] = causal
    return arguments


def sdpa_output(backend: str, q, k, v, scale: float, causal: bool) -> torch.Tensor:
    """torch's SDPA pinned to one backend, on q, k, v as they are (a bshd view stays a view)."""
    import torch.nn.functional as F

    arguments = sdpa_arguments(q, k, causal)
    with sdpa_backend_context(backend):
        try:
            return F.scaled_dot_product_attention(q, k, v, scale=scale, **arguments)
        except TypeError as exc:  # a torch before 2.5 has no enable_gqa
            raise RuntimeError(f"torch {torch.__version__} SDPA cannot take {sorted(arguments)}: {exc}") from exc


def sdpa_contender(backend: str, q, k, v, scale: float, causal: bool) -> Callable[[], None]:
    """PyTorch SDPA pinned to one backend; raises RuntimeError if it cannot run these inputs."""

    def run() -> None:
        sdpa_output(backend, q, k, v, scale, causal)

    run()  # fails fast, before timing, if the backend is unavailable here
    if q.is_cuda:
        torch.cuda.synchronize()
    return run


# FlashAttention-4 (CuTe DSL; an sm90 forward path): optional, installed with `stagelab[fa4]`.
FA4 = "fa4"
# Where an offline GPU machine has FA4 installed with `pip --target` (tools/fa4_wheels.sh): a
# site directory, not a plain path entry, because the cutlass package arrives through a .pth file.
FA4_SITE_ENV = "STAGELAB_FA4_SITE"


def add_fa4_site() -> None:
    """Process the FA4 site directory named by STAGELAB_FA4_SITE (its .pth files included)."""
    import os
    import site

    site_dir = os.environ.get(FA4_SITE_ENV)
    if site_dir:
        site.addsitedir(site_dir)


def _fa4_function():
    add_fa4_site()
    try:
        from flash_attn.cute import flash_attn_func
    except ImportError as exc:
        raise RuntimeError(f"flash-attn-4 is not installed (pip install 'stagelab[fa4]'): {exc}") from exc
    return flash_attn_func


def fa4_output(q4, k4, v4, scale: float, causal: bool) -> torch.Tensor:
    """FA4 on [batch, seq_len, heads, head_dim] tensors (K/V with their own heads and length; causal
    aligned bottom-right, as the family's); its output in that layout."""
    result = _fa4_function()(q4, k4, v4, softmax_scale=scale, causal=causal)
    return result[0] if isinstance(result, tuple) else result  # (out, lse) in the versions that return both


def fa4_contender(q, k, v, scale: float, causal: bool) -> Callable[[], None]:
    """FlashAttention-4's forward on the same inputs; RuntimeError (recorded as unavailable,
    never an error) where the package is not installed or cannot run here."""
    _fa4_function()
    # A bshd problem's views are FA4's layout already (no copy); a bhsd one is copied once, outside the timing.
    q4, k4, v4 = (t.transpose(1, 2).contiguous() for t in (q, k, v))

    def run() -> None:
        fa4_output(q4, k4, v4, scale, causal)

    try:
        run()  # compiles on first use (CuTe DSL JIT) and fails fast where it cannot run
        torch.cuda.synchronize()
    except Exception as exc:
        raise RuntimeError(f"flash-attn-4 cannot run this problem: {type(exc).__name__}: {exc}") from exc
    return run


def contender_output(name: str, q, k, v, scale: float, causal: bool) -> torch.Tensor:
    """One library contender's output as [B, H, S, D] (for checking the contenders themselves)."""
    if name == FA4:
        return fa4_output(*(t.transpose(1, 2).contiguous() for t in (q, k, v)), scale, causal).transpose(1, 2)
    return sdpa_output(name, q, k, v, scale, causal)


def contender(name: str, q, k, v, scale: float, causal: bool) -> Callable[[], None]:
    if name == FA4:
        return fa4_contender(q, k, v, scale, causal)
    return sdpa_contender(name, q, k, v, scale, causal)
