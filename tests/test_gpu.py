"""GPU tests: every registered stage of every family on its acceptance problems and dtypes
(skipped without CUDA)."""

import pytest
import torch

from stagelab.core.build import build_stage
from stagelab.measure.chain import check_chain
from stagelab.measure.family_checks import check_stage
from stagelab.core.errors import InputError
from stagelab.core.family import load_family
from stagelab.core.params import load_params
from stagelab.core.paths import repo_root
from stagelab.core.registry import all_registries

pytestmark = pytest.mark.gpu
STAGES = [(registry, stage_id) for registry in all_registries().values() for stage_id in registry.stages]


@pytest.fixture(scope="module", params=STAGES, ids=[s for _, s in STAGES])
def built(request):
    registry, stage_id = request.param
    family = load_family(registry.family)
    stage = registry.get(stage_id)
    result = build_stage(stage, registry)
    return family, family.stage_kernel(result.module, stage_id, stage.input_kind)


def test_stage_correct_on_acceptance(built):
    family, kernel = built
    acceptance = load_params(repo_root() / family.acceptance_params)
    results = check_stage(family, kernel, acceptance.shapes, acceptance.dtypes, acceptance.seeds, "cuda",
                          distributions=acceptance.distributions)
    failed = [r.describe() for r in results if not r.passed]
    assert not failed, "\n".join(failed)


def test_sdpa_wrapper_matches_torch_and_default_scale(built):
    family, kernel = built
    if family.name != "sdpa" or kernel.input_kind:
        pytest.skip("the fp16 sdpa wrapper (quantized stages: test_stage_correct_on_acceptance's budget of their kind)")
    q, k, v = (torch.randn(1, 2, 129, 64, device="cuda", dtype=torch.float16) for _ in range(3))
    for causal in (False, True):
        expected = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
        assert torch.allclose(kernel(q, k, v, causal=causal).float(), expected, atol=5e-3)


def test_wrapper_rejects_cpu_tensors(built):
    family, kernel = built
    [problem] = family.parse_problem("test", family.default_mission)
    inputs = family.make_inputs(problem, torch.float16, 0, "cpu")
    if kernel.input_kind:  # a quantized sdpa stage (fp8, int8) takes its kind's operands
        from stagelab.families.sdpa.kinds import QUANTIZED_KINDS

        inputs = (QUANTIZED_KINDS[kernel.input_kind].quantize(*inputs),)
    with pytest.raises(InputError, match="on cpu"):
        kernel(*inputs)


def test_chained_launches_match_the_synchronised_chain(built):
    """Each launch reads its predecessor's output: back to back and from one CUDA graph, as
    throughput timing runs them, every link must equal the chain run one launch at a time (what a
    programmatic-dependent-launch build's wait guarantees; any stage must pass it)."""
    family, kernel = built
    [problem] = family.parse_problem("test", family.default_mission)
    result = check_chain(family, kernel.module, problem, "float16", input_kind=kernel.input_kind)
    assert result.passed, result.describe()
