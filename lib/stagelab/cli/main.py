"""The `stagelab` command: run stage notebooks, list stages, build, show resources, write reports,
regenerate notebooks, open the MLflow UI, close runs left RUNNING, back up the store, try changes
to a stage and read its journal, show which launch plans a parameter file's problems take, and
record which stages a refactor left compiling to the same code."""

from __future__ import annotations

import argparse
import sys

from ..core.errors import RunnerStopped, StagelabError
from .coverage import add_parsers as add_coverage_parsers
from .new_family import add_parsers as add_new_family_parsers
from .pages import add_parsers as add_page_parsers
from .run import add_parsers as add_run_parsers
from .same_code import add_parsers as add_same_code_parsers
from .stages import add_parsers as add_stage_parsers
from .store import add_parsers as add_store_parsers
from .tools import add_parsers as add_tool_parsers
from .trial import add_parsers as add_trial_parsers
from .trial import route
from .workspace import prepared
from .tune import add_parsers as add_tune_parsers

# The shell's convention for a process ended by signal N: exit status 128 + N (130 for SIGINT).
SIGNAL_EXIT_BASE = 128
# The command groups in the order `stagelab --help` lists them.
COMMAND_GROUPS = (add_run_parsers, add_stage_parsers, add_coverage_parsers, add_page_parsers, add_same_code_parsers,
                  add_tune_parsers, add_tool_parsers, add_store_parsers, add_trial_parsers, add_new_family_parsers)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="stagelab", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for add_parsers in COMMAND_GROUPS:
        add_parsers(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(route(sys.argv[1:] if argv is None else list(argv)))
    try:
        with prepared(args):
            return args.func(args)
    except RunnerStopped as exc:
        print(f"stagelab: {exc}", file=sys.stderr)
        return SIGNAL_EXIT_BASE + exc.signum
    except StagelabError as exc:
        print(f"stagelab: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
