"""How evenly s8's persistent long policy spreads causal work over the SMs, with and without
causal pairs (WorkOrder's kPairs): the derivation behind the numbers in s8's trials.

    python tools/schedule_balance.py                 # long.yaml's causal shapes, 132 SMs
    python tools/schedule_balance.py --sms 114 --block-m 128 --block-n 128 2,8,2048,128

It mirrors sdpa_warpspec_config.cuh's WorkOrder: items are (query tile, head) in head-major order, a
head's tiles longest first; block b takes units b, b + grid, ...; with pairs a unit is a head's
tiles j and m-1-j. An item costs its key tiles (causal: ceil(min(q_end, S) / BLOCK_N)). The
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


def block_loads(unit_costs: list[int], sms: int) -> list[int]:
    grid = min(len(unit_costs), sms)
    return [sum(unit_costs[b::grid]) for b in range(grid)]


def balance(batch_heads: int, seq_len: int, block_m: int, block_n: int, sms: int, pairs: bool) -> tuple[int, float]:
    """(the longest block's load, mean / max over all SMs)."""
    loads = block_loads(units(batch_heads, item_costs(seq_len, block_m, block_n), pairs), sms)
    return max(loads), sum(loads) / sms / max(loads)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("shapes", nargs="*", default=["2,8,2048,128", "4,16,4096,128", "2,8,2048,64"],
                        help="B,H,S,D of causal problems (default: the causal shapes s8 is timed on)")
    parser.add_argument("--sms", type=int, default=132, help="persistent blocks (H100 SXM and H200: 132)")
    parser.add_argument("--block-m", type=int, default=128, help="rows per work item (s8: 128; 192 at D=64 with 3 warpgroups)")
    parser.add_argument("--block-n", type=int, default=128)
    args = parser.parse_args()
    print(f"{'shape':>16} {'mean':>7} {'max (single)':>13} {'balance':>8} {'max (pairs)':>12} {'balance':>8}")
    for text in args.shapes:
        b, h, s, _ = (int(x) for x in text.split(","))
        total = sum(item_costs(s, args.block_m, args.block_n)) * b * h
        single, single_balance = balance(b * h, s, args.block_m, args.block_n, args.sms, pairs=False)
        paired, paired_balance = balance(b * h, s, args.block_m, args.block_n, args.sms, pairs=True)
        print(f"{text:>16} {total / args.sms:7.1f} {single:13d} {single_balance:8.2f} {paired:12d} {paired_balance:8.2f}")


if __name__ == "__main__":
    main()
