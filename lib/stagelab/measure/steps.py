"""The measuring steps of a stage run. Each takes the run's context and returns a typed result;
none of them logs anything (the recorder does) or decides anything (the judge does)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from functools import partial

import torch

from ..core.build import BuildResult, build_stage
from ..core.context import StageContext
from .chain import check_chains
from .family_checks import CheckAborted, check_kernels, check_stage
from ..core.envinfo import read_clocks
from ..core.errors import KernelHang
from ..core.distributions import stage_distributions
from ..core.registry import Stage
from ..core.resources import evaluate_gates
from ..core.sass import opcode_count, parse_sass_forms
from ..core.supports import refusal, split_supported
from .results import PARENT_PREFIX, Built, CheckReport, ResourceReport, TimingReport, variant_label
from .timing import L2Flusher, time_contenders, time_floor


def progress_bar(iterable=None, *, desc: str, total: int | None = None):
    from tqdm.auto import tqdm

    return tqdm(iterable, desc=desc, total=total, leave=False)


def _stepper(bar):
    """A progress callback that names the item and advances the bar by one."""
    def step(label: str) -> None:
        bar.set_postfix_str(label)
        bar.update(1)
    return step


def build_step(ctx: StageContext, with_parent: bool = True) -> Built:
    """The stage, and (with_parent) its parent when there is a GPU to time them side by side."""
    built = Built(build_stage(ctx.stage, ctx.registry))
    if with_parent and ctx.parent is not None and ctx.gpu_available:
        built.parent = build_stage(ctx.parent, ctx.registry)
    return built


def resource_report(stage: Stage, result: BuildResult, watched_opcodes: Sequence[str]) -> ResourceReport:
    """ptxas numbers and SASS opcode counts per kernel instance, judged on the registry's gates.
    Counted: the family's watched opcodes and every opcode a gate names, each as it is named (a bare
    opcode counts all its forms, one with modifiers that form alone: core.sass.opcode_count)."""
    gates = stage.gates
    forms = parse_sass_forms(result.sass_listing())
    watched = dict.fromkeys((*watched_opcodes, *gates.sass_require, *gates.sass_forbid))
    opcodes = {r.tag: {op: opcode_count(forms.get((r.mangled, r.arch), Counter()), op) for op in watched}
               for r in result.resources}
    instructions = [{"kernel": tag, **counts} for tag, counts in opcodes.items()]
    return ResourceReport(result.resources, evaluate_gates(result.resources, gates, opcodes), instructions)


def resource_step(ctx: StageContext, built: Built) -> ResourceReport:
    return resource_report(ctx.stage, built.stage, ctx.family.watched_opcodes)


def check_step(ctx: StageContext, built: Built) -> CheckReport:
    """The family's checks on every problem, dtype, seed and input distribution of the parameter
    file that applies to the stage's inputs; then one chain of dependent launches per problem in
    the first dtype (stagelab.measure.chain: what a launch that may start before its predecessor ends must
    get right). A problem the stage does not declare it takes (stages.yaml `supports:`) is skipped
    with the reason, before any launch. Each check keeps the launch plan its launches took, the
    report the plans the build declares and the file's coverage rule (core.launch_plans)."""
    p, family, module = ctx.params, ctx.family, built.stage.module
    kernel = family.stage_kernel(module, ctx.stage.id, ctx.stage.input_kind)
    distributions = stage_distributions(ctx.family, p.distributions, ctx.stage.input_kind)
    shapes, skipped = split_supported(ctx.family, p.shapes, ctx.stage.supports)
    bar = progress_bar(desc=f"{ctx.stage.id} checks",
                       total=len(shapes) * len(p.dtypes) * len(p.seeds) * len(distributions) + len(shapes))
    step = _stepper(bar)

    def plan_of() -> str:  # read after each check's launches: the plan they took
        return family.last_launch_plan(module)

    results = check_stage(family, kernel, shapes, p.dtypes, p.seeds, ctx.device, progress=step,
                          distributions=distributions, plan_of=plan_of) if shapes else []
    chains = check_chains(family, module, shapes, p.dtypes[0], input_kind=ctx.stage.input_kind, progress=step)
    bar.close()
    return CheckReport(results, chains, skipped, declared_plans=family.declared_launch_plans(module),
                       coverage=p.coverage)


def shares_checks(contexts: Sequence[StageContext]) -> bool:
    """Whether the contexts check the same inputs the same way: one family, parameter file, device,
    input kind and supports, judged on the lab's float64 budget (a kind's own checks go one build at
    a time, through check_step)."""
    first = contexts[0]
    same = all(c.family is first.family and c.params is first.params and c.device == first.device
               and c.stage.input_kind == first.stage.input_kind and c.stage.supports == first.stage.supports
               for c in contexts)
    return same and first.family.kind_checks(first.stage.input_kind) is None


