"""Where the INT8 stage's quantizing time goes: each of its launches' time, per problem, on a GPU.

A stage run times the quantizer only as a whole (`variant/quantizing/p50_us` less `p50_us`): on
models.yaml's ViT-B/16 problem 76 of 162 µs, moving its bytes at about 1.7 TB/s (H200, 2026-11-29).
This builds the stage, runs its quantizer (`cuda_quantize.quantize_into`) under torch's profiler and
prints, per problem, each kernel's mean time and the whole quantizer's rate over the bytes it must
move (Q, K and V read once, their 8-bit copies written once), so the launch to work on is named.

    python tools/int8_quantize_profile.py [--stage s19_int8] [--repetitions 50] [--markdown OUT.md]
        [--record --gpu NAME --hypothesis TEXT]

--record makes the table a trial run of the stage (verdict inconclusive; `stagelab try-note` adds its
conclusion). `--report OUT.md` records a table this tool wrote on a GPU earlier, here, without one.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))

# (name, B, H, Hkv, Sq, Sk, D): models.yaml's rows where the quantizer costs most against the attention
PROBLEMS = (("vit-b16", 64, 12, 12, 197, 197, 64), ("bert-base", 128, 12, 12, 128, 128, 64),
            ("sdxl-self", 2, 10, 10, 4096, 4096, 64), ("llama3-8b", 1, 32, 8, 8192, 8192, 128))
SOURCE_BYTES = 2  # fp16 inputs
CODE_BYTES = 1    # int8 Q and K, e4m3 V


class Problem(NamedTuple):
    name: str
    batch: int
    heads: int
    kv_heads: int
    seq_len: int
    kv_seq_len: int
    head_dim: int

    def least_bytes(self) -> int:
        """What any quantizer of these inputs must move: each input read once, each code written once."""
        q = self.batch * self.heads * self.seq_len * self.head_dim
        kv = 2 * self.batch * self.kv_heads * self.kv_seq_len * self.head_dim
        return (q + kv) * (SOURCE_BYTES + CODE_BYTES)


def kernel_table(problem: Problem, kernel_us: dict[str, float]) -> list[str]:
    """Markdown rows: each kernel's mean µs and share, then the whole quantizer's µs and TB/s."""
    total = sum(kernel_us.values())
    rows = [f"| {problem.name} | {name} | {us:.1f} | {us / total:.0%} |" for name, us in kernel_us.items()]
    rate = problem.least_bytes() / (total * 1e-6) / 1e12 if total > 0 else 0.0
    return rows + [f"| {problem.name} | **all launches** | {total:.1f} | {rate:.2f} TB/s of its least bytes |"]


def table_numbers(lines: list[str]) -> list[dict]:
    """The rows of a table kernel_table wrote, as trial-entry numbers (stagelab.record.measurement_entry):
    each launch's mean µs, each problem's whole µs and its TB/s of the least bytes."""
    numbers = []
    for line in lines:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or cells[0] in ("problem", "---"):
            continue
        problem, kernel, us, share = cells
        if kernel == "**all launches**":
            numbers.append({"problem": problem, "metric": "us", "quantity": "all launches mean",
                            "trial": float(us), "default": None})
            numbers.append({"problem": problem, "metric": "other", "quantity": "all launches TB/s over the least bytes",
                            "trial": float(share.split()[0]), "default": None})
        else:
            numbers.append({"problem": problem, "metric": "us", "quantity": f"{kernel} mean",
                            "trial": float(us), "default": None})
    if not numbers:
        raise SystemExit("no table rows: not a report of this tool")
    return numbers


def record(args, text: str, markdown: Path) -> str | None:
    """--record: the table as a trial run of args.stage, the markdown attached."""
    from datetime import datetime, timezone

    from stagelab.core.envinfo import git_state
    from stagelab.record.measurement_entry import measurement_entry, record_entry

    entry = measurement_entry(args.stage, "quantizer launches", args.hypothesis, table_numbers(text.splitlines()),
                              commit=git_state()["git_commit"], gpu=args.gpu, source=str(markdown),
                              what="quantizer profile",
                              date=args.date or datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M"))
    return record_entry(entry, markdown.with_suffix(".trials.yaml"), [markdown], "quantize_profile")


def profile(module, problem: Problem, repetitions: int) -> dict[str, float]:
    """Each quantizer kernel's mean time over `repetitions` runs (µs), by the profiler's kernel name."""
    import torch
    from torch.profiler import ProfilerActivity, profile as torch_profile

    from stagelab.families.sdpa.int8.cuda_quantize import allocate_operands, quantize_into, validate_cuda_quantize

    def make(heads: int, seq: int) -> torch.Tensor:
        shape = (problem.batch, heads, seq, problem.head_dim)
        return torch.randn(shape, dtype=torch.float16, device="cuda")

    q, k, v = make(problem.heads, problem.seq_len), make(problem.kv_heads, problem.kv_seq_len), \
        make(problem.kv_heads, problem.kv_seq_len)
    validate_cuda_quantize(module, q, k, v)
    outputs, vt = allocate_operands(q, k)
    quantize_into(module, q, k, v, outputs, vt)  # warm
    torch.cuda.synchronize()
    with torch_profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(repetitions):
            quantize_into(module, q, k, v, outputs, vt)
        torch.cuda.synchronize()
    totals: dict[str, float] = {}
    for event in prof.key_averages():
        if event.device_type.name == "CUDA" and event.count >= repetitions:
            totals[event.key.split("(")[0][:60]] = event.device_time_total / repetitions
    return totals


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stage", default="s19_int8")
    parser.add_argument("--repetitions", type=int, default=50)
    parser.add_argument("--markdown", type=Path, default=None, help="also write the table here")
    parser.add_argument("--report", type=Path, default=None,
                        help="record this earlier report of the tool instead of profiling (with --record)")
    parser.add_argument("--record", action="store_true", help="record the table as a trial run of --stage")
    parser.add_argument("--gpu", help="--record with --report: the GPU it ran on (default: this one's)")
    parser.add_argument("--date", help="--record: when it ran (ISO, UTC; default now)")
    parser.add_argument("--hypothesis", default="", help="--record: what the profile is to explain")
    args = parser.parse_args(argv)
    if args.record and not args.hypothesis.strip():
        raise SystemExit("--record needs --hypothesis (what the profile is to explain)")
    if args.record and not (args.report or args.markdown):
        raise SystemExit("--record needs --markdown (the table attached to the run)")
    if args.report:
        if not (args.record and args.gpu):
            raise SystemExit("--report records an earlier table: it needs --record and --gpu")
        run_id = record(args, args.report.read_text(), args.report)
        print(f"recorded as trial run {run_id}" if run_id else "this report is already in the store")
        return 0
    text = profile_table(args)
    print(text, end="")
    if args.markdown:
        args.markdown.write_text(text)
    if args.record:
        run_id = record(args, text, args.markdown)
        print(f"recorded as trial run {run_id}" if run_id else "this report is already in the store")
    return 0


def profile_table(args) -> str:
    """Build the stage on this GPU and profile its quantizer on every problem: the markdown table."""
    import torch

    from stagelab.core.build import build_stage
    from stagelab.core.registry import find_stage

    if not torch.cuda.is_available():
        raise SystemExit("no CUDA device: the quantizer's launches can only be timed on a GPU")
    args.gpu = args.gpu or torch.cuda.get_device_name()
    registry, stage = find_stage(args.stage)
    module = build_stage(stage, registry).module
    lines = [f"{args.stage}'s quantizer on {torch.cuda.get_device_name()}, fp16 inputs, bhsd, "
             f"mean of {args.repetitions} runs under torch.profiler:", "",
             "| problem | kernel | µs | share |", "|---|---|---|---|"]
    for row in PROBLEMS:
        problem = Problem(*row)
        lines += kernel_table(problem, profile(module, problem, args.repetitions))
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
