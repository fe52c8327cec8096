"""The `stagelab` command: run stage notebooks, list stages, build, show resources, write reports,
regenerate notebooks, open the MLflow UI, close runs left RUNNING, back up the store, try changes
to a stage and read its journal."""

from __future__ import annotations

import argparse
import os
import sys

from .cli_try import add_trial_parsers, route
from .errors import RunnerStopped, StagelabError
from .server import DEFAULT_HOST, DEFAULT_PORT

# The shell's convention for a process ended by signal N: exit status 128 + N (130 for SIGINT).
SIGNAL_EXIT_BASE = 128


def _cmd_run(args) -> int:
    from .batch import run_batch
    from .gpus import resolve_gpus
    from .shard import Shard

    gpus = resolve_gpus(args.gpus)  # both checked before any work: a bad value is one line and exit 2
    shard = Shard.parse(args.shard) if args.shard is not None else None
    summary = run_batch(args.stages or None, args.params, timeout_s=args.timeout, experiment=args.experiment,
                        kernel_name=args.kernel, resume=args.resume, gpus=gpus, shard=shard, steps=args.steps)
    shown = summary.drop(columns=["run_id"] + ([] if gpus else ["gpu"]))
    print(shown.to_markdown(index=False, floatfmt=".4g"))
    bad = summary["outcome"].isin(["error", "build_failed", "incorrect", "resource_fail"])
    return 1 if bad.any() and args.strict else 0


def _cmd_stages(args) -> int:
    from .registry import all_registries

    for family, registry in all_registries().items():
        if args.family and family != args.family:
            continue
        print(f"# {family}")
        for stage in registry.stages.values():
            print(f"{stage.id:24s} parent={stage.parent or '-':22s} min_gain={stage.min_gain:.0%}  {stage.title}")
    return 0


def _stage_ids(requested: list[str] | None) -> list[str]:
    """The named stages (any family), or every stage of every family."""
    from .registry import all_registries, find_stage

    if requested:
        for stage_id in requested:
            find_stage(stage_id)  # a clear error for an unknown id before any work starts
        return list(requested)
    return [s for registry in all_registries().values() for s in registry.stages]


def _cmd_resources(args) -> int:
    import pandas as pd

    from .build import build_stage
    from .registry import find_stage
    from .steps import resource_report

    failed_any = False
    for stage_id in _stage_ids(args.stages):
        registry, stage = find_stage(stage_id)
        result = build_stage(stage, registry)
        print(f"## {stage_id} ({'cached' if result.cached else 'built'}, key {result.key})")
        columns = ["registers", "total_shared_memory_bytes", "stack_frame_bytes", "spill_store_bytes",
                   "spill_load_bytes", "barriers"]
        table = pd.DataFrame([{"kernel": r.tag, **{c: r.as_row()[c] for c in columns}} for r in result.resources])
        print(table.to_markdown(index=False))
        report = resource_report(stage, result)
        print(pd.DataFrame(report.instructions).to_markdown(index=False))
        failed = [g for g in report.gates if not g.passed]
        failed_any = failed_any or bool(failed)
        print("gates: " + ("all pass" if not failed else
                           "; ".join(f"{g.gate} {g.kernel}: {g.actual} (limit {g.limit})" for g in failed)))
    return 1 if failed_any else 0


def _tool_run(args):
    """The stage built (cached) and resource-checked, nothing recorded: what `profile` and `sanitize` wrap.
    The command's own step runs whatever the parameter file's `steps` say: asking for it is the opt-in
    (the acceptance file, the default, lists sanitize but not profile, and `stagelab profile` skipped)."""
    import json

    from .family import load_family
    from .registry import find_stage
    from .stage import StageRun

    params = args.params or load_family(find_stage(args.stage)[0].family).acceptance_params
    run = StageRun(args.stage, params, defines=json.loads(args.knobs) if args.knobs else None, track=False,
                   steps=[args.command])
    run.build()
    run.resources()
    return run