def shared_check_step(entries: dict[str, tuple[StageContext, Built]]) -> dict[str, CheckReport]:
    """check_step of several builds (a trial session's default and variants, whose contexts
    shares_checks) in one pass: each check's inputs, float64 reference and budget are made once and
    every build is judged on them (measure.family_checks.check_kernels); then each build's chains.
    Raises CheckAborted naming the build that hung or lost the CUDA context."""
    ctx = next(iter(entries.values()))[0]
    p, family = ctx.params, ctx.family
    distributions = stage_distributions(family, p.distributions, ctx.stage.input_kind)
    shapes, skipped = split_supported(family, p.shapes, ctx.stage.supports)
    modules = {label: built.stage.module for label, (_, built) in entries.items()}
    kernels = {label: family.stage_kernel(modules[label], c.stage.id, c.stage.input_kind).into
               for label, (c, _) in entries.items()}
    plan_readers = {label: partial(family.last_launch_plan, module) for label, module in modules.items()}
    combinations = len(shapes) * len(p.dtypes) * len(p.seeds) * len(distributions)
    bar = progress_bar(desc=f"{ctx.stage.id} checks, {len(entries)} builds", total=combinations + len(shapes) * len(entries))
    step = _stepper(bar)
    results = check_kernels(family, kernels, shapes, p.dtypes, p.seeds, ctx.device, progress=step,
                            distributions=distributions, plan_of=plan_readers)
    reports = {}
    for label, module in modules.items():
        try:
            chains = check_chains(family, module, shapes, p.dtypes[0], input_kind=ctx.stage.input_kind, progress=step)
        except KernelHang as exc:
            raise CheckAborted(label, exc) from exc
        reports[label] = CheckReport(results[label], chains, skipped, declared_plans=family.declared_launch_plans(module),
                                     coverage=p.coverage)
    bar.close()
    return reports


def _contenders(ctx: StageContext, builds: dict[str, BuildResult | None], shape, inputs,
                unavailable: dict[str, str]) -> dict:
    """Each labelled build that has a loaded module, the stage's launch variants (Family.launch_variants,
    for the build labelled as the run's stage), then the parameter file's library contenders and
    those the family brings for the stage's input kind. Every build gets the same standard inputs;
    the family converts them for a stage of another input kind (e.g. an FP8 stage beside its fp16
    parent). A contender that cannot run here is recorded in `unavailable`."""
    family = ctx.family
    contenders = {}
    for label, result in builds.items():
        if result is not None and result.module is not None:
            out = family.new_output(shape, inputs)
            kind = ctx.registry.get(result.stage_id).input_kind
            contenders[label] = family.module_launch(result.module, shape, inputs, out, kind)
            if label == ctx.stage.id:
                variants = family.launch_variants(result.module, shape, inputs, family.new_output(shape, inputs), kind)
                contenders.update({variant_label(label, name): launch for name, launch in variants.items()})
    for name in (*ctx.params.timing.contenders, *family.kind_contenders(ctx.stage.input_kind)):
        try:
            contenders[family.contender_label(name)] = family.contender(name, shape, inputs)
        except RuntimeError as exc:
            unavailable[f"{name}/{shape.tag}"] = str(exc).splitlines()[0][:200]
    return contenders


def _builds_taking(ctx: StageContext, builds: dict[str, BuildResult | None], shape,
                   skipped: dict[str, str]) -> dict[str, BuildResult]:
    """The loaded builds whose stage takes the problem (stages.yaml `supports:`); the others are
    recorded in `skipped` (label/problem -> reason) and never launched on it."""
    taking = {}
    for label, result in builds.items():
        if result is None or result.module is None:
            continue
        reason = refusal(ctx.family, shape, ctx.registry.get(result.stage_id).supports)
        if reason:
            skipped[f"{label}/{shape.tag}"] = reason
        else:
            taking[label] = result
    return taking


def timing_step(ctx: StageContext, built: Built) -> TimingReport:
    """The stage beside its parent and the library contenders."""
    return time_builds(ctx, {ctx.stage.id: built.stage, PARENT_PREFIX + (ctx.stage.parent or ""): built.parent})


def time_builds(ctx: StageContext, builds: dict[str, BuildResult | None], desc: str | None = None) -> TimingReport:
    """Labelled builds and the library contenders, timed in this process on the same inputs per problem
    (a tune passes one build per configuration); `ctx.stage.id` labels the report's stage."""
    spec = ctx.params.timing
    dtype = ctx.family.torch_dtype(spec.dtype)
    flush = L2Flusher(ctx.device)
    report = TimingReport([], ctx.stage.id, ctx.family.library_prefix, spec.primary_mode,
                          floor_us=time_floor(spec, flush))
    for shape in progress_bar(ctx.params.timed_shapes(), desc=desc or f"{ctx.stage.id} timing"):
        taking = _builds_taking(ctx, builds, shape, report.skipped)
        if not taking:  # no build to time: the library contenders alone would say nothing of the stage
            continue
        inputs = ctx.family.make_inputs(shape, dtype, ctx.params.seeds[0], ctx.device)
        contenders = _contenders(ctx, taking, shape, inputs, report.unavailable)
        report.stats += time_contenders(contenders, shape, spec, flush, element_bytes=dtype.itemsize)
        del inputs, contenders
        torch.cuda.empty_cache()
    report.clocks = read_clocks("after_timing_")
    return report
