"""Dependent launches: does a launch see everything the launch before it wrote?

A kernel launched with programmatic dependent launch (PDL) may start while the previous kernel
in its stream is still running; it is right only if it waits for that kernel before its first
read of an input and its first write of an output. Timing replays one launch on fixed inputs and
every correctness check launches once per input, so a kernel whose wait is missing or misplaced
would pass both. Here launches form a chain in which each one's input is its predecessor's
output (Family.chained_inputs); the chain runs back to back on one stream, then replayed from
one CUDA graph (as throughput timing runs), with every output poisoned before each run, and each
link must match, bit for bit, the same chain run one launch at a time with the device
synchronised in between. Every wait is the watchdog's (stagelab.measure.watchdog): a chain that hangs
raises KernelHang instead of blocking.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

import torch

from ..core.errors import KernelHang
from ..core.family import Family
from .watchdog import synchronize

CHAIN_LINKS = 8
CHAIN_RUNS = ("stream", "graph")


@dataclass(frozen=True)
class ChainResult:
    """Which links of each back-to-back run differed from the synchronised chain."""

    problem: str
    dtype: str
    links: int
    mismatched: dict[str, tuple[int, ...]]  # run ("stream", "graph") -> link indices
    error: str = ""                          # what a launch raised, if one did

    @property
    def passed(self) -> bool:
        return not self.error and not any(self.mismatched.values())

    def as_row(self) -> dict:
        row = {"problem": self.problem, "dtype": self.dtype, "links": self.links, "passed": self.passed}
        return row | {f"mismatched_{run}": " ".join(map(str, self.mismatched.get(run, ()))) for run in CHAIN_RUNS}

    def describe(self) -> str:
        if self.error:
            return f"{self.problem} {self.dtype}: a chained launch raised {self.error}"
        if self.passed:
            return f"{self.problem} {self.dtype}: {self.links} chained launches match"
        bad = "; ".join(f"{run}: links {list(links)}" for run, links in self.mismatched.items() if links)
        return f"{self.problem} {self.dtype}: chained launches differ from the synchronised chain ({bad})"


def _chain(family: Family, module: ModuleType, problem, inputs, links: int, input_kind: str):
    """The launches of one chain (callables) and the outputs they write, link by link."""
    calls, outputs = [], []
    link_inputs = inputs
    for _ in range(links):
        out = family.new_output(problem, inputs)
        calls.append(family.module_launch(module, problem, link_inputs, out, input_kind))
        outputs.append(out)
        link_inputs = family.chained_inputs(inputs, out, input_kind)
    return calls, outputs


def _poison(outputs) -> None:
    for out in outputs:
        out.fill_(float("nan"))


def _mismatched(outputs, expected, what: str, flops: float) -> tuple[int, ...]:
    synchronize(what, flops, launches=len(outputs))
    return tuple(i for i, (out, ref) in enumerate(zip(outputs, expected)) if not torch.equal(out, ref))


def check_chain(family: Family, module: ModuleType, problem, dtype: str, *, links: int = CHAIN_LINKS,
                seed: int = 0, input_kind: str = "") -> ChainResult:
    """One chain of `links` dependent launches of a built stage on one problem (needs CUDA)."""
    inputs = family.make_inputs(problem, family.torch_dtype(dtype), seed, "cuda")
    calls, outputs = _chain(family, module, problem, inputs, links, input_kind)
    what, flops = f"chain {problem.tag} {dtype}", problem.flops()
    _poison(outputs)
    expected = []
    for link, (call, out) in enumerate(zip(calls, outputs)):
        call()
        synchronize(f"{what} link {link}", flops)
        expected.append(out.clone())
    _poison(outputs)
    for call in calls:
        call()
    stream = _mismatched(outputs, expected, f"{what} (stream)", flops)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for call in calls:
            call()
    _poison(outputs)
    graph.replay()
    mismatched = dict(zip(CHAIN_RUNS, (stream, _mismatched(outputs, expected, f"{what} (graph)", flops))))
    return ChainResult(problem.tag, dtype, links, mismatched)


def check_chains(family: Family, module: ModuleType, problems, dtype: str, *, input_kind: str = "",
                 progress=None) -> list[ChainResult]:
    """One chain per problem; a chain whose launches raise is recorded failed with the error, one
    that hangs raises KernelHang."""
    results = []
    for problem in problems:
        try:
            results.append(check_chain(family, module, problem, dtype, input_kind=input_kind))
        except KernelHang:
            raise  # the context is lost: no further chain can run
        except Exception as exc:  # noqa: BLE001 -- a crashing launch is a failed check, not a crashed run
            results.append(ChainResult(problem.tag, dtype, 0, {}, f"{type(exc).__name__}: {exc}"))
        if progress:
            progress(f"chain {problem.tag}")
    return results
