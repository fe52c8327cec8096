"""Where the INT8 stage's quantizing time goes: each of its launches' time, per problem, on a GPU.

A stage run times the quantizer only as a whole (`variant/quantizing/p50_us` less `p50_us`): on
models.yaml's ViT-B/16 problem 76 of 162 µs, moving its bytes at about 1.7 TB/s (H200, 2026-11-29).
This builds the stage, runs its quantizer (`cuda_quantize.quantize_into`) under torch's profiler and
prints, per problem, each kernel's mean time and the whole quantizer's rate over the bytes it must
move (Q, K and V read once, their 8-bit copies written once), so the launch to work on is named.

    python tools/int8_quantize_profile.py [--stage s19_int8] [--repetitions 50] [--markdown OUT.md]
        [--patch P.diff] [--record --gpu NAME --hypothesis TEXT]

--patch times a change to the quantizer's kernels beside the default, in one process on the same
inputs (the stage built twice, the patch applied to a copy of its kernels as `stagelab try` does), and
says whether the patch's outputs are the default's byte for byte. `stagelab try` cannot: it times the
attention, not the quantizing launches. --record makes the table a trial run of the stage (verdict
inconclusive; `stagelab try-note` adds its conclusion). `--report OUT.md` records a table this tool
wrote on a GPU earlier, here, without one.
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
AB_HEADER = "| problem | kernel | default µs | patch µs |"  # --patch's table
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
    if any(line.startswith(AB_HEADER) for line in lines):
        raise SystemExit("a --patch table keeps two builds' numbers: record it with --record where it runs")
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


def record(args, text: str, markdown: Path, numbers: list[dict] | None = None) -> str | None:
    """--record: the table as a trial run of args.stage (its numbers read back from the table unless
    given), the markdown and any patch attached."""
    from datetime import datetime, timezone

    from stagelab.core.envinfo import git_state
    from stagelab.record.measurement_entry import measurement_entry, record_entry

    name = f"quantizer launches {args.patch.stem}" if args.patch else "quantizer launches"
    entry = measurement_entry(args.stage, name, args.hypothesis, numbers or table_numbers(text.splitlines()),
                              commit=git_state()["git_commit"], gpu=args.gpu, source=str(markdown),
                              what="quantizer profile",
                              date=args.date or datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M"))
    attachments = [markdown, *([args.patch] if args.patch else [])]
    return record_entry(entry, markdown.with_suffix(".trials.yaml"), attachments, "quantize_profile")


def ab_table(problem: Problem, default_us: dict[str, float], patch_us: dict[str, float]) -> list[str]:
    """Markdown rows of --patch: each kernel's mean µs in either build (– where a build has no such
    launch), then the whole quantizer's, and the default's time over the patch's."""
    def cell(us: float | None) -> str:
        return "–" if us is None else f"{us:.1f}"

    kernels = list(dict.fromkeys([*default_us, *patch_us]))
    rows = [f"| {problem.name} | {k} | {cell(default_us.get(k))} | {cell(patch_us.get(k))} |" for k in kernels]
    default_total, patch_total = sum(default_us.values()), sum(patch_us.values())
    ratio = f"{default_total / patch_total:.2f}x" if patch_total > 0 else "–"
    return rows + [f"| {problem.name} | **all launches** | {default_total:.1f} | {patch_total:.1f} ({ratio}) |"]


def ab_numbers(problem: Problem, default_us: dict[str, float], patch_us: dict[str, float], identical: bool) -> list[dict]:
    """--patch's numbers as trial-entry rows: the patch as the trial, the default as its default."""
    kernels = list(dict.fromkeys([*default_us, *patch_us]))
    numbers = [{"problem": problem.name, "metric": "us", "quantity": f"{k} mean", "trial": patch_us.get(k),
                "default": default_us.get(k)} for k in kernels]
    numbers.append({"problem": problem.name, "metric": "us", "quantity": "all launches mean",
                    "trial": round(sum(patch_us.values()), 3), "default": round(sum(default_us.values()), 3)})
    numbers.append({"problem": problem.name, "metric": "other", "quantity": "outputs identical to the default",
                    "trial": 1.0 if identical else 0.0, "default": None})
    return numbers


def first_difference(a: dict, b: dict) -> str | None:
    """The first output (by name) whose bytes differ between two quantizers' runs, or None."""
    import torch

    for name, tensor in a.items():
        if not torch.equal(tensor.contiguous().view(torch.uint8), b[name].contiguous().view(torch.uint8)):
            return name
    return None


def make_inputs(problem: Problem, seed: int = 0):
    """fp16 Q, K and V of a problem, bhsd, standard normal."""
    import torch

    generator = torch.Generator(device="cuda").manual_seed(seed)

    def make(heads: int, seq: int) -> torch.Tensor:
        shape = (problem.batch, heads, seq, problem.head_dim)
        return torch.randn(shape, dtype=torch.float16, device="cuda", generator=generator)

    return make(problem.heads, problem.seq_len), make(problem.kv_heads, problem.kv_seq_len), \
        make(problem.kv_heads, problem.kv_seq_len)