def _cmd_profile(args) -> int:
    """Nsight Compute on one stage's kernels at the mission problem and one long problem."""
    from pathlib import Path

    from .paths import build_dir
    from .profile import FAILED, TIMEOUT

    run = _tool_run(args)
    out = Path(args.out) if args.out else build_dir() / "profile" / args.stage
    frame = run.profile(out)
    report = run.results.profile
    print(frame.to_markdown(index=False, floatfmt=".4g") if not frame.empty else report.log.strip()[-2000:])
    if report.gates:
        print(report.gates_frame().to_markdown(index=False))
    print(f"reports: {', '.join(str(p) for p in report.reports) or 'none'}")
    return 1 if report.status in (FAILED, TIMEOUT) or report.gates_passed is False else 0


def _cmd_sanitize(args) -> int:
    """compute-sanitizer memcheck, racecheck and synccheck on one stage at the family's small odd problems."""
    run = _tool_run(args)
    frame = run.sanitize()
    report = run.results.sanitize
    print(frame.to_markdown(index=False))
    for verdict in report.verdicts:
        if verdict.failed:
            print(f"--- {verdict.tool}\n{verdict.log[-4000:]}")
    return 1 if report.passed is False else 0


def _add_tool_parsers(sub) -> None:
    for name, func, text in (("profile", _cmd_profile, "Nsight Compute on a stage's kernels (mission and one long "
                              "problem); prints the fixed metric set, keeps the .ncu-rep files"),
                             ("sanitize", _cmd_sanitize, "compute-sanitizer memcheck, racecheck and synccheck on a "
                              "stage at small odd problems; exit 1 when one finds errors")):
        parser = sub.add_parser(name, help=text)
        parser.add_argument("stage")
        parser.add_argument("--params", default=None, help="parameter file (default: the family's acceptance file)")
        parser.add_argument("--knobs", default=None, help='define overrides as JSON, e.g. \'{"BLOCK_N": 32}\'')
        if name == "profile":
            parser.add_argument("--out", default=None, help="folder for the .ncu-rep files "
                                "(default build/profile/<stage>)")
        parser.set_defaults(func=func)


def _cmd_build(args) -> int:
    """Build stages in parallel processes so later notebook runs find them cached."""
    from .build import build_all
    from .errors import BuildError
    from .registry import find_stage

    stage_ids = _stage_ids(args.stages)
    builds = [(stage, registry) for registry, stage in map(find_stage, stage_ids)]
    failed = 0
    for index, outcome in build_all(builds, args.jobs):
        if isinstance(outcome, BuildError):
            failed += 1
            print(f"{stage_ids[index]}: build failed\n{outcome}", flush=True)
        else:
            print(f"{stage_ids[index]}: {'cached' if outcome.cached else 'built'} in {outcome.seconds:.1f}s "
                  f"(key {outcome.key})", flush=True)
    return 1 if failed else 0


def _cmd_report(args) -> int:
    from .report import write_report

    path = write_report(args.params, family=args.family, out_dir=args.out, experiment=args.experiment, gpu=args.gpu)
    print(f"wrote {path}")
    return 0


def _cmd_notebooks(args) -> int:
    from .notebooks import write_notebooks

    stale = write_notebooks(check=args.check)
    if args.check:
        if stale:
            print("stale notebooks (run `stagelab notebooks`): " + ", ".join(stale))
            return 1
        print("every stage notebook matches its sources")
        return 0
    print("rewrote: " + (", ".join(stale) or "nothing (all up to date)"))
    return 0


def _families():
    from .family import load_family
    from .registry import all_registries

    return [load_family(name) for name in all_registries()]


def _cmd_ui(args) -> int:
    """The MLflow UI on the store stagelab writes to: MLFLOW_TRACKING_URI when set, else the default SQLite store."""
    import subprocess

    from . import runs_view, tracking

    uri = tracking.tracking_uri()
    remote = uri.startswith(("http://", "https://"))
    if not remote:
        tracking.relocate_local_store()  # a store copied from another machine opens with its artifacts
    base = uri if remote else f"http://{args.host}:{args.port}"
    for family in _families():
        for experiment in (family.experiment, family.tune_experiment):
            found = tracking.client().get_experiment_by_name(experiment)
            if found is not None:
                runs_view.install(tracking.client(), found)  # a store written before stagelab set its columns
                print(f"{experiment}: {runs_view.runs_url(base, found.experiment_id)}")
                if experiment == family.experiment:
                    print(f"{experiment} trials: {runs_view.trials_url(base, found.experiment_id)}")
    if remote:
        print(f"MLFLOW_TRACKING_URI points at a tracking server: open {uri} in a browser")
        return 0
    command = [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", uri,
               "--host", args.host, "--port", str(args.port)]
    artifacts = tracking.artifact_location()
    if artifacts:
        command += ["--default-artifact-root", artifacts]
    print(f"MLflow UI for {uri} at http://{args.host}:{args.port}", flush=True)
    if args.dry_run:
        print(" ".join(command))
        return 0
    return subprocess.call(command)


