"""compute-sanitizer on a stage: memcheck, racecheck and synccheck, each wrapping a child process
that launches the built stage on the family's small, ragged problems (odd lengths, causal and not)
in every dtype (see `launch`). A tool that reports an error, or a child that dies under it, fails
the stage's sanitizing, and the judge calls such a stage `incorrect` whatever its numbers.

Without a GPU the step is skipped; without compute-sanitizer it is recorded unavailable. Neither
is an error, and neither fails the stage.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import pandas as pd

from .launch import child_command, child_environment, find_tool, run_under_tool

SANITIZER = "compute-sanitizer"
SANITIZER_TOOLS = ("memcheck", "racecheck", "synccheck")
# Per tool: racecheck instruments every shared-memory access and is the slowest of the three.
TOOL_TIMEOUT_S = 300
# Reports printed per tool; the summary line counts them all.
PRINT_LIMIT = 20
# Every tensor its own cudaMalloc: memcheck sees the bounds of allocations, and torch's caching
# allocator would otherwise hide a store past a tensor's end inside its own larger segment.
CHILD_ENVIRONMENT = {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}
# torch probes the driver with calls that may fail by design; those are not the kernel's errors.
# A stage's own failed launch still fails the step: the child raises, and the verdict is `crashed`.
QUIET_API_ERRORS = ("--report-api-errors", "no")

CLEAN, ERRORS, CRASHED, TIMEOUT, UNAVAILABLE, SKIPPED = "clean", "errors", "crashed", "timeout", "unavailable", "skipped"
FAILING = (ERRORS, CRASHED)

# `========= ERROR SUMMARY: 2 errors` (every tool) and, from racecheck,
# `========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)`.
_ERROR_SUMMARY = re.compile(r"ERROR SUMMARY: (\d+) errors?")
_RACECHECK_SUMMARY = re.compile(r"RACECHECK SUMMARY: (\d+) hazards? displayed \((\d+) errors?, (\d+) warnings?\)")


@dataclass
class SanitizerVerdict:
    tool: str
    status: str
    errors: int | None = None
    warnings: int | None = None
    log: str = ""
    seconds: float | None = None

    @property
    def failed(self) -> bool:
        return self.status in FAILING

    def as_row(self) -> dict:
        return {"tool": self.tool, "status": self.status, "errors": self.errors, "warnings": self.warnings,
                "seconds": self.seconds}


def parse_verdict(tool: str, output: str, returncode: int | None) -> SanitizerVerdict:
    """The verdict from the tool's summary lines and the exit status (None: it timed out)."""
    counts = [int(m[1]) for m in _ERROR_SUMMARY.finditer(output)]
    warnings = None
    if race := _RACECHECK_SUMMARY.search(output):
        counts.append(int(race[2]))
        warnings = int(race[3])
    errors = max(counts) if counts else None
    if errors:
        status = ERRORS
    elif returncode is None:
        status = TIMEOUT
    elif returncode != 0 or errors is None:
        status = CRASHED  # the child failed, or the tool never reached its summary
    else:
        status = CLEAN
    return SanitizerVerdict(tool, status, errors, warnings, output)


@dataclass
class SanitizeReport:
    verdicts: list[SanitizerVerdict] = field(default_factory=list)

    @classmethod
    def not_run(cls, status: str, why: str) -> "SanitizeReport":
        return cls([SanitizerVerdict(tool, status, log=why) for tool in SANITIZER_TOOLS])

    @property
    def passed(self) -> bool | None:
        """False when a tool found errors or the child died under it; True when every tool ran
        clean; None when sanitizing did not run (no GPU, no compute-sanitizer, a time-out)."""
        if any(v.failed for v in self.verdicts):
            return False
        return True if self.verdicts and all(v.status == CLEAN for v in self.verdicts) else None

    @property
    def status(self) -> str:
        """One word for the run: the worst tool's status."""
        order = (ERRORS, CRASHED, TIMEOUT, UNAVAILABLE, SKIPPED, CLEAN)
        found = {v.status for v in self.verdicts}
        return next((s for s in order if s in found), SKIPPED)

    def failures(self) -> str:
        return ", ".join(f"{v.tool}: {v.status}" + (f" ({v.errors} errors)" if v.errors else "")
                         for v in self.verdicts if v.failed)

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame([v.as_row() for v in self.verdicts])


def sanitizer_command(executable: str, tool: str, child: list[str]) -> list[str]:
    return [executable, "--tool", tool, "--print-limit", str(PRINT_LIMIT), *QUIET_API_ERRORS, *child]


def sanitize_step(ctx, run: Callable = run_under_tool) -> SanitizeReport:
    """Each tool on the stage's child launch, the three side by side: each child is mostly CPU work
    under instrumentation, so together they take about as long as racecheck alone rather than the
    sum (H100: 5-8 s for memcheck and synccheck, 7-36 s for racecheck). `run(command, timeout_s,
    env)` is replaceable in tests."""
    if not ctx.gpu_available:
        return SanitizeReport.not_run(SKIPPED, "no CUDA device")
    executable = find_tool(SANITIZER)
    if executable is None:
        return SanitizeReport.not_run(UNAVAILABLE, f"{SANITIZER} is neither on PATH nor in the CUDA toolkit")
    child = child_command(ctx, "--sanitize")

    def one_tool(tool: str) -> SanitizerVerdict:
        started = time.perf_counter()
        returncode, output = run(sanitizer_command(executable, tool, child), TOOL_TIMEOUT_S,
                                 child_environment(**CHILD_ENVIRONMENT))
        verdict = parse_verdict(tool, output, returncode)
        verdict.seconds = round(time.perf_counter() - started, 1)
        return verdict

    with ThreadPoolExecutor(max_workers=len(SANITIZER_TOOLS)) as pool:
        return SanitizeReport(list(pool.map(one_tool, SANITIZER_TOOLS)))
