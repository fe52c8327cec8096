"""`stagelab coverage STAGE --params FILE`: the launch plan each problem of a parameter file takes in a
stage, computed on the host without a GPU, and the stage's plans that no problem takes (core.coverage).

Exit status: 0 when every plan the stage declares is taken (or the stage has no plans), 1 when a
declared plan is taken by no problem, a problem takes a plan the stage does not declare, or the stage
rejects a problem its stages.yaml `supports:` lets in; 2 for an unknown stage, a missing parameter
file or a failed build (stagelab's errors).
"""

from __future__ import annotations

from .workspace import add_family_option


def _report(args):
    """Build the stage (cached, as `stagelab build`) and plan the file's problems for the device model."""
    from ..core.build import build_stage
    from ..core.context import StageContext
    from ..core.coverage import coverage_report
    from ..core.errors import BuildError
    from ..core.family import load_family
    from ..core.launch_plans import device_model
    from ..core.registry import find_stage

    device = device_model(args.sms, args.l2_mib)  # a bad --sms fails before the build
    params = args.params or load_family(find_stage(args.stage, args.family)[0].family).acceptance_params
    ctx = StageContext.load(args.stage, params, family=args.family)
    try:
        built = build_stage(ctx.stage, ctx.registry)
    except BuildError as exc:
        raise BuildError(f"{ctx.stage.id} did not build, so its launch plans cannot be read: {exc.reason}",
                         exc.log) from exc
    return ctx, coverage_report(ctx.family, ctx.stage, built.module, ctx.params, device)


def _print_plans(report) -> None:
    import pandas as pd

    rows = [{"problem": row.problem, "dtypes": ", ".join(row.dtypes),
             "plan": row.plan or f"rejected: {row.rejected}"} for row in report.rows]
    print(pd.DataFrame(rows).to_markdown(index=False) if rows else "no problem of the file is taken by the stage")
    if report.skipped:
        print(f"skipped: {len(report.skipped)} problem(s) the stage's stages.yaml `supports:` excludes "
              f"({', '.join(report.skipped)})")


def _print_verdict(report) -> None:
    gaps = report.gaps
    print(f"declared plans: {gaps.declared}, taken by a problem of the file: {gaps.reached}")
    for title, plans in (("declared plans no problem takes", gaps.unreached),
                         ("plans taken that the stage does not declare", gaps.undeclared)):
        if plans:
            print(f"{title} ({len(plans)}):")
            print("\n".join(f"  {plan}" for plan in plans))
    if report.rejected:
        print(f"problems the stage rejects though its `supports:` lets them in ({len(report.rejected)}):")
        print("\n".join(f"  {row.problem} {', '.join(row.dtypes)}: {row.rejected}" for row in report.rejected))
    if report.covered:
        print("every declared plan is taken by a problem of the file")


def _cmd_coverage(args) -> int:
    from ..core.formatting import fixed

    ctx, report = _report(args)
    device = report.device
    if not report.declared:
        print(f"{report.stage} declares no launch plans: its build has one implicit plan, so coverage has "
              "nothing to say")
        return 0
    print(f"{report.stage} on {ctx.params.path}, planned for {device.name} ({device.sms} SMs, "
          f"{fixed(device.l2_bytes / 2**20)} MiB L2) on the host, without a GPU")
    _print_plans(report)
    _print_verdict(report)
    return 0 if report.covered else 1


def add_parsers(sub) -> None:
    """`coverage`: a stage's launch plans against a parameter file's problems, no GPU needed."""
    cov = sub.add_parser("coverage", help="the launch plan each problem of a parameter file takes in a stage "
                         "(host plan, no GPU), and the stage's plans no problem takes; exit 1 if there is one")
    cov.add_argument("stage")
    add_family_option(cov)
    cov.add_argument("--params", default=None, help="parameter file (default: the family's acceptance file)")
    cov.add_argument("--sms", type=int, default=None, help="the device model's SM count (default: H100 SXM, 132)")
    cov.add_argument("--l2-mib", type=int, default=None, dest="l2_mib",
                     help="the device model's L2 in MiB (default: H100 SXM, 50)")
    cov.set_defaults(func=_cmd_coverage)