def _cmd_runs(args) -> int:
    """Stage runs still RUNNING, each with its owner and whether that owner is gone; --repair closes
    the ones whose owner is gone as killed."""
    from .repair import close_stale, open_runs

    found = open_runs()
    for run in found:
        owner = f"pid {run.owner.pid} on {run.owner.host}" if run.owner.host else "owner not recorded"
        action = " -> marked KILLED" if args.repair and run.gone_reason else ""
        if action:
            close_stale(run)
        print(f"{run.experiment}  {run.name}  {run.run_id}  {owner}  {run.state}{action}")
    stale = sum(1 for run in found if run.gone_reason)
    print(f"{len(found)} running stage run(s), {stale} with their owner gone"
          + ("" if args.repair or not stale else " (stagelab runs --repair closes them)"))
    return 0


def _cmd_backup(args) -> int:
    from pathlib import Path

    from . import tracking
    from .errors import StoreError
    from .portable import sqlite_path
    from .sqlite_store import backup

    db = sqlite_path(tracking.tracking_uri())
    if db is None:
        raise StoreError(f"stagelab backup copies SQLite stores; {tracking.tracking_uri()} is a server: "
                         "back up its database with the database's own tools (pg_dump, say)")
    if not db.is_file():
        raise StoreError(f"no MLflow store at {db} yet: nothing to back up")
    tracking.check_store()  # a damaged store is reported, not copied over as if it were a good backup
    print(f"backed up {db} to {backup(db, Path(args.to) if args.to else None)}")
    return 0


def _cmd_server(args) -> int:
    """The team server: PostgreSQL store, proxied artifacts; clients set MLFLOW_TRACKING_URI to its address."""
    import subprocess

    from .server import server_command

    command = server_command(args.backend_store_uri, args.artifacts_destination, args.host, args.port)
    print(f"team server on http://{args.host}:{args.port}; on each client: "
          f"export MLFLOW_TRACKING_URI=http://<this machine>:{args.port}", flush=True)
    if args.dry_run:
        print(" ".join(command))
        return 0
    return subprocess.call(command)


def _cmd_import(args) -> int:
    from pathlib import Path

    from . import tracking
    from .portable import RECORD_SUFFIX, import_record, import_store

    source = Path(args.store)
    db = source / "mlflow.db" if source.is_dir() else source
    copied = import_record(db) if db.name.endswith(RECORD_SUFFIX) else import_store(db)
    print(f"imported {copied} new run(s) from {db} into {tracking.tracking_uri()}")
    return 0


def _add_store_commands(sub) -> None:
    """`runs`, `backup`, `import` and `ui`: looking after the store rather than running stages."""
    imp = sub.add_parser("import", help="merge a store brought back from another machine (its mlruns/ folder, "
                         "its mlflow.db, or a gzipped record of one, *.db.gz) into stagelab's store; runs already imported are skipped")
    imp.add_argument("store")
    imp.set_defaults(func=_cmd_import)

    ui = sub.add_parser("ui", help="the MLflow UI on stagelab's store (honours MLFLOW_TRACKING_URI)")
    ui.add_argument("--host", default=DEFAULT_HOST)
    ui.add_argument("--port", type=int, default=DEFAULT_PORT)
    ui.add_argument("--dry-run", action="store_true", help="print the server command instead of running it")
    ui.set_defaults(func=_cmd_ui)

    runs = sub.add_parser("runs", help="list stage runs still RUNNING and whether their owner is gone")
    runs.add_argument("--repair", action="store_true", help="mark runs whose owner is gone KILLED")
    runs.set_defaults(func=_cmd_runs)

    bak = sub.add_parser("backup", help="copy the SQLite store with SQLite's online backup API "
                         "(default: mlruns/backups/mlflow-<time>.db beside it)")
    bak.add_argument("--to", default=None, help="file to write the copy to")
    bak.set_defaults(func=_cmd_backup)


