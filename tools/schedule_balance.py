"""How evenly s8's persistent long policy spreads causal work over the SMs: item by item, in causal
pairs (WorkOrder's kPairs, the default) and in a CausalSnake recipe's longest-first snake (kSnake): the
derivation behind the numbers in s8's trials and the snake's.

    python tools/schedule_balance.py                 # long.yaml's causal shapes, 132 SMs
    python tools/schedule_balance.py --sms 114 --block-m 128 --block-n 128 2,8,2048,128

It mirrors sdpa_warpspec_config.cuh's WorkOrder: items are (query tile, head) in head-major order, a
head's tiles longest first; block b takes units b, b + grid, ...; with pairs a unit is a head's
tiles j and m-1-j. The snake deals one list of every item, longest first (each head's last tile,
then the tiles before), to blocks 0..grid-1 in even rounds and grid-1..0 in odd ones. An item costs
its key tiles (causal: ceil(min(q_end, S) / BLOCK_N)). The
printed balance is mean / max block load: the fraction of the SMs' time doing work, if every
key tile costs the same and nothing else does.
"""

from __future__ import annotations

import argparse
import math


def item_costs(seq_len: int, block_m: int, block_n: int) -> list[int]:
    """Key tiles of each query tile of one head, in WorkOrder's order (longest first)."""
    m_tiles = math.ceil(seq_len / block_m)
    return [math.ceil(min((t + 1) * block_m, seq_len) / block_n) for t in reversed(range(m_tiles))]


def units(heads: int, costs: list[int], pairs: bool) -> list[int]:
    """The cost of each unit the blocks stripe over, head-major."""
    if not pairs:
        return costs * heads
    last = len(costs) - 1  # costs[i] is query tile last-i: a pair is costs[j] + costs[last-j]
    per_head = [costs[j] + (costs[last - j] if j != last - j else 0) for j in range(math.ceil(len(costs) / 2))]
    return per_head * heads


def snake_loads(heads: int, costs: list[int], sms: int) -> list[int]:
    """Each block's load when the longest-first list of every item is dealt in a snake."""
    longest_first = [cost for cost in costs for _ in range(heads)]  # costs is one head's, longest first
    grid = min(len(longest_first), sms)
    loads = [0] * grid
    for position, cost in enumerate(longest_first):
        round_, slot = divmod(position, grid)
        loads[slot if round_ % 2 == 0 else grid - 1 - slot] += cost
    return loads


def block_loads(unit_costs: list[int], sms: int) -> list[int]:
    grid = min(len(unit_costs), sms)
    return [sum(unit_costs[b::grid]) for b in range(grid)]


def balance(batch_heads: int, seq_len: int, block_m: int, block_n: int, sms: int, order: str) -> tuple[int, float]:
    """(the longest block's load, mean / max over all SMs) of order 'single', 'pairs' or 'snake'."""
    costs = item_costs(seq_len, block_m, block_n)
    if order == "snake":
        loads = snake_loads(batch_heads, costs, sms)
    else:
        loads = block_loads(units(batch_heads, costs, order == "pairs"), sms)
    return max(loads), sum(loads) / sms / max(loads)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("shapes", nargs="*", default=["2,8,2048,128", "4,16,4096,128", "2,8,2048,64", "1,32,8192,128", "4,32,2048,128"],
                        help="B,H,S,D of causal problems (default: the causal shapes s8 is timed on)")
    parser.add_argument("--sms", type=int, default=132, help="persistent blocks (H100 SXM and H200: 132)")
    parser.add_argument("--block-m", type=int, default=128, help="rows per work item (s8: 128; 192 at D=64 with 3 warpgroups)")
    parser.add_argument("--block-n", type=int, default=128)
    args = parser.parse_args()
    orders = ("single", "pairs", "snake")
    print(f"{'shape':>16} {'mean':>7}" + "".join(f" {'max (' + order + ')':>13} {'balance':>8}" for order in orders))
    for text in args.shapes:
        b, h, s, _ = (int(x) for x in text.split(","))
        total = sum(item_costs(s, args.block_m, args.block_n)) * b * h
        cells = [balance(b * h, s, args.block_m, args.block_n, args.sms, order) for order in orders]
        print(f"{text:>16} {total / args.sms:7.1f}" + "".join(f" {worst:13d} {ratio:8.2f}" for worst, ratio in cells))


if __name__ == "__main__":
    main()
