"""`stagelab same-code --from COMMIT [--stages ...] [--family F] [--jobs N]`: build each stage at COMMIT
and now, and record in docs/results/<family>/same_code.yaml those whose code is the same, so that
their runs at COMMIT stay current on the results pages (record.same_code; no GPU needed)."""

from __future__ import annotations


def _cmd_same_code(args) -> int:
    from ..core.errors import ConfigError
    from ..core.registry import family_registry
    from ..record.same_code import DIFFERENT, FAILED, SAME, compare_stages
    from ..record.same_code_file import same_code_path, write_entries
    from ..record.same_code_sides import sides

    if args.jobs < 1:
        raise ConfigError(f"--jobs {args.jobs}: at least 1")
    registry = family_registry(args.family)
    stages = list(args.stages or registry.stages)
    for stage_id in stages:
        registry.get(stage_id)  # an unknown id is an error naming the family's stages, before any build
    with sides(args.family, args.from_commit) as (then, now):
        print(f"stagelab same-code: {len(stages)} stage(s) of {args.family} at {then.label} and at {now.label}, "
              f"{args.jobs} build(s) at a time", flush=True)
        if then.note:  # the hashes recorded for COMMIT are today's lab's, not its own lab's
            print(f"note: {then.note}", flush=True)
        verdicts = compare_stages(then, now, stages, args.jobs, lambda line: print(line, flush=True))
    entries = [v.entry for v in verdicts if v.status == SAME and v.entry is not None]
    path = same_code_path(args.family)
    if entries:
        write_entries(path, entries)
    by_status: dict[str, list[str]] = {}
    for verdict in verdicts:
        by_status.setdefault(verdict.status, []).append(verdict.stage)
    print("summary: " + "; ".join(f"{status}: {', '.join(ids)}" for status, ids in by_status.items()))
    print(f"recorded {len(entries)} stage(s) in {path}" if entries else "recorded nothing (no stage is the same code)")
    return 1 if by_status.get(FAILED) or by_status.get(DIFFERENT) else 0


def add_parsers(sub) -> None:
    """`same-code`: evidence that a refactor left the stages' code as it was."""
    same = sub.add_parser("same-code", help="record the stages whose code a commit and HEAD compile to identically "
                                            "(SASS, device image, host code), so their runs stay current; no GPU")
    same.add_argument("--from", dest="from_commit", required=True, metavar="COMMIT",
                      help="the earlier commit (whose runs should stay current)")
    same.add_argument("--stages", nargs="+", default=None, metavar="STAGE", help="these stages (default: every one)")
    same.add_argument("--family", default="sdpa", help="kernel family (default sdpa)")
    same.add_argument("--jobs", type=int, default=2, help="builds at a time (default 2)")
    same.set_defaults(func=_cmd_same_code)
