"""`stagelab stages`, `resources` and `build`: the registries and the build cache (no GPU needed)."""

from __future__ import annotations

from .workspace import add_family_option


def _cmd_stages(args) -> int:
    from ..core.registry import all_registries

    for family, registry in all_registries().items():
        if args.family and family != args.family:
            continue
        print(f"# {family} ({registry.directory})")
        for stage in registry.stages.values():
            print(f"{stage.id:24s} {stage.backend:7s} parent={stage.parent or '-':22s} min_gain={stage.min_gain:.0%}  "
                  f"{stage.title}")
    return 0


def _stage_ids(requested: list[str] | None, family: str | None = None) -> list[str]:
    """The named stages, or every stage of the family (of every family without --family)."""
    from ..core.registry import all_registries, find_stage

    if requested:
        for stage_id in requested:
            find_stage(stage_id)  # a clear error for an unknown id before any work starts
        return list(requested)
    return [s for name, registry in all_registries().items() if family in (None, name) for s in registry.stages]


def _cmd_resources(args) -> int:
    import pandas as pd

    from ..core.build import build_stage
    from ..core.family import load_family
    from ..core.registry import find_stage
    from ..measure.steps import resource_report

    failed_any = False
    for stage_id in _stage_ids(args.stages, args.family):
        registry, stage = find_stage(stage_id)
        result = build_stage(stage, registry)
        print(f"## {stage_id} ({result.summary})")
        columns = ["registers", "total_shared_memory_bytes", "stack_frame_bytes", "spill_store_bytes",
                   "spill_load_bytes", "barriers"]
        table = pd.DataFrame([{"kernel": r.tag, **{c: r.as_row()[c] for c in columns}} for r in result.resources])
        print(table.to_markdown(index=False))
        report = resource_report(stage, result, load_family(registry.family).watched_opcodes)
        print(pd.DataFrame(report.instructions).to_markdown(index=False))
        failed = [g for g in report.gates if not g.passed]
        failed_any = failed_any or bool(failed)
        print("gates: " + ("all pass" if not failed else
                           "; ".join(f"{g.gate} {g.kernel}: {g.actual} (limit {g.limit})" for g in failed)))
    return 1 if failed_any else 0


def with_parents(stage_ids: list[str]) -> list[str]:
    """The stages and the parent each is timed beside in its run (a stage run builds both), each once,
    a parent before the first stage that names it."""
    from ..core.registry import find_stage

    ordered: dict[str, None] = {}
    for stage_id in stage_ids:
        parent = find_stage(stage_id)[1].parent
        if parent is not None:
            ordered.setdefault(parent)
        ordered.setdefault(stage_id)
    return list(ordered)


def protocol_builds(builds: list[tuple]) -> list[tuple[str, tuple]]:
    """(label, (stage, registry)) of the ring-protocol-checking build the protocol step makes, for each
    build whose sources test the knob: the same stage and defines, so the step finds it cached (its
    nvcc took 130-140 s of each s17/s18 acceptance notebook on the H200 machine when it did not)."""
    from ..measure.protocol import PROTOCOL_KNOB, has_protocol_checks

    return [(f"{stage.id} ({PROTOCOL_KNOB}=1)", (stage.with_defines({PROTOCOL_KNOB: 1}), registry))
            for stage, registry in builds if has_protocol_checks(stage, registry)]


def planned_builds(named: list[str], *, parents: bool, protocol: bool, defines: dict) -> list[tuple[str, tuple]]:
    """(label, (stage, registry)) of each build `stagelab build` makes: the named stages (with --define's
    overrides, each checked against the stage's knobs first), their parents before them (--with-parents),
    and the named stages' protocol-checking builds (--protocol: the protocol step runs in their
    notebooks, not their parents')."""
    from ..core.knobs import check_defines
    from ..core.registry import find_stage

    stage_ids = with_parents(named) if parents else named
    builds = []
    for registry, stage in map(find_stage, stage_ids):
        if defines:
            check_defines(stage, registry, defines, "stagelab build --define")
            stage = stage.with_defines(defines)
        builds.append((stage, registry))
    extra = protocol_builds([b for i, b in zip(stage_ids, builds) if i in named]) if protocol else []
    return list(zip(stage_ids, builds)) + extra


def _cmd_build(args) -> int:
    """Build stages in parallel processes so later notebook runs find them cached (planned_builds says
    which: a batch's notebook would otherwise build its parent or protocol build inside its time)."""
    from ..core.build import build_all
    from ..core.errors import BuildError
    from ..core.trial_spec import parse_defines

    labelled = planned_builds(_stage_ids(args.stages, args.family), parents=args.with_parents,
                              protocol=args.protocol, defines=parse_defines(args.define))
    failed = 0
    for index, outcome in build_all([build for _, build in labelled], args.jobs):
        label = labelled[index][0]
        if isinstance(outcome, BuildError):
            failed += 1
            print(f"{label}: build failed\n{outcome}", flush=True)
        else:
            print(f"{label}: {outcome.summary}", flush=True)
    return 1 if failed else 0


def add_parsers(sub) -> None:
    """`stages`, `resources` and `build`: the registry and the build cache, no GPU needed."""
    stages = sub.add_parser("stages", help="list every family's stage registry")
    add_family_option(stages, "list only this family's stages")
    stages.set_defaults(func=_cmd_stages)

    res = sub.add_parser("resources", help="build stages (no GPU needed) and print their ptxas resource report")
    res.add_argument("stages", nargs="*")
    add_family_option(res)
    res.set_defaults(func=_cmd_resources)

    bld = sub.add_parser("build", help="compile stages (in parallel) into the build cache; no GPU needed")
    bld.add_argument("stages", nargs="*")
    add_family_option(bld)
    bld.add_argument("--jobs", type=int, default=4)
    bld.add_argument("--define", action="append", default=[], metavar="K=V",
                     help="build with this define override (repeatable), e.g. SDPA_PROTOCOL=1")
    bld.add_argument("--with-parents", action="store_true",
                     help="build each named stage's parent too (a stage run times the stage beside it)")
    bld.add_argument("--protocol", action="store_true",
                     help="build each named stage's ring-protocol-checking variant too (the protocol step's build), "
                          "where its sources have one")
    bld.set_defaults(func=_cmd_build)
