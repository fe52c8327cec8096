"""The checker must catch planted bugs; torch functions stand in for kernels (CPU)."""

import math

import pytest
import torch

from stagelab.measure.family_checks import check_all, check_shape
from stagelab.families.sdpa import FAMILY as SDPA, Shape, attention

SHAPES = [Shape(1, 2, 77, 64, True), Shape(1, 2, 77, 64, False), Shape(2, 1, 33, 128, True)]


def correct(q, k, v, out, scale, causal):
    out.copy_(attention(q, k, v, scale, causal, torch.float32))


def zeros(q, k, v, out, scale, causal):
    out.zero_()


def tail_unwritten(q, k, v, out, scale, causal):
    full = attention(q, k, v, scale, causal, torch.float32).to(out.dtype)
    rows = q.shape[2] - q.shape[2] % 16 or q.shape[2] - 1  # the last partial tile is "forgotten"
    out[:, :, :rows] = full[:, :, :rows]


def causal_off_by_one(q, k, v, out, scale, causal):
    s = q.shape[2]
    # j <= i + 1 instead of j <= i: each query sees one future key.
    mask = torch.ones((s, s), dtype=torch.bool).triu(diagonal=2 if causal else s)
    scores = (q.float() @ k.float().transpose(-1, -2)) * scale
    out.copy_(torch.softmax(scores.masked_fill(mask, -math.inf), -1) @ v.float())


def scales_twice(q, k, v, out, scale, causal):
    out.copy_(attention(q, k, v, scale * scale, causal, torch.float32))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_correct_kernel_passes(dtype):
    results = check_all(SDPA, correct, SHAPES, [dtype], [0, 1], "cpu")
    assert all(r.passed for r in results), [r.reason for r in results if not r.passed]
    assert all(r.err_budget_ratio < 1 for r in results)


@pytest.mark.parametrize("bug, shape, expect", [
    (zeros, SHAPES[0], "over budget"),
    (tail_unwritten, SHAPES[1], "non-finite or unwritten"),
    (causal_off_by_one, SHAPES[0], "over budget"),
    (causal_off_by_one, SHAPES[2], "over budget"),
    (scales_twice, SHAPES[1], "over budget"),
])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_planted_bugs_fail(bug, shape, expect, dtype):
    result = check_shape(SDPA, bug, shape, dtype, seed=0, device="cpu")
    assert not result.passed
    assert expect in result.reason


def test_nondeterministic_kernel_is_flagged():
    calls = []

    def flaky(q, k, v, out, scale, causal):
        correct(q, k, v, out, scale, causal)
        calls.append(1)
        if len(calls) == 2:
            out.view(-1)[0] += 1e-2

    result = check_shape(SDPA, flaky, SHAPES[1], "float16", 0, "cpu")
    assert not result.passed and "differ" in result.reason


def test_a_failed_checks_numbers_read_in_fixed_notation():
    """A race once read `differ by 3.66e+04` in a journal."""
    calls = []

    def racy(q, k, v, out, scale, causal):
        correct(q, k, v, out, scale, causal)
        calls.append(1)
        if len(calls) == 2:
            out.view(-1)[0] += 36600

    result = check_shape(SDPA, racy, SHAPES[1], "float16", 0, "cpu")
    assert "differ by 36600 (race?)" in result.reason and "e+" not in result.reason, result.reason


def test_crashing_kernel_is_a_failed_check_not_an_exception():
    def boom(q, k, v, out, scale, causal):
        raise RuntimeError("kernel launch failed: invalid argument")

    [result] = check_all(SDPA, boom, SHAPES[:1], ["float16"], [0], "cpu")
    assert not result.passed and "invalid argument" in result.reason


def test_inputs_are_fresh_per_seed_and_shape():
    a = SDPA.make_inputs(SHAPES[0], torch.float16, 0, "cpu")[0]
    b = SDPA.make_inputs(SHAPES[0], torch.float16, 1, "cpu")[0]
    c = SDPA.make_inputs(SHAPES[1], torch.float16, 0, "cpu")[0]
    assert not torch.equal(a, b) and not torch.equal(a, c)
    assert torch.equal(a, SDPA.make_inputs(SHAPES[0], torch.float16, 0, "cpu")[0])
