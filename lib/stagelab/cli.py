"""The `stagelab` command: run stage notebooks, list stages, show resources, write reports."""

from __future__ import annotations

import argparse
import sys

from .errors import StagelabError


def _cmd_run(args) -> int:
    from .batch import run_batch

    summary = run_batch(args.stages or None, args.params, timeout_s=args.timeout, experiment=args.experiment,
                        kernel_name=args.kernel)
    print(summary.drop(columns=["run_id"]).to_markdown(index=False, floatfmt=".4g"))
    bad = summary["outcome"].isin(["error", "build_failed", "incorrect", "resource_fail"])
    return 1 if bad.any() and args.strict else 0


def _cmd_stages(args) -> int:
    from .registry import load_registry

    registry = load_registry()
    for stage in registry.stages.values():
        print(f"{stage.id:24s} parent={stage.parent or '-':18s} min_gain={stage.min_gain:.0%}  {stage.title}")
    return 0


def _cmd_resources(args) -> int:
    import pandas as pd

    from .build import build_stage
    from .registry import load_registry
    from .resources import evaluate_gates

    registry = load_registry()
    for stage_id in args.stages or list(registry.stages):
        stage = registry.get(stage_id)
        result = build_stage(stage, registry)
        print(f"## {stage_id} ({'cached' if result.cached else 'built'}, key {result.key})")
        columns = ["registers", "total_shared_memory_bytes", "stack_frame_bytes", "spill_store_bytes",
                   "spill_load_bytes", "barriers"]
        table = pd.DataFrame([{"kernel": r.tag, **{c: r.as_row()[c] for c in columns}} for r in result.resources])
        print(table.to_markdown(index=False))
        failed = [g for g in evaluate_gates(result.resources, stage.gates) if not g.passed]
        print("gates: " + ("all pass" if not failed else "; ".join(f"{g.gate} {g.kernel}: {g.actual} > {g.limit}" for g in failed)))
    return 0


def _build_one(stage_id: str) -> str:
    from .build import build_stage
    from .registry import load_registry

    registry = load_registry()
    result = build_stage(registry.get(stage_id), registry, load=False)
    return f"{stage_id}: {'cached' if result.cached else 'built'} in {result.seconds:.1f}s (key {result.key})"


def _cmd_build(args) -> int:
    """Build stages in parallel processes so later notebook runs find them cached."""
    from concurrent.futures import ProcessPoolExecutor, as_completed

    from .errors import BuildError
    from .registry import load_registry

    stage_ids = args.stages or list(load_registry().stages)
    failed = 0
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = {pool.submit(_build_one, s): s for s in stage_ids}
        for future in as_completed(futures):
            try:
                print(future.result(), flush=True)
            except BuildError as exc:
                failed += 1
                print(f"{futures[future]}: build failed\n{exc}", flush=True)
    return 1 if failed else 0


def _cmd_report(args) -> int:
    from .report import write_report

    path = write_report(args.params, out_dir=args.out, experiment=args.experiment, gpu=args.gpu)
    print(f"wrote {path}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    from .tracking import DEFAULT_EXPERIMENT

    parser = argparse.ArgumentParser(prog="stagelab", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="execute stage notebooks through papermill and log them to MLflow")
    run.add_argument("--stages", nargs="*", help="stage ids (default: every stage in the registry, in order)")
    run.add_argument("--params", default="params/acceptance.yaml", help="parameter file")
    run.add_argument("--timeout", type=int, default=None, help="seconds per notebook (default: the file's timeout_s)")
    run.add_argument("--experiment", default=DEFAULT_EXPERIMENT)
    run.add_argument("--kernel", default="python3", help="Jupyter kernel name")
    run.add_argument("--strict", action="store_true", help="exit 1 when any stage errs, fails to build or is incorrect")
    run.set_defaults(func=_cmd_run)

    stages = sub.add_parser("stages", help="list the stage registry")
    stages.set_defaults(func=_cmd_stages)

    res = sub.add_parser("resources", help="build stages (no GPU needed) and print their ptxas resource report")
    res.add_argument("stages", nargs="*")
    res.set_defaults(func=_cmd_resources)

    bld = sub.add_parser("build", help="compile stages (in parallel) into the build cache; no GPU needed")
    bld.add_argument("stages", nargs="*")
    bld.add_argument("--jobs", type=int, default=4)
    bld.set_defaults(func=_cmd_build)

    rep = sub.add_parser("report", help="write docs/results/<gpu>.md (+ plot) from the MLflow store")
    rep.add_argument("--params", nargs="+", default=["acceptance", "long"],
                     help="parameter-file names whose latest runs the page shows")
    rep.add_argument("--out", default=None, help="folder (default docs/results)")
    rep.add_argument("--gpu", default=None, help="GPU name as tagged (default: the newest run's GPU)")
    rep.add_argument("--experiment", default=DEFAULT_EXPERIMENT)
    rep.set_defaults(func=_cmd_report)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except StagelabError as exc:
        print(f"stagelab: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
