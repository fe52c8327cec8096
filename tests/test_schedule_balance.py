"""tools/schedule_balance.py: the causal scheduler's balance, read from the kernel's own host model
(sched/causal_pairs.cuh, CausalPairs::loads) compiled for the CPU: the numbers behind s8's pairs and
s16's snake, checked against costs derived here by hand."""

import math
import shutil

import pytest
from tool_module import load_tool

SMS = 132


@pytest.fixture(scope="module")
def tool():
    return load_tool("schedule_balance")


@pytest.fixture(scope="module")
def binary(tool, tmp_path_factory):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not installed")
    return tool.build(tmp_path_factory.mktemp("schedule_plan") / "schedule_plan")


def item_costs(seq_len: int) -> list[int]:
    """The model's cost of each 128-row causal item of one head: its 128-key tiles, plus one."""
    return [t + 1 + 1 for t in range(math.ceil(seq_len / 128))]


def test_pairs_cost_the_same_whatever_j_so_stripes_of_pairs_balance(tool, binary):
    """(2,8,2048) causal: 16 heads of 16 items costing 2..17; a pair j, 15-j costs 19 whatever j, and
    128 pairs on 132 blocks leave the busiest block one pair."""
    costs = item_costs(2048)
    row = tool.causal_loads(binary, 2, 8, 2048, SMS)
    assert row["items"] == 256 and row["pairs_max"] == costs[0] + costs[-1] == 19
    assert row["mean"] == pytest.approx(16 * sum(costs) / SMS)


def test_the_snake_ends_the_quantization_of_equal_pairs(tool, binary):
    """Llama-3-8B's 8k causal prefill (32 heads of 64 items) on 132 SMs: 1024 pairs of 67 take 8 rounds on
    the busiest block (536) against a mean of 519.8; the snake's busiest block carries 520."""
    costs = item_costs(8192)
    row = tool.causal_loads(binary, 1, 32, 8192, SMS)
    assert row["pairs_max"] == math.ceil(32 * 32 / SMS) * (costs[0] + costs[-1]) == 536
    assert row["mean"] == pytest.approx(32 * sum(costs) / SMS)
    assert row["snake_max"] == 520 and row["snake_balance"] > 0.995


def test_an_odd_count_s_middle_item_is_a_unit_alone(tool, binary):
    """One head of 3 items (costs 2, 3, 4): pairs are (4 + 2) and the middle 3 alone; the snake deals
    4, 3, 2 to three blocks."""
    row = tool.causal_loads(binary, 1, 1, 384, SMS)
    assert (row["items"], row["pairs_max"], row["snake_max"]) == (3, 6, 4)
    assert row["mean"] == pytest.approx(9 / SMS)
