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


def sdpa_contender(backend: str, q, k, v, scale: float, causal: bool) -> Callable[[], None]:
    """PyTorch SDPA pinned to one backend; raises RuntimeError if it cannot run these inputs."""
    import torch.nn.functional as F

    def run() -> None:
        with sdpa_backend_context(backend):
            F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)

    run()  # fails fast, before timing, if the backend is unavailable here
    torch.cuda.synchronize()
    return run
