"""GPU tests of the sanitize step (skipped without CUDA; compute-sanitizer must be installed, or
the tests say so and skip): two planted bugs, test-only stages in tests/fixtures/planted (copied with
kernels/softmax's headers and binding into a scratch checkout): `planted_race` (a block
reduction missing one __syncthreads) must fail racecheck, `planted_oob` (one store past the
output's end) must fail memcheck, and each stage must be judged `incorrect`; the real sm0 is the
clean control. The checkout is swapped for the whole module, so only those stages exist here.
"""

import pytest
from planted import make_planted_checkout

from stagelab.measure import sanitize
from stagelab.measure.launch import find_tool
from stagelab.stage import StageRun

pytestmark = pytest.mark.gpu
PLANTED_PARAMS = "softmax-smoke-sanitize.yaml"


@pytest.fixture(scope="module")
def planted_checkout(tmp_path_factory):
    """A checkout holding only the test softmax registry and the softmax parameter files."""
    if find_tool(sanitize.SANITIZER) is None:
        pytest.skip("compute-sanitizer is not installed")
    root = make_planted_checkout(tmp_path_factory.mktemp("planted"))
    # the smoke problems, with the sanitize step switched on (a parameter file opts in)
    smoke = (root / "params" / "softmax-smoke.yaml").read_text()
    (root / "params" / PLANTED_PARAMS).write_text(smoke + "steps: [sanitize]\n")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("STAGELAB_ROOT", str(root))  # the child launches read it too
        yield root


def sanitized(stage_id: str) -> StageRun:
    run = StageRun(stage_id, f"params/{PLANTED_PARAMS}", track=False)
    run.build()
    run.resources()
    run.check()
    run.sanitize()
    run.finish()
    return run


def verdicts(run: StageRun) -> dict[str, str]:
    return {v.tool: v.status for v in run.results.sanitize.verdicts}


def test_clean_stage_sanitizes_clean(planted_checkout):
    run = sanitized("sm0_block_three_pass")
    assert verdicts(run) == dict.fromkeys(sanitize.SANITIZER_TOOLS, sanitize.CLEAN), run.results.sanitize.verdicts
    assert run.outcome.outcome == "pass"


def test_planted_race_caught_by_racecheck(planted_checkout):
    run = sanitized("planted_race")
    assert verdicts(run)["racecheck"] == sanitize.ERRORS, run.results.sanitize.verdicts[1].log[-3000:]
    assert run.outcome.outcome == "incorrect" and "racecheck" in run.outcome.reason


def test_planted_out_of_bounds_store_caught_by_memcheck(planted_checkout):
    run = sanitized("planted_oob")
    assert verdicts(run)["memcheck"] == sanitize.ERRORS, run.results.sanitize.verdicts[0].log[-3000:]
    assert run.outcome.outcome == "incorrect" and "memcheck" in run.outcome.reason
