"""GPU tests of the dependent-launch check (stagelab.measure.chain; skipped without CUDA): a softmax launched
with programmatic dependent launch that reads its row without waiting for the previous grid
(`planted_pdl_no_wait`, tests/fixtures/planted) must be caught, and the same kernel with its wait
(`pdl_waits`) must pass. Single launches of either are right; only chained ones differ."""

import pytest
import torch
from planted import make_planted_checkout

from stagelab.core.build import build_stage
from stagelab.measure.chain import check_chain
from stagelab.core.family import load_family
from stagelab.core.registry import find_stage

pytestmark = pytest.mark.gpu
# Two rows per SM of an H100 and long rows: every block of a launch is resident at once and lets
# the next launch in at its start, so the next launch's blocks read rows this one is still writing.
RACE_PROBLEM = {"shape": [264, 65536]}


@pytest.fixture(scope="module")
def planted_checkout(tmp_path_factory):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    root = make_planted_checkout(tmp_path_factory.mktemp("planted-pdl"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("STAGELAB_ROOT", str(root))
        yield root


def chain_of(stage_id: str):
    registry, stage = find_stage(stage_id)
    family = load_family(registry.family)
    [problem] = family.parse_problem("test", RACE_PROBLEM)
    module = build_stage(stage, registry).module
    return check_chain(family, module, problem, "float16")


def test_pdl_launch_that_waits_matches_the_synchronised_chain(planted_checkout):
    result = chain_of("pdl_waits")
    assert result.passed, result.describe()


def test_pdl_launch_without_its_wait_is_caught(planted_checkout):
    result = chain_of("planted_pdl_no_wait")
    assert not result.passed, "a PDL launch reading its input without griddepcontrol.wait went unnoticed"
    assert "differ" in result.describe()
