"""The kernel edit loop on a GPU, without MLflow or papermill: build stages, check them on
ragged problems, time them side by side in throughput mode. Not a record: `stagelab run`
is; this answers "is it right, and roughly how fast" in one short device call.

    python3 tools/quick_check.py s5_wgmma s6_tma_warpspec [--time] [--contenders cudnn flash]
    python3 tools/quick_check.py s9_fp8 s6_tma_warpspec --time --debug
    python3 tools/quick_check.py s9_fp8 --distributions normal large positive outlier

A stage whose registry entry says `inputs: fp8` is checked against the FP8 budget (check_fp8_all:
2x the FP8 emulation's error + atol, fp16 and bf16 outputs) and timed on the same standard inputs,
quantized outside the timed launch, beside the fp16 stages. --debug prints each check's error,
budget and low-precision (FP8: emulation) error, the worst seed per problem and dtype (and input
distribution). --distributions checks on the family's named input distributions (default normal;
`all`: every one that applies to the stage's inputs).

Checks every stage on the family's sanitizer problems plus the issue's odd lengths
(1, 77, 333, 1000, 4097), fp16 and bf16, causal and not, with the project's budget
(stagelab.measure.checks); prints one line per failure and a summary per stage. Then chains of dependent
launches (stagelab.measure.chain), each reading its predecessor's output, against the same chain run one
launch at a time: the check a programmatic-dependent-launch build (WS_PDL=1) must pass. --time times the
stages (and contenders) per launch in throughput mode on the long and mission shapes.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

import torch

from stagelab.core import metrics
from stagelab.core.build import build_all, build_stage
from stagelab.measure.chain import check_chains
from stagelab.measure.checks import check_stage
from stagelab.core.errors import BuildError
from stagelab.explore import time_contender, time_kernel
from stagelab.core.family import DEFAULT_DISTRIBUTION, load_family, stage_distributions
from stagelab.core.registry import find_stage

CHECK_PROBLEMS = [
    {"shape": [1, 2, 1, 64], "causal": [False, True]},
    {"shape": [1, 2, 77, 128], "causal": [False, True]},
    {"shape": [2, 3, 333, 64], "causal": [False, True]},
    {"shape": [1, 2, 1000, 128], "causal": [False, True]},
    {"shape": [1, 2, 4097, 64], "causal": [False, True]},
    {"shape": [1, 1, 4097, 128], "causal": [True]},
    {"shape": [2, 8, 512, 64], "causal": [False, True]},
]
TIME_PROBLEMS = [
    {"shape": [2, 8, 512, 64], "causal": False},
    {"shape": [4, 16, 4096, 64], "causal": False},
    # acceptance's head_dim-64 middle shape: where s8's 192-row items left a ragged second wave
    {"shape": [2, 8, 2048, 64], "causal": [False, True]},
    {"shape": [4, 16, 4096, 128], "causal": [False, True]},
    {"shape": [1, 32, 8192, 128], "causal": False},
    # long.yaml's shape under 1.0x cuDNN on the H100 (s8, commit d24370e), and its causal twin
    {"shape": [2, 8, 2048, 128], "causal": [False, True]},
]
SEEDS = (0, 1)
# Dependent launches (stagelab.measure.chain): the mission shape (short policies), a persistent causal one
# and a ragged one.
CHAIN_PROBLEMS = [
    {"shape": [2, 8, 512, 64], "causal": False},
    {"shape": [2, 8, 2048, 128], "causal": True},
    {"shape": [1, 3, 333, 64], "causal": False},
]


def problems(family, entries):
    return [p for entry in entries for p in family.parse_problem("quick_check", entry)]


def report_debug(results) -> None:
    """The worst seed per (problem, dtype, distribution): error, budget, the low-precision yardstick's error."""
    worst = {}
    for r in results:
        key = (r.shape, r.dtype, r.distribution)
        if key not in worst or r.err_budget_ratio > worst[key].err_budget_ratio:
            worst[key] = r
    for r in worst.values():
        extra = f" vs_fp16 {r.err_vs_fp16:.2e}" if hasattr(r, "err_vs_fp16") else ""
        print(f"  {'ok' if r.passed else 'FAIL'} {r.shape} {r.dtype} {r.distribution}: "
              f"err {r.max_abs_err:.2e} budget {r.budget:.2e} "
              f"lowprec {r.lowprec_err:.2e} ratio {r.err_budget_ratio:.3f}{extra}", flush=True)


def check(family, kernels, debug: bool = False, distributions=(DEFAULT_DISTRIBUTION,)) -> bool:
    all_ok = True
    for stage_id, kernel in kernels.items():
        requested = family.distributions if tuple(distributions) == ("all",) else distributions
        names = stage_distributions(family, requested, kernel.input_kind)
        results = check_stage(family, kernel, problems(family, CHECK_PROBLEMS), family.dtypes, SEEDS, "cuda",
                              distributions=names)
        if debug:
            report_debug(results)
        failed = [r for r in results if not r.passed]
        worst = {d: max(r.err_budget_ratio for r in results if r.distribution == d) for d in names}
        print(f"[check] {stage_id}: {len(results) - len(failed)}/{len(results)} ok, worst err/budget "
              + ", ".join(f"{d} {ratio:.3f}" for d, ratio in worst.items()), flush=True)
        for r in failed:
            print(f"   FAIL {r.describe()}", flush=True)
        all_ok &= not failed
    return all_ok