def _cmd_tune(args) -> int:
    """Build and gate every configuration of a stage's search space; check and time them on a GPU."""
    import pandas as pd

    from .tune import tune

    if args.from_run:
        return _promote_recorded(args)
    result = tune(args.stage, args.params, jobs=args.jobs, experiment=args.experiment, elite_count=args.elites)
    rows = pd.DataFrame(result.rows()).drop(columns=["run_id"])
    print(rows.to_markdown(index=False, floatfmt=".4g"))
    print(f"tune run {result.parent_run_id}: " +
          ("; ".join(f"#{i} {t.label} {t.score_us:.4g} us" for i, t in enumerate(result.elites, 1)) or "no elites"))
    if not result.gpu_available:
        print(f"timing needs a GPU: {len(result.trials)} configurations of {args.stage} were built and gated; "
              f"run `stagelab tune {args.stage}` on a machine with a CUDA device to check and time them")
        return 0
    if (args.promote or args.promote_as) and result.elites:
        _promote(result, args.stage, args.promote_as)
    return 0 if result.elites else 1


def _promote_recorded(args) -> int:
    """--from-run: promote the best of a tune run already in the store (tuned on a GPU machine and
    brought here with `stagelab import`), without tuning again."""
    from .errors import ConfigError
    from .promote import promote, record_promotion, recorded_best
    from .registry import find_stage

    if not (args.promote or args.promote_as):
        raise ConfigError("--from-run promotes a recorded tune run: add --promote (the stage's defaults) "
                          "or --promote-as VARIANT")
    registry_file = find_stage(args.stage)[0].directory / "stages.yaml"
    run_id, defines = recorded_best(args.stage, args.from_run)
    diff, what = promote(registry_file, args.stage, defines, args.promote_as)
    if diff:
        record_promotion(run_id, diff, what)
    _print_promotion(diff, args.stage, defines)
    return 0


def _promote(result, stage_id: str, variant: str | None) -> None:
    """The best configuration into stages.yaml, as the defaults or as a named variant; the diff is recorded."""
    from .promote import promote, record_promotion

    best = result.elites[0]
    diff, what = promote(best.ctx.registry.directory / "stages.yaml", stage_id, best.defines, variant)
    record_promotion(result.parent_run_id, diff, what)
    _print_promotion(diff, stage_id, best.defines)


def _print_promotion(diff: str, stage_id: str, defines: dict[str, str]) -> None:
    from .space import config_label

    print(diff or f"{stage_id}: stages.yaml already holds {config_label(defines)}")


def _add_tune_parser(sub) -> None:
    tun = sub.add_parser("tune", help="build, gate, check and time every configuration of a stage's "
                         "search_space; nested MLflow runs under one tune run that keeps the elites")
    tun.add_argument("stage")
    tun.add_argument("--params", default="params/acceptance.yaml", help="parameter file")
    tun.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="parallel builds (default: every core)")
    tun.add_argument("--elites", type=int, default=None,
                     help="how many of the best configurations the tune run keeps (default: tune.ELITE_COUNT)")
    tun.add_argument("--experiment", default=None, help="MLflow experiment (default: stagelab-<family>-tune)")
    tun.add_argument("--promote", action="store_true",
                     help="write the best configuration into the stage's defines in stages.yaml (diff recorded)")
    tun.add_argument("--promote-as", metavar="VARIANT", default=None,
                     help="write the best configuration as the stage's named variant in stages.yaml (diff "
                          "recorded); run it with StageRun(stage, params, defines=VARIANT) or knobs = 'VARIANT'")
    tun.add_argument("--from-run", metavar="RUN_ID", default=None,
                     help="promote (with --promote or --promote-as) the best configuration of a tune run "
                          "already in the store, e.g. one run on a GPU machine and imported here; tunes nothing")
    tun.set_defaults(func=_cmd_tune)


