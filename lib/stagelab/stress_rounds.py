"""The GPU side of the stress step (stagelab.stress): builds with the delay knob, the concurrent
load, and the rounds of checks and chains."""

from __future__ import annotations

import time

import torch

from .build import build_stage
from .chain import check_chains
from .stress import Perturbation, StressRound
from .watchdog import synchronize

# The load: LOAD_SPINNERS one-thread blocks, each on a stream of its own, spin LOAD_SPIN_CYCLES
# (~50 ms at 2 GHz) beside the stage's blocks on the SMs they land on; one more stream copies
# LOAD_COPY_BYTES LOAD_COPIES times (64 MiB is past an H100's 50 MiB L2, so every copy goes to
# DRAM: ~60 us each at 2 TB/s read + write, ~50 ms in all), competing with the stage's TMA loads.
LOAD_SPINNERS = 16
LOAD_SPIN_CYCLES = 100_000_000
LOAD_COPY_BYTES = 64 << 20
LOAD_COPIES = 800


class ConcurrentLoad:
    """Work on side streams while one round runs (`start` before it, `finish` after)."""

    def __init__(self, device: torch.device):
        self.streams = [torch.cuda.Stream(device) for _ in range(LOAD_SPINNERS + 1)]
        self.src = torch.empty(LOAD_COPY_BYTES, dtype=torch.uint8, device=device)
        self.dst = torch.empty_like(self.src)

    def start(self) -> None:
        copier, *spinners = self.streams
        with torch.cuda.stream(copier):
            for _ in range(LOAD_COPIES):
                self.dst.copy_(self.src)
        for stream in spinners:
            with torch.cuda.stream(stream):
                torch.cuda._sleep(LOAD_SPIN_CYCLES)

    def finish(self) -> None:
        for stream in self.streams:
            synchronize("the stress step's concurrent load", stream=stream)


def _first_failure(checks, chains) -> str:
    for result in checks:
        if not result.passed:
            return f"check {result.shape} {result.dtype} seed {result.seed}: {result.reason}"[:300]
    for chain in chains:
        if not chain.passed:
            return chain.describe()[:300]
    return ""


def one_round(ctx, kernel, module, plan: Perturbation, index: int, load: ConcurrentLoad | None) -> StressRound:
    """The family's checks on every problem, dtype and seed, then a chain per problem."""
    p = ctx.params
    started = time.perf_counter()
    if load is not None:
        load.start()
    checks = ctx.family.check_stage(kernel, p.shapes, p.dtypes, p.seeds, ctx.device)
    chains = check_chains(ctx.family, module, p.shapes, p.dtypes[0], input_kind=ctx.stage.input_kind)
    if load is not None:
        load.finish()
    return StressRound(plan.label, index, len(checks), sum(not c.passed for c in checks), len(chains),
                       sum(not c.passed for c in chains), round(time.perf_counter() - started, 2),
                       _first_failure(checks, chains))


def run_rounds(ctx, plans: list[Perturbation]) -> list[StressRound]:
    """Every perturbation's rounds, its build first (cached like any build)."""
    rounds = []
    load = ConcurrentLoad(ctx.device) if any(plan.load for plan in plans) else None
    for plan in plans:
        module = build_stage(ctx.stage.with_defines(plan.defines()), ctx.registry).module
        kernel = ctx.family.stage_kernel(module, ctx.stage.id, ctx.stage.input_kind)
        for index in range(ctx.params.stress.rounds):
            rounds.append(one_round(ctx, kernel, module, plan, index, load if plan.load else None))
    return rounds
