"""How evenly a persistent causal launch spreads its work over the SMs, read from the kernel's own
scheduler (kernels/sdpa/sched/causal_pairs.cuh, CausalPairs::loads: the model its host half plans
with), compiled for the CPU by tools/schedule_plan.cu: the busiest block's load in causal pairs and
in the longest-first snake, and the balance (mean / max block load: the fraction of the SMs' time
doing work, if every key tile costs the same and each item one more).

    python tools/schedule_balance.py                      # long.yaml's and models.yaml's causal shapes, 132 SMs
    python tools/schedule_balance.py --sms 114 2,8,2048   # B,H,S

The model is s16-s18's: 128-row items over 128-key tiles (two warpgroups), pairs of query tiles j and
m-1-j striped over the blocks, or every item longest first dealt forward and backward in turn.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "tools" / "schedule_plan.cu"
SCHED_SOURCES = [SOURCE, *sorted((ROOT / "kernels" / "sdpa").rglob("*.cuh")), ROOT / "kernels" / "sdpa" / "sdpa_api.h"]


def build(binary: Path) -> Path:
    """tools/schedule_plan.cu compiled for the CPU (again only when a source is newer than it)."""
    if binary.is_file() and all(p.stat().st_mtime <= binary.stat().st_mtime for p in SCHED_SOURCES):
        return binary
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise SystemExit("schedule_balance: nvcc is needed to compile the kernel's scheduler for the CPU")
    binary.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([nvcc, "-std=c++17", "-O2", "-I", str(ROOT / "kernels" / "sdpa"), "-o", str(binary), str(SOURCE)],
                   check=True)
    return binary


def causal_loads(binary: Path, batch: int, heads: int, seq_len: int, sms: int) -> dict[str, float]:
    """CausalPairs' loads for one problem: busiest block under pairs and the snake, the mean, the balances."""
    out = subprocess.run([str(binary), "causal", str(batch), str(heads), str(seq_len), str(sms)], check=True,
                         capture_output=True, text=True).stdout.split()
    pairs_max, snake_max, total, items = (int(x) for x in out)
    mean = total / sms
    return {"items": items, "mean": mean, "pairs_max": pairs_max, "pairs_balance": mean / pairs_max,
            "snake_max": snake_max, "snake_balance": mean / snake_max}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("shapes", nargs="*", default=["2,8,2048", "4,16,4096", "1,32,8192", "4,32,2048"],
                        help="B,H,S of causal problems (default: long.yaml's and models.yaml's causal shapes)")
    parser.add_argument("--sms", type=int, default=132, help="persistent blocks (H100 SXM and H200: 132)")
    parser.add_argument("--binary", type=Path, default=ROOT / "build" / "tools" / "schedule_plan")
    args = parser.parse_args(argv)
    binary = build(args.binary)
    print(f"{'shape':>12} {'items':>6} {'mean':>8} {'max (pairs)':>12} {'balance':>8} {'max (snake)':>12} {'balance':>8}")
    for text in args.shapes:
        b, h, s = (int(x) for x in text.split(","))
        row = causal_loads(binary, b, h, s, args.sms)
        print(f"{text:>12} {row['items']:6d} {row['mean']:8.1f} {row['pairs_max']:12d} {row['pairs_balance']:8.3f} "
              f"{row['snake_max']:12d} {row['snake_balance']:8.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
