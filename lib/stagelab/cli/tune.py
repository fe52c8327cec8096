"""`stagelab tune`: every configuration of a stage's search space, and promoting the best."""

from __future__ import annotations

import os

from .workspace import add_family_option, announce_store


def _cmd_tune(args) -> int:
    """Build and gate every configuration of a stage's search space; check and time them on a GPU."""
    import pandas as pd

    from ..core.formatting import latency, markdown
    from ..tune.search import tune

    if args.from_run:
        return _promote_recorded(args)
    announce_store()
    result = tune(args.stage, args.params, jobs=args.jobs, experiment=args.experiment, elite_count=args.elites)
    rows = pd.DataFrame(result.rows()).drop(columns=["run_id"])
    print(markdown(rows))
    print(f"tune run {result.parent_run_id}: " +
          ("; ".join(f"#{i} {t.label} {latency(t.score_us)}" for i, t in enumerate(result.elites, 1)) or "no elites"))
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
    from ..core.errors import ConfigError
    from ..tune.promote import promote, record_promotion, recorded_best
    from ..core.registry import find_stage

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
    from ..tune.promote import promote, record_promotion

    best = result.elites[0]
    diff, what = promote(best.ctx.registry.directory / "stages.yaml", stage_id, best.defines, variant)
    record_promotion(result.parent_run_id, diff, what)
    _print_promotion(diff, stage_id, best.defines)


def _print_promotion(diff: str, stage_id: str, defines: dict[str, str]) -> None:
    from ..core.space import config_label

    print(diff or f"{stage_id}: stages.yaml already holds {config_label(defines)}")


def add_parsers(sub) -> None:
    tun = sub.add_parser("tune", help="build, gate, check and time every configuration of a stage's "
                         "search_space; nested MLflow runs under one tune run that keeps the elites")
    tun.add_argument("stage")
    add_family_option(tun)
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
