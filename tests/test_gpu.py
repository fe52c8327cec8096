"""GPU tests: every registered stage on every acceptance shape, fp16 and bf16 (skipped without CUDA)."""

from pathlib import Path

import pytest
import torch

from stagelab.build import build_stage
from stagelab.checks import check_all
from stagelab.params import load_params
from stagelab.registry import load_registry
from stagelab.sdpa import StageKernel

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[1]
REGISTRY = load_registry()
ACCEPTANCE = load_params(ROOT / "params" / "acceptance.yaml")


@pytest.fixture(scope="module", params=list(REGISTRY.stages))
def stage_kernel(request):
    result = build_stage(REGISTRY.get(request.param), REGISTRY)
    return StageKernel(result.module, request.param)


def test_stage_correct_on_acceptance(stage_kernel):
    results = check_all(stage_kernel.into, ACCEPTANCE.shapes, ACCEPTANCE.dtypes, ACCEPTANCE.seeds, "cuda")
    failed = [f"{r.shape} {r.dtype} seed {r.seed}: {r.reason}" for r in results if not r.passed]
    assert not failed, "\n".join(failed)


def test_wrapper_matches_sdpa_and_default_scale(stage_kernel):
    q, k, v = (torch.randn(1, 2, 129, 64, device="cuda", dtype=torch.float16) for _ in range(3))
    for causal in (False, True):
        expected = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
        assert torch.allclose(stage_kernel(q, k, v, causal=causal).float(), expected, atol=5e-3)


def test_wrapper_rejects_cpu_tensors(stage_kernel):
    from stagelab.errors import InputError

    q = torch.randn(1, 1, 8, 64, dtype=torch.float16)
    with pytest.raises(InputError, match="on cpu"):
        stage_kernel(q, q, q)
