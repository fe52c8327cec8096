"""The trial commands of `stagelab`: `try STAGE`, `try note RUN "..."`, `try import FILE`, `journal STAGE`.

`try note` and `try import` are spelled as words after `try` (a stage is never called `note` or
`import`); `stagelab` routes them to the subcommands `try-note` and `try-import` (see `route`)."""

from __future__ import annotations

import os

from .workspace import add_family_option, announce_store

TRY_ACTIONS = {"note": "try-note", "import": "try-import"}


def route(argv: list[str]) -> list[str]:
    """`try note ...` -> `try-note ...`, `try import ...` -> `try-import ...`; anything else unchanged."""
    if len(argv) >= 2 and argv[0] == "try" and argv[1] in TRY_ACTIONS:
        return [TRY_ACTIONS[argv[1]], *argv[2:]]
    return argv


def specs_from_args(args) -> list:
    """The trials an invocation names: each --variant, each --define group, each --patch (with its defines)."""
    from ..core.errors import ConfigError
    from ..core.trial_spec import TrialSpec, parse_defines

    specs = [TrialSpec.of(variant=name) for name in args.variant]
    specs += [TrialSpec.of(defines=parse_defines(group)) for group in args.define]
    for group in args.patch:
        patch, defines = group[0], group[1:]
        if "=" in patch:
            raise ConfigError(f"--patch {patch}: give the patch file first, then its defines (--patch FILE K=V ...)")
        specs.append(TrialSpec.of(patch=patch, defines=parse_defines(defines)))
    return specs


def print_session(session) -> bool:
    """A table of the trials, each one's reason, build log or speedups; True when none failed outright."""
    import pandas as pd

    from ..core.formatting import markdown
    from ..measure.trial_compare import key_numbers

    rows = [{"trial": t.spec.name, "verdict": t.verdict.verdict,
             "numbers": key_numbers(t, session.default, session.ctx.params.mission.tag),
             "run_id": t.run_id or "(not recorded)"} for t in session.trials]
    print(pd.DataFrame(rows).to_markdown(index=False))
    for trial in session.trials:
        print(f"{trial.spec.name}: {trial.verdict.verdict}: {trial.verdict.reason}")
        if trial.measured.build_error is not None:
            print(trial.measured.build_error.log[-3000:])
        if trial.measured.timing is not None:
            print(markdown(trial.measured.timing.speedups()))
    return not any(t.verdict.verdict in ("incorrect", "build_failed", "error") for t in session.trials)


def _cmd_try(args) -> int:
    from ..run.trial import Narrowing, run_trials

    narrowing = Narrowing(tuple(args.contenders) if args.contenders is not None else None, args.repetitions,
                          tuple(args.only))
    announce_store()
    session = run_trials(args.stage, specs_from_args(args), params=args.params, jobs=args.jobs,
                         hypothesis=args.hypothesis, min_gain=args.min_gain, track=not args.no_record,
                         narrowing=narrowing)
    return 0 if print_session(session) else 1


def _cmd_try_note(args) -> int:
    from ..record.trial_record import add_conclusion

    name = add_conclusion(args.run_id, args.text)
    print(f"conclusion added to trial {name} ({args.run_id})")
    return 0


def _cmd_try_import(args) -> int:
    from ..record.trial_import import import_trials

    added, skipped = import_trials(args.file)
    print(f"imported {added} trial run(s) from {args.file}; {skipped} already in the store")
    return 0


def _cmd_journal(args) -> int:
    from ..record.journal import journal_entries, journal_markdown

    # as write_journals writes the file: `stagelab journal S > journal-S.md` gives the same bytes
    print(journal_markdown(args.stage, journal_entries(args.stage, args.experiment)), end="")
    return 0


def _add_try_parser(sub) -> None:
    tri = sub.add_parser("try", help="build, check and time trials of a stage (a variant, defines or a patch) "
                         "against its default and the library contenders; one MLflow run per trial. "
                         "Also: `try note RUN \"...\"`, `try import FILE`")
    tri.add_argument("stage")
    add_family_option(tri)
    tri.add_argument("--variant", action="append", default=[], metavar="NAME", help="a named variant of stages.yaml")
    tri.add_argument("--define", action="append", nargs="+", default=[], metavar="K=V",
                     help="one trial of these define overrides (repeat --define for more trials)")
    tri.add_argument("--patch", action="append", nargs="+", default=[], metavar="FILE.diff [K=V]",
                     help="one trial of a code change: the patch applied to a copy of the kernel sources, "
                          "with optional defines (a removed knob replayed: --patch KNOB.diff KNOB=1)")
    tri.add_argument("--hypothesis", default="", help="what the trial tests and why")
    tri.add_argument("--params", default=None, help="parameter file (default: the family's try file, params/try.yaml)")
    tri.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="parallel builds (default: every core)")
    tri.add_argument("--min-gain", type=float, default=None,
                     help="gain over the default a `faster` verdict needs (default: the stage's min_gain)")
    tri.add_argument("--contenders", nargs="*", default=None, help="library contenders (default: the file's)")
    tri.add_argument("--repetitions", type=int, default=None, help="timing repetitions (default: the file's)")
    tri.add_argument("--only", nargs="*", default=[], metavar="TAG", help="time only these problems (and the mission)")
    tri.add_argument("--no-record", action="store_true", help="measure and print, record nothing")
    tri.set_defaults(func=_cmd_try)


def add_parsers(sub) -> None:
    _add_try_parser(sub)
    note = sub.add_parser("try-note", help="(`stagelab try note RUN \"...\"`) add the conclusion to a trial run")
    note.add_argument("run_id")
    note.add_argument("text")
    note.set_defaults(func=_cmd_try_note)
    imp = sub.add_parser("try-import", help="(`stagelab try import FILE`) trial runs from a trials.yaml history "
                         "(docs/results/sdpa/history/trials.yaml); entries already imported are skipped")
    imp.add_argument("file")
    imp.set_defaults(func=_cmd_try_import)
    jou = sub.add_parser("journal", help="a stage's trials in order from the MLflow store: date, commit, "
                         "hypothesis, numbers with clocks, verdict, conclusion")
    jou.add_argument("stage")
    add_family_option(jou)
    jou.add_argument("--experiment", default=None, help="MLflow experiment (default: stagelab-<family>)")
    jou.set_defaults(func=_cmd_journal)
