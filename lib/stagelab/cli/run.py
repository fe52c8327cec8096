"""`stagelab run`: a batch of stage notebooks, each logged to MLflow."""

from __future__ import annotations

import argparse
import sys

from ..judge.outcome import FAILED_OUTCOMES
from .workspace import add_family_option, announce_store

# The outcome of a stage built and gated on a machine without a GPU (judge.outcome).
NO_GPU = "no_gpu"


def _params_path(params: str | None, family: str | None):
    """The parameter file, resolved once for the notebooks and the batch: the family's own folder
    first (its acceptance file when none is named), then as given, then the repo root."""
    from ..core.family import load_family
    from ..core.family_sources import family_folders
    from ..core.paths import resolve_params_path

    default = load_family(family).acceptance_params if family else "params/acceptance.yaml"
    return resolve_params_path(params or default, *family_folders(family))


def _write_outside_notebooks(params) -> None:
    """A family outside the checkout has no committed notebooks: its stages' notebooks are written
    (rewritten where its registry changed) into its folder's notebooks/ before the batch runs them."""
    from ..core.family_sources import family_source
    from ..core.params import load_params
    from ..notebooks import write_notebooks

    family = load_params(params).family.name
    if not family_source(family).built_in:
        written = write_notebooks(family=family)
        if written:
            print(f"stagelab: wrote the {family} notebooks of {', '.join(written)}", flush=True)


def _cmd_run(args) -> int:
    from ..core.formatting import markdown
    from ..run.batch import run_batch
    from ..run.gpus import resolve_gpus
    from ..run.shard import Shard

    params = _params_path(args.params, args.family)
    gpus = resolve_gpus(args.gpus)  # both checked before any work: a bad value is one line and exit 2
    shard = Shard.parse(args.shard) if args.shard is not None else None
    announce_store()
    _write_outside_notebooks(params)
    summary = run_batch(args.stages or None, params, timeout_s=args.timeout, experiment=args.experiment,
                        kernel_name=args.kernel, resume=args.resume, gpus=gpus, shard=shard, steps=args.steps,
                        deadline_s=args.deadline)
    shown = summary.drop(columns=["run_id"] + ([] if gpus else ["gpu"]))
    print(markdown(shown))
    failure = strict_failure(list(summary["outcome"])) if args.strict else None
    if failure:
        print(f"stagelab run --strict: {failure}", file=sys.stderr)
    return 1 if failure else 0


def strict_failure(outcomes: list[str]) -> str | None:
    """Why `stagelab run --strict` fails the batch, None when it passes: a stage that errs, fails to
    build or its gates, is incorrect or uncovered; or no stage judged at all, every one `no_gpu` (a green exit
    there would read as a checked kernel). An empty batch (a shard with nothing to run) passes."""
    # FAILED_OUTCOMES: the stage is broken (or its notebook is), or its checks missed a launch plan the
    # parameter file requires (its correctness is not established there)
    bad = sorted({o for o in outcomes if o in FAILED_OUTCOMES})
    if bad:
        return f"{sum(o in FAILED_OUTCOMES for o in outcomes)} stage(s) {', '.join(bad)}"
    if outcomes and all(o == NO_GPU for o in outcomes):
        return (f"no stage could be judged: all {len(outcomes)} are no_gpu (no CUDA GPU visible here), so none "
                "was checked or timed; run on a machine with a GPU, or without --strict for the build and gates alone")
    return None


def add_parsers(sub) -> None:
    """`stagelab run`: a batch of stage notebooks."""
    run = sub.add_parser("run", help="execute stage notebooks through papermill and log them to MLflow")
    run.add_argument("--stages", nargs="*", help="stage ids (default: every stage in the registry, in order)")
    run.add_argument("--params", default=None, help="parameter file (default: the family's acceptance file)")
    add_family_option(run, "run this family's stages (default: every family the parameter file's problems belong to)")
    run.add_argument("--timeout", type=int, default=None, help="seconds per notebook (default: the file's timeout_s)")
    run.add_argument("--experiment", default=None, help="MLflow experiment (default: stagelab-<family>)")
    run.add_argument("--kernel", default="python3", help="Jupyter kernel name")
    run.add_argument("--strict", action="store_true", help="exit 1 when any stage errs, fails to build or its gates, "
                     "or is incorrect or uncovered, or when no stage could be judged (every one no_gpu)")
    run.add_argument("--resume", action="store_true",
                     help="skip stages that have a finished run of their current source on this parameter file")
    run.add_argument("--gpus", default=None, metavar="all|I,J,...",
                     help="run one notebook per GPU at a time, each seeing only its GPU (CUDA_VISIBLE_DEVICES): "
                          "'all' or nvidia-smi indices, e.g. 0,1")
    run.add_argument("--shard", default=None, metavar="K/N",
                     help="run only the K-th of N pieces of the stages (K from 1), for a job array on many machines")
    run.add_argument("--steps", nargs="*", default=None, metavar="STEP",
                     help="the optional steps to run instead of the parameter file's (sanitize, profile, explore, stress, protocol; "
                          "none given: none); tagged steps_override on each run")
    run.add_argument("--deadline", type=_seconds, default=None, metavar="S",
                     help="end within S seconds of the start: a stage starts only where its last whole run of the file "
                          "(this GPU's, else any; the store's or the committed pages') says it ends in time; the others "
                          "are named, with the command that runs them")
    run.set_defaults(func=_cmd_run)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds above 0")
    return value