def quantized(module, q, k, v) -> dict:
    """Every output of one run of the quantizer, by name (allocate_operands' tensors and V^T)."""
    import torch

    from stagelab.families.sdpa.int8.cuda_quantize import allocate_operands, quantize_into

    outputs, vt = allocate_operands(q, k)
    quantize_into(module, q, k, v, outputs, vt)
    torch.cuda.synchronize()
    return {"q": outputs.q, "q_descale": outputs.q_descale, "k": outputs.k, "k_descale": outputs.k_descale,
            "k_mean": outputs.k_mean, "vt": vt, "v_descale": outputs.v_descale, "v_mean": outputs.v_mean}


def profile(module, inputs, repetitions: int) -> dict[str, float]:
    """Each quantizer kernel's mean time over `repetitions` runs (µs), by the profiler's kernel name."""
    import torch
    from torch.profiler import ProfilerActivity, profile as torch_profile

    from stagelab.families.sdpa.int8.cuda_quantize import allocate_operands, quantize_into, validate_cuda_quantize

    q, k, v = inputs
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
    parser.add_argument("--patch", type=Path, default=None,
                        help="a change to the stage's kernels, timed beside the default (outputs compared byte for byte)")
    args = parser.parse_args(argv)
    if args.patch and args.report:
        raise SystemExit("--patch profiles on this GPU; --report records an earlier table: not both")
    if args.patch and not args.patch.is_file():
        raise SystemExit(f"--patch: no such file {args.patch}")
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
    text, numbers, identical = patch_table(args) if args.patch else (profile_table(args), None, True)
    print(text, end="")
    if args.markdown:
        args.markdown.write_text(text)
    if args.record:
        run_id = record(args, text, args.markdown, numbers)
        print(f"recorded as trial run {run_id}" if run_id else "this report is already in the store")
    return 0 if identical else 1


def profile_table(args) -> str:
    """Build the stage on this GPU and profile its quantizer on every problem: the markdown table."""
    import torch

    from stagelab.core.build import build_stage
    from stagelab.core.registry import find_stage

    require_gpu(args)
    registry, stage = find_stage(args.stage)
    module = build_stage(stage, registry).module
    lines = [f"{args.stage}'s quantizer on {torch.cuda.get_device_name()}, fp16 inputs, bhsd, "
             f"mean of {args.repetitions} runs under torch.profiler:", "",
             "| problem | kernel | µs | share |", "|---|---|---|---|"]
    for row in PROBLEMS:
        problem = Problem(*row)
        lines += kernel_table(problem, profile(module, make_inputs(problem), args.repetitions))
    return "\n".join(lines) + "\n"


def require_gpu(args) -> None:
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("no CUDA device: the quantizer's launches can only be timed on a GPU")
    args.gpu = args.gpu or torch.cuda.get_device_name()


def patch_table(args) -> tuple[str, list[dict], bool]:
    """--patch: the stage built as it is and with the patch, each problem's inputs through both
    (outputs compared), both profiled in turn; (the markdown, the numbers, every output identical)."""
    import shutil

    import torch

    from stagelab.core.build import build_stage
    from stagelab.core.registry import find_stage
    from stagelab.core.trial_spec import TrialSpec, prepare

    require_gpu(args)
    registry, stage = find_stage(args.stage)
    default = build_stage(stage, registry).module
    # as `stagelab try` patches: a copy of the kernels, refused where the patch changes nothing
    patched_stage, patched_registry, _, root = prepare(TrialSpec.of(patch=args.patch), registry, stage)
    try:
        patched = build_stage(patched_stage, patched_registry).module
    finally:
        shutil.rmtree(root, ignore_errors=True)
    verdicts, rows, numbers, identical = [], [], [], True
    for row in PROBLEMS:
        problem = Problem(*row)
        inputs = make_inputs(problem)
        differs = first_difference(quantized(default, *inputs), quantized(patched, *inputs))
        identical = identical and differs is None
        verdicts.append(f"- {problem.name}: " + ("outputs identical to the default's" if differs is None
                                                 else f"`{differs}` differs from the default's"))
        default_us, patch_us = profile(default, inputs, args.repetitions), profile(patched, inputs, args.repetitions)
        numbers += ab_numbers(problem, default_us, patch_us, differs is None)
        rows += ab_table(problem, default_us, patch_us)
    head = [f"{args.stage}'s quantizer on {torch.cuda.get_device_name()} with `{args.patch.name}` beside the "
            f"default, fp16 inputs, bhsd, mean of {args.repetitions} runs under torch.profiler:", ""]
    return "\n".join([*head, *verdicts, "", AB_HEADER, "|---|---|---|---|", *rows]) + "\n", numbers, identical


if __name__ == "__main__":
    sys.exit(main())
