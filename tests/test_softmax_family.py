"""The second family through the core on CPU: its problems, reference and the same checker."""

import pytest
import torch

from stagelab.measure.family_checks import check_all, check_shape
from stagelab.core.errors import ConfigError, InputError
from stagelab.families.softmax import FAMILY, Rows, validate_input
from stagelab.core.params import load_params
from stagelab.core.paths import repo_root

PROBLEMS = [Rows(1, 1), Rows(3, 77), Rows(5, 1000)]


def correct(x, out):
    out.copy_(torch.softmax(x.float(), dim=-1))


def drops_vector_tail(x, out):
    """An 8-wide vector loop that forgets the tail: the last cols % 8 columns are left out of the sum."""
    e = (x.float() - x.float().amax(-1, keepdim=True)).exp()
    whole = x.shape[-1] - x.shape[-1] % 8
    out.copy_(e / e[:, :whole].sum(-1, keepdim=True).clamp_min(1e-30))


def no_max_subtraction(x, out):
    """exp without the max shift, in half precision: overflows for logits above ~11."""
    e = x.exp()
    out.copy_(e / e.sum(-1, keepdim=True))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_correct_softmax_passes(dtype):
    results = check_all(FAMILY, correct, PROBLEMS, [dtype], [0, 1], "cpu")
    assert all(r.passed for r in results), [r.reason for r in results if not r.passed]


@pytest.mark.parametrize("bug, problem", [(drops_vector_tail, Rows(3, 77)), (no_max_subtraction, Rows(5, 1000))])
def test_planted_softmax_bugs_fail(bug, problem):
    assert not check_shape(FAMILY, bug, problem, "float16", 0, "cpu").passed


def test_problem_tags_and_throughput_units():
    assert Rows(4096, 1024).tag == "4096x1024"
    assert Rows(2, 8).bytes_moved(2) == 2 * 2 * 8 * 2 and FAMILY.throughput_unit == "GB/s"


@pytest.mark.parametrize("name", ["softmax-smoke", "softmax-acceptance"])
def test_shipped_softmax_params_load(name):
    params = load_params(repo_root() / "params" / f"{name}.yaml")
    assert params.family.name == "softmax" and params.timing.contenders == ("torch",)


@pytest.mark.parametrize("entry, message", [
    ("{shape: [3]}", "expected [rows, cols]"),
    ("{shape: [3, 0]}", "shape.cols: expected a positive integer"),
    ("{shape: [3, 4], causal: true}", "expected {shape: [rows, cols]}"),
])
def test_bad_softmax_problems_are_named(tmp_path, entry, message):
    path = tmp_path / "p.yaml"
    path.write_text(f"family: softmax\nshapes: [{entry}]\n")
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("{", r"\{")):
        load_params(path)


def test_bad_inputs_are_named():
    with pytest.raises(InputError, match="2 dims"):
        validate_input(torch.zeros(2, 3, 4, dtype=torch.float16), require_cuda=False)
    with pytest.raises(InputError, match="dtype torch.float32"):
        validate_input(torch.zeros(2, 3), require_cuda=False)
    with pytest.raises(InputError, match="on cpu"):
        validate_input(torch.zeros(2, 3, dtype=torch.float16))