def _add_run_parser(sub) -> None:
    """`stagelab run`: a batch of stage notebooks."""
    run = sub.add_parser("run", help="execute stage notebooks through papermill and log them to MLflow")
    run.add_argument("--stages", nargs="*", help="stage ids (default: every stage in the registry, in order)")
    run.add_argument("--params", default="params/acceptance.yaml", help="parameter file")
    run.add_argument("--timeout", type=int, default=None, help="seconds per notebook (default: the file's timeout_s)")
    run.add_argument("--experiment", default=None, help="MLflow experiment (default: stagelab-<family>)")
    run.add_argument("--kernel", default="python3", help="Jupyter kernel name")
    run.add_argument("--strict", action="store_true", help="exit 1 when any stage errs, fails to build or is incorrect")
    run.add_argument("--resume", action="store_true",
                     help="skip stages that have a finished run of their current source on this parameter file")
    run.add_argument("--gpus", default=None, metavar="all|I,J,...",
                     help="run one notebook per GPU at a time, each seeing only its GPU (CUDA_VISIBLE_DEVICES): "
                          "'all' or nvidia-smi indices, e.g. 0,1")
    run.add_argument("--shard", default=None, metavar="K/N",
                     help="run only the K-th of N pieces of the stages (K from 1), for a job array on many machines")
    run.add_argument("--steps", nargs="*", default=None, metavar="STEP",
                     help="the optional steps to run instead of the parameter file's (sanitize, profile, explore; "
                          "none given: none); tagged steps_override on each run")
    run.set_defaults(func=_cmd_run)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="stagelab", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    _add_run_parser(sub)

    stages = sub.add_parser("stages", help="list every family's stage registry")
    stages.add_argument("--family", default=None)
    stages.set_defaults(func=_cmd_stages)

    res = sub.add_parser("resources", help="build stages (no GPU needed) and print their ptxas resource report")
    res.add_argument("stages", nargs="*")
    res.set_defaults(func=_cmd_resources)

    bld = sub.add_parser("build", help="compile stages (in parallel) into the build cache; no GPU needed")
    bld.add_argument("stages", nargs="*")
    bld.add_argument("--jobs", type=int, default=4)
    bld.set_defaults(func=_cmd_build)

    rep = sub.add_parser("report", help="write docs/results/<family>/<gpu>.md (+ plot) from the MLflow store")
    rep.add_argument("--params", nargs="+", default=["acceptance", "long"],
                     help="parameter-file names whose latest runs the page shows")
    rep.add_argument("--out", default=None, help="folder (default docs/results/<family>)")
    rep.add_argument("--gpu", default=None, help="GPU name as tagged (default: the newest run's GPU)")
    rep.add_argument("--family", default="sdpa", help="kernel family (default sdpa)")
    rep.add_argument("--experiment", default=None, help="MLflow experiment (default: stagelab-<family>)")
    rep.set_defaults(func=_cmd_report)

    nbs = sub.add_parser("notebooks", help="regenerate stage notebooks from stages.yaml and notebooks/explore/")
    nbs.add_argument("--check", action="store_true", help="write nothing; exit 1 when a notebook is stale")
    nbs.set_defaults(func=_cmd_notebooks)

    _add_tune_parser(sub)
    _add_tool_parsers(sub)

    srv = sub.add_parser("server", help="the team's MLflow server: PostgreSQL store, artifacts proxied into a folder")
    srv.add_argument("--backend-store-uri", required=True, help="postgresql://user@host:port/database")
    srv.add_argument("--artifacts-destination", required=True, help="folder the server keeps artifacts in")
    srv.add_argument("--host", default=DEFAULT_HOST, help="address to listen on (default: this machine only)")
    srv.add_argument("--port", type=int, default=DEFAULT_PORT)
    srv.add_argument("--dry-run", action="store_true", help="print the server command instead of running it")
    srv.set_defaults(func=_cmd_server)

    _add_store_commands(sub)
    add_trial_parsers(sub)

    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(route(sys.argv[1:] if argv is None else list(argv)))
    try:
        return args.func(args)
    except RunnerStopped as exc:
        print(f"stagelab: {exc}", file=sys.stderr)
        return SIGNAL_EXIT_BASE + exc.signum
    except StagelabError as exc:
        print(f"stagelab: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
