"""The protocol step (issue 46): the stage built with its ring-protocol checks (SDPA_PROTOCOL=1,
kernels/sdpa/instrument/protocol.cuh), launched once per check problem and dtype, its violation record
read after each launch. An ordering bug that today's latencies hide (a K slot released before the wgmma
reading it retires) passes every check and every stress round; these checks do not depend on timing.

Per launch the record says the first violation since the last read, one line naming the rule, the ring,
the slot, the ring index, the block and the warpgroup ('' when none). Any violation makes the stage
`incorrect` with reason `protocol` (stagelab.judge), and so does a record that cannot be read (a broken
CUDA context) or a checking build that exports none. Runs where the parameter file has
`steps: [protocol]`, on a CUDA device, for stages whose sources test the knob; skipped otherwise.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

import pandas as pd

from ..core import metrics
from ..core.build import build_stage
from ..core.errors import KernelHang
from ..core.knobs import stage_knobs
from ..core.supports import split_supported
from .watchdog import synchronize

PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"
PROTOCOL_KNOB = "SDPA_PROTOCOL"
STEP = "protocol"
# Violation lines named in a reason (the table has every launch's).
VIOLATIONS_NAMED = 1


@dataclass(frozen=True)
class ProtocolLaunch:
    problem: str
    dtype: str
    plan: str    # the launch plan it took (core.launch_plans; '' for a stage without plans)
    report: str  # the build's first violation in this launch, one line; '' when none

    @property
    def violated(self) -> bool:
        return bool(self.report)

    def describe(self) -> str:
        plan = f", plan {self.plan}" if self.plan else ""
        return f"{self.report} (problem {self.problem} {self.dtype}{plan})"


@dataclass
class ProtocolReport:
    stage: str
    launches: list[ProtocolLaunch] = field(default_factory=list)
    why_not_run: str = ""
    error: str = ""  # why the record could not be read: the step failed without a verdict on the rest
    seconds: float = 0.0

    @classmethod
    def not_run(cls, stage: str, why: str) -> ProtocolReport:
        return cls(stage, why_not_run=why)

    @property
    def violations(self) -> list[ProtocolLaunch]:
        return [launch for launch in self.launches if launch.violated]

    @property
    def passed(self) -> bool | None:
        """None when the step did not run."""
        if self.error or self.violations:
            return False
        return True if self.launches else None

    @property
    def status(self) -> str:
        return {None: SKIPPED, True: PASSED, False: FAILED}[self.passed]

    def failures(self) -> str:
        """The stage, then the first violation's line and where it happened, or why the record could
        not be read ('' when it passed or did not run)."""
        if self.error:
            return f"{self.stage}: {self.error}"
        found = self.violations
        if not found:
            return ""
        named = "; ".join(launch.describe() for launch in found[:VIOLATIONS_NAMED])
        return f"{self.stage}: {named}; {len(found)} of {len(self.launches)} launches violated the protocol"

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame([asdict(launch) for launch in self.launches], columns=["problem", "dtype", "plan", "report"])

    def metrics(self) -> dict[str, float]:
        if self.passed is None:
            return {}
        return {metrics.PROTOCOL_LAUNCHES.key(): len(self.launches),
                metrics.PROTOCOL_VIOLATIONS.key(): len(self.violations)}


def has_protocol_checks(stage, registry) -> bool:
    """Whether the stage's sources test the knob with the preprocessor (core.knobs): a header that
    only names it in a comment (sdpa_api.h declares the report's export) does not count."""
    return PROTOCOL_KNOB in (stage_knobs(stage, registry) or ())


def why_not_run(ctx) -> str:
    """Why the step does not run for this stage and parameter file ('' when it does)."""
    if STEP not in ctx.params.steps:
        return f"{ctx.params.name} has no `steps: [{STEP}]`"
    if not ctx.gpu_available:
        return "no CUDA device"
    if not has_protocol_checks(ctx.stage, ctx.registry):
        return f"{ctx.stage.id}'s sources do not test {PROTOCOL_KNOB} (no ring-protocol checks)"
    return ""


def protocol_step(ctx) -> ProtocolReport:
    """The protocol-checking build's launches and reports for one stage (ctx: core.context.StageContext)."""
    why = why_not_run(ctx)
    if why:
        return ProtocolReport.not_run(ctx.stage.id, why)
    started = time.perf_counter()
    module = build_stage(ctx.stage.with_defines({PROTOCOL_KNOB: 1}), ctx.registry).module
    report = ProtocolReport(ctx.stage.id)
    try:
        run_launches(ctx, module, report.launches)
    except KernelHang:
        raise  # the watched step records the hang; nothing more can run in this context
    except NoChecksCompiled as exc:  # the stage's kernels have no hooks (s9's FP8 copy): nothing to check
        return ProtocolReport.not_run(ctx.stage.id, f"{ctx.stage.id}: {exc}")
    except Exception as exc:  # a launch or a read that raised: the record cannot be trusted
        report.error = f"the violation record could not be read ({_first_line(exc)})"
    report.seconds = round(time.perf_counter() - started, 1)
    return report


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__


class NoChecksCompiled(RuntimeError):
    """The checking build exports no report: the stage's kernels carry no ring-protocol hooks."""


def read_report(module) -> str:
    """The build's first violation since the last read; raises NoChecksCompiled when the build has no
    checks (a stage whose kernels carry no hooks), RuntimeError when the record cannot be read."""
    reader = getattr(module, "protocol_report", None)
    text = reader() if reader is not None else None
    if text is None:
        raise NoChecksCompiled(f"the {PROTOCOL_KNOB}=1 build exports no protocol report (its kernels carry no "
                               "ring-protocol hooks)")
    return str(text)


def run_launches(ctx, module, launches: list[ProtocolLaunch]) -> None:
    """One launch per problem the stage takes and dtype, on fresh inputs of the first seed, each
    followed by a synchronize and a read of the record; appended to `launches` as they complete."""
    shapes, _ = split_supported(ctx.family, ctx.params.shapes, ctx.stage.supports)
    read_report(module)  # clears a record left by an earlier use of the module in this process
    for shape in shapes:
        for dtype_name in ctx.params.dtypes:
            try:
                launches.append(launch_and_read(ctx, module, shape, dtype_name))
            except KernelHang:
                raise
            except Exception as exc:  # named by the launch it followed
                raise RuntimeError(f"at {shape.tag} {dtype_name}: {_first_line(exc)}") from exc


def launch_and_read(ctx, module, shape, dtype_name: str) -> ProtocolLaunch:
    family = ctx.family
    inputs = family.make_inputs(shape, family.torch_dtype(dtype_name), ctx.params.seeds[0], ctx.device)
    out = family.new_output(shape, inputs)
    family.module_launch(module, shape, inputs, out, ctx.stage.input_kind)()
    synchronize(f"protocol {shape.tag} {dtype_name}", shape.flops())
    return ProtocolLaunch(shape.tag, dtype_name, family.last_launch_plan(module), read_report(module))