def check_dependent_launches(family, kernels) -> bool:
    """Each stage's launches chained (each reads its predecessor's output) must match the same
    chain run one launch at a time: what a PDL kernel's dependency wait is for."""
    all_ok = True
    for label, kernel in kernels.items():
        results = [r for dtype in family.dtypes
                   for r in check_chains(family, kernel.module, problems(family, CHAIN_PROBLEMS), dtype,
                                         input_kind=kernel.input_kind)]
        failed = [r for r in results if not r.passed]
        print(f"[chain] {label}: {len(results) - len(failed)}/{len(results)} ok", flush=True)
        for r in failed:
            print(f"   FAIL {r.describe()}", flush=True)
        all_ok &= not failed
    return all_ok


def clock_note(row: dict) -> str:
    """' @1480 MHz 698 W' where the row carries the clock it ran at (stagelab.measure.gpu_clocks)."""
    if not math.isfinite(row[metrics.SM_CLOCK_MHZ.name]):
        return ""
    return f" @{row[metrics.SM_CLOCK_MHZ.name]:.0f} MHz {row[metrics.POWER_W.name]:.0f} W"


def time_all(family, kernels, contender_names, repetitions, only=()) -> None:
    for problem in problems(family, TIME_PROBLEMS):
        if only and problem.tag not in only:
            continue
        rows = [time_kernel(family, k, problem, mode="throughput", repetitions=repetitions, label=label)
                for label, k in kernels.items()]
        for name in contender_names:
            try:
                rows.append(time_contender(family, name, problem, mode="throughput", repetitions=repetitions))
            except RuntimeError as exc:
                print(f"[time] {name} unavailable: {exc}", flush=True)
        cells = [f"{r['contender']} {r['p50_us']:8.2f} us {r['tflops']:6.0f} TF/s" + clock_note(r) for r in rows]
        print(f"[time] {problem.tag}: " + " | ".join(cells), flush=True)


def parse_variant(spec: str):
    """LABEL=STAGE:KEY=VAL,KEY=VAL -> (LABEL, (registry, the stage built with those defines))."""
    label, rest = spec.split("=", 1)
    stage_id, _, defines = rest.partition(":")
    reg, stage = find_stage(stage_id)
    values = dict(kv.split("=", 1) for kv in defines.split(",") if kv)
    return label, (reg, stage.with_defines(values))


def load_kernel(family, build):
    """The family's kernel of a (registry, stage) pair, loaded from the build cache."""
    reg, stage = build
    return family.stage_kernel(build_stage(stage, reg).module, stage.id, stage.input_kind)


def prebuild(builds, jobs: int) -> None:
    """Compile every stage and variant side by side into the build cache (each nvcc run takes
    1-3 min for the Hopper stages, so building one after another would eat the device call);
    the loads that follow find them cached."""
    for _, outcome in build_all([(stage, reg) for reg, stage in builds], jobs):
        if isinstance(outcome, BuildError):
            raise outcome


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("stages", nargs="+")
    ap.add_argument("--time", action="store_true")
    ap.add_argument("--contenders", nargs="*", default=["cudnn", "flash", "fa4"])
    ap.add_argument("--repetitions", type=int, default=50)
    ap.add_argument("--only", nargs="*", default=[], metavar="TAG",
                    help="time only these problems of the timing list (e.g. 2x8x512x64 2x8x2048x128_causal)")
    ap.add_argument("--debug", action="store_true", help="print every check's error and budget")
    ap.add_argument("--distributions", nargs="+", default=[DEFAULT_DISTRIBUTION], metavar="NAME",
                    help="named input distributions to check on (the family's; `all`: every one)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="parallel builds")
    ap.add_argument("--variant", action="append", default=[], metavar="LABEL=STAGE:KEY=VAL,KEY=VAL",
                    help="also check and time STAGE built with these defines, under LABEL")
    args = ap.parse_args(argv)
    registry, _ = find_stage(args.stages[0])
    family = load_family(registry.family)
    builds = {stage_id: find_stage(stage_id) for stage_id in args.stages}
    for spec in args.variant:
        builds.update([parse_variant(spec)])
    started = time.monotonic()
    prebuild(builds.values(), args.jobs)
    print(f"[build] {len(builds)} builds in {time.monotonic() - started:.0f} s", flush=True)
    kernels = {label: load_kernel(family, build) for label, build in builds.items()}
    print(f"[gpu] {torch.cuda.get_device_name()}", flush=True)
    ok = check(family, kernels, args.debug, args.distributions)
    ok &= check_dependent_launches(family, kernels)
    if args.time:
        unknown = set(args.only) - {p.tag for p in problems(family, TIME_PROBLEMS)}
        if unknown:
            ap.error(f"--only: not in the timing list: {sorted(unknown)}")
        time_all(family, kernels, args.contenders, args.repetitions, set(args.only))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
