"""tools/schedule_balance.py: the derivation of the causal-schedule numbers in s8's log."""

import pytest
from tool_module import load_tool


@pytest.fixture(scope="module")
def tool():
    return load_tool("schedule_balance")


def test_a_heads_items_cost_their_key_tiles_longest_first(tool):
    assert tool.item_costs(seq_len=512, block_m=128, block_n=128) == [4, 3, 2, 1]
    assert tool.item_costs(seq_len=333, block_m=128, block_n=64) == [6, 4, 2]  # the ragged last tile: 333 keys


def test_pairs_cost_the_same_whatever_j_and_an_odd_middle_tile_stands_alone(tool):
    assert tool.units(heads=2, costs=[4, 3, 2, 1], pairs=True) == [5, 5, 5, 5]
    assert tool.units(heads=1, costs=[3, 2, 1], pairs=True) == [4, 2]
    assert tool.units(heads=2, costs=[3, 2, 1], pairs=False) == [3, 2, 1, 3, 2, 1]


def test_the_numbers_in_s8s_log(tool):
    """(2,8,2048,128) causal on 132 SMs: the longest block carried 28 tile-lengths against a mean of
    16.5 with single items, 17 with pairs (128 units of 17)."""
    mean = 16 * sum(range(1, 17)) / 132  # 16 heads of tiles costing 1..16 key tiles, on 132 SMs
    assert round(mean, 1) == 16.5
    assert tool.balance(16, 2048, 128, 128, 132, order="single") == (28, pytest.approx(mean / 28))
    assert tool.balance(16, 2048, 128, 128, 132, order="pairs") == (17, pytest.approx(mean / 17))


def test_the_snake_deals_longest_first_forward_then_backward(tool):
    # 2 heads of [4, 3, 2, 1] on 3 blocks: 4 4 3 | 3 2 2 | 1 1 -> block 0: 4+2+1, 1: 4+2+1, 2: 3+3
    assert tool.snake_loads(heads=2, costs=[4, 3, 2, 1], sms=3) == [7, 7, 6]


def test_the_snake_ends_the_quantization_of_equal_pairs(tool):
    """Llama-3-8B's 8k causal prefill (32 heads of 64 query tiles) on 132 SMs: 1024 pairs of 65 key
    tiles take 8 rounds on the busiest block (520) against a mean of 504.2; the snake's busiest
    block carries 505."""
    mean = 32 * sum(range(1, 65)) / 132
    assert tool.balance(32, 8192, 128, 128, 132, order="pairs") == (520, pytest.approx(mean / 520))
    worst, ratio = tool.balance(32, 8192, 128, 128, 132, order="snake")
    assert worst == 505 and ratio > 0.995
