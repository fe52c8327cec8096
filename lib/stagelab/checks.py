"""Correctness: a float64 reference and FlashAttention-3's error budget.

A kernel passes a check when, on fresh random inputs,

    max|out - ref| <= 2 * max|out_lowprec - ref| + atol

where ref is attention in float64 and out_lowprec is plain attention computed
in the input dtype (what a straightforward fp16/bf16 implementation gets
wrong), atol is the dtype's own rounding at the output's magnitude, nothing
non-finite appears, and a second launch on the same inputs gives the same bits.
The output is poisoned with NaN before each launch, so an element the kernel
never wrote fails as non-finite.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass

import torch

from .params import Shape
from .sdpa import KernelFn, default_scale

TORCH_DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16}
# Attention scores of one chunk kept at most this large (elements), so the
# float64 reference fits in memory at S=8192 too.
_REFERENCE_CHUNK_ELEMENTS = 1 << 27


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, causal: bool,
              compute_dtype: torch.dtype) -> torch.Tensor:
    """softmax(q k^T * scale + mask) v, every op in compute_dtype, chunked over batch*heads."""
    b, h, s, d = q.shape
    qf, kf, vf = (t.reshape(b * h, s, d).to(compute_dtype) for t in (q, k, v))
    out = torch.empty((b * h, s, d), dtype=compute_dtype, device=q.device)
    rows_per_chunk = max(1, _REFERENCE_CHUNK_ELEMENTS // (s * s))
    mask = None
    if causal:
        mask = torch.ones((s, s), dtype=torch.bool, device=q.device).triu(diagonal=1)
    for start in range(0, b * h, rows_per_chunk):
        sl = slice(start, start + rows_per_chunk)
        scores = torch.matmul(qf[sl], kf[sl].transpose(-1, -2)) * scale
        if mask is not None:
            scores = scores.masked_fill(mask, float("-inf"))
        out[sl] = torch.matmul(torch.softmax(scores, dim=-1), vf[sl])
    return out.reshape(b, h, s, d)


def rounding_atol(ref: torch.Tensor, dtype: torch.dtype) -> float:
    """FA3's atol: twice the error of one round trip through the dtype at magnitude ~0.3."""
    ref_low = ref.to(dtype)
    return 2 * (ref_low + 0.3 - 0.3 - ref_low).abs().max().item()


def make_inputs(shape: Shape, dtype: torch.dtype, seed: int, device: torch.device | str):
    """Fresh standard-normal q, k, v; the generator mixes seed and shape so no two checks share data."""
    generator = torch.Generator(device="cpu").manual_seed(hash((seed, shape.dims, shape.causal)) & (2**63 - 1))
    tensors = [torch.randn(shape.dims, generator=generator, dtype=torch.float32) for _ in range(3)]
    return [t.to(device=device, dtype=dtype) for t in tensors]


@dataclass
class CheckResult:
    shape: str
    causal: bool
    dtype: str
    seed: int
    max_abs_err: float
    lowprec_err: float
    atol: float
    budget: float
    err_budget_ratio: float
    nonfinite: int
    run_to_run_max_diff: float
    passed: bool
    reason: str

    def as_row(self) -> dict:
        return asdict(self)


def _launch_poisoned(kernel: KernelFn, q, k, v, scale: float, causal: bool) -> torch.Tensor:
    out = torch.full_like(q, float("nan"))
    kernel(q, k, v, out, scale, causal)
    if out.device.type == "cuda":
        torch.cuda.synchronize(out.device)
    return out


def check_shape(kernel: KernelFn, shape: Shape, dtype_name: str, seed: int,
                device: torch.device | str) -> CheckResult:
    """One shape, one dtype, one seed: two poisoned launches judged against the budget."""
    dtype = TORCH_DTYPES[dtype_name]
    q, k, v = make_inputs(shape, dtype, seed, device)
    scale = default_scale(shape.head_dim)
    ref = attention(q, k, v, scale, shape.causal, torch.float64)
    lowprec = attention(q, k, v, scale, shape.causal, dtype)
    lowprec_err = (lowprec.double() - ref).abs().max().item()
    atol = rounding_atol(ref, dtype)
    budget = 2 * lowprec_err + atol

    first = _launch_poisoned(kernel, q, k, v, scale, shape.causal)
    second = _launch_poisoned(kernel, q, k, v, scale, shape.causal)
    nonfinite = int((~torch.isfinite(first)).sum().item() + (~torch.isfinite(second)).sum().item())
    err = (first.double() - ref).abs()
    max_err = float("inf") if nonfinite else err.max().item()
    both_finite = torch.isfinite(first) & torch.isfinite(second)
    run_diff = (first.double() - second.double()).abs()[both_finite].max().item() if both_finite.any() else 0.0

    reasons = []
    if nonfinite:
        reasons.append(f"{nonfinite} non-finite or unwritten output elements")
    elif max_err > budget:
        worst = torch.nonzero(err == err.max())[0].tolist()
        reasons.append(f"error {max_err:.3g} over budget {budget:.3g} at [b,h,s,d]={worst}")
    if run_diff != 0:
        reasons.append(f"two launches on the same inputs differ by {run_diff:.3g} (race?)")
    return CheckResult(
        shape=shape.tag, causal=shape.causal, dtype=dtype_name, seed=seed, max_abs_err=max_err,
        lowprec_err=lowprec_err, atol=atol, budget=budget,
        err_budget_ratio=max_err / budget if budget > 0 else float("inf"), nonfinite=nonfinite,
        run_to_run_max_diff=run_diff, passed=not reasons, reason="; ".join(reasons) or "ok",
    )


def check_all(kernel: KernelFn, shapes: Iterable[Shape], dtypes: Iterable[str], seeds: Iterable[int],
              device: torch.device | str, progress: Callable[[str], None] | None = None) -> list[CheckResult]:
    """Every (shape, dtype, seed); a launch that raises is recorded as a failed check, not propagated."""
    results = []
    for shape in shapes:
        for dtype_name in dtypes:
            for seed in seeds:
                if progress:
                    progress(f"{shape.tag} {dtype_name} seed {seed}")
                try:
                    results.append(check_shape(kernel, shape, dtype_name, seed, device))
                except Exception as exc:  # a crashing kernel is a failed check with its message
                    results.append(CheckResult(
                        shape=shape.tag, causal=shape.causal, dtype=dtype_name, seed=seed,
                        max_abs_err=float("inf"), lowprec_err=float("nan"), atol=float("nan"),
                        budget=float("nan"), err_budget_ratio=float("inf"), nonfinite=-1,
                        run_to_run_max_diff=float("nan"), passed=False,
                        reason=f"launch raised {type(exc).__name__}: {exc}"))
                    if "illegal" in str(exc).lower() or "unspecified launch failure" in str(exc).lower():
                        raise  # the CUDA context is gone; nothing after this can be trusted
    return results
