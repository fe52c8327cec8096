"""`stagelab profile`, `sanitize` and `stress`: Nsight Compute, compute-sanitizer and perturbed-timing
rounds on one stage, nothing recorded."""

from __future__ import annotations

from .workspace import add_family_option


def _tool_run(args):
    """The stage built (cached) and resource-checked, nothing recorded: what `profile`, `sanitize` and
    `stress` wrap.
    The command's own step runs whatever the parameter file's `steps` say: asking for it is the opt-in
    (the acceptance file, the default, lists sanitize but not profile, and `stagelab profile` skipped).
    The parent is not built: none of these steps looks at it."""
    import json

    from ..core.family import load_family
    from ..core.registry import find_stage
    from ..stage import StageRun

    params = args.params or load_family(find_stage(args.stage)[0].family).acceptance_params
    run = StageRun(args.stage, params, defines=json.loads(args.knobs) if args.knobs else None, track=False,
                   steps=[args.command])
    run.build(with_parent=False)
    run.resources()
    return run


def _cmd_profile(args) -> int:
    """Nsight Compute on one stage's kernels at the mission problem and one long problem."""
    from pathlib import Path

    from ..core.formatting import markdown
    from ..core.paths import build_dir
    from ..measure.profile import FAILED, TIMEOUT

    run = _tool_run(args)
    out = Path(args.out) if args.out else build_dir() / "profile" / args.stage
    frame = run.profile(out)
    report = run.results.profile
    print(markdown(frame) if not frame.empty else report.log.strip()[-2000:])
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


def _cmd_stress(args) -> int:
    """The stage's checks and chains again and again under perturbed timing (measure.stress);
    exit 1 when a round fails (incorrect, reason ordering), 86 (watchdog.HANG_EXIT_CODE) on a hang."""
    from ..judge.outcome import ORDERING

    run = _tool_run(args)
    frame = run.stress()
    report = run.results.stress
    print(frame.to_markdown(index=False) if not frame.empty else report.why_not_run)
    if report.passed is False:
        print(f"incorrect ({ORDERING}): {report.failures()}")
    return 1 if report.passed is False else 0


def add_parsers(sub) -> None:
    for name, func, text in (("profile", _cmd_profile, "Nsight Compute on a stage's kernels (mission and one long "
                              "problem); prints the fixed metric set, keeps the .ncu-rep files"),
                             ("sanitize", _cmd_sanitize, "compute-sanitizer memcheck, racecheck and synccheck on a "
                              "stage at small odd problems; exit 1 when one finds errors"),
                             ("stress", _cmd_stress, "a stage's checks and chains again and again with one side of "
                              "its hand-offs delayed, beside a load kernel (e.g. --params params/stress.yaml); exit 1 "
                              "when a round fails")):
        parser = sub.add_parser(name, help=text)
        parser.add_argument("stage")
        add_family_option(parser)
        parser.add_argument("--params", default=None, help="parameter file (default: the family's acceptance file)")
        parser.add_argument("--knobs", default=None, help='define overrides as JSON, e.g. \'{"BLOCK_N": 32}\'')
        if name == "profile":
            parser.add_argument("--out", default=None, help="folder for the .ncu-rep files "
                                "(default build/profile/<stage>)")
        parser.set_defaults(func=func)
