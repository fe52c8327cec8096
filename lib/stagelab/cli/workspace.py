"""Before a command runs: which checkout's code it uses, which family it means, which store it writes.

- **The checkout.** With an editable install shared between checkouts, the code runs from
  one checkout while the user stands in another: one line on stderr names both, never silence.
- **The family.** `--family NAME` scopes the command's stage ids to one family (stage ids are
  scoped by family; an id two families share needs it). It is handed to child processes
  (notebooks, sanitize and profile children) in the environment.
- **The store.** A command about a family outside the checkout, run outside the checkout, keeps
  its default store (mlruns/) and executed notebooks (runs/) in the folder it runs in;
  MLFLOW_TRACKING_URI, when set, wins as always.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

CHECKOUT_MARKERS = ("kernels", "pyproject.toml")


def add_family_option(parser, help_text: str = "the family whose stages the ids name (needed where two "
                                                "families share a stage id, and for a family's own defaults)") -> None:
    parser.add_argument("--family", default=None, metavar="NAME", help=help_text)


def checkout_of(start: Path) -> Path | None:
    """The stagelab checkout holding `start` (a folder with kernels/ and a pyproject.toml naming
    stagelab), if any."""
    for folder in (start, *start.parents):
        pyproject = folder / "pyproject.toml"
        if (folder / "kernels").is_dir() and pyproject.is_file() and 'name = "stagelab"' in pyproject.read_text():
            return folder
    return None


def code_checkout() -> Path | None:
    """The checkout this process's stagelab code comes from (None for an installed wheel)."""
    return checkout_of(Path(__file__).resolve().parent)


def other_checkout_warning(cwd: Path) -> str | None:
    """One line when the code runs from one checkout while the command stands in, or points
    STAGELAB_ROOT at, another."""
    code = code_checkout()
    if code is None:
        return None
    root_env = os.environ.get("STAGELAB_ROOT")
    for other, why in ((checkout_of(cwd), "the current folder is in"),
                       (Path(root_env).resolve() if root_env else None, "STAGELAB_ROOT names")):
        if other is not None and other.resolve() != code.resolve():
            return (f"stagelab: warning: running the code of checkout {code}, but {why} checkout {other} "
                    f"(use PYTHONPATH={other}/lib or `pip install -e {other}` to run its code)")
    return None


def _command_families(args) -> list[str]:
    """The families a command is about: --family, else those of the stage ids it names."""
    from ..core.registry import find_stage

    if getattr(args, "family", None):
        return [args.family]
    named = getattr(args, "stages", None) or ([args.stage] if isinstance(getattr(args, "stage", None), str) else [])
    return sorted({find_stage(stage_id)[0].family for stage_id in named})


def choose_workspace(args, cwd: Path) -> None:
    """Keep the store and executed notebooks where the command runs when it is about families
    outside the checkout and runs outside it (child processes inherit the choice)."""
    from ..core.family_sources import family_source
    from ..core.paths import WORKSPACE_ENV, repo_root

    if os.environ.get(WORKSPACE_ENV) or cwd.is_relative_to(repo_root()):
        return
    families = _command_families(args)
    external = families and not any(family_source(name).built_in for name in families)
    if external or (not families and (cwd / "mlruns").is_dir()):
        os.environ[WORKSPACE_ENV] = str(cwd)


def select_family(args) -> None:
    """Check `--family` names a family and hand it to the rest of the command and its children."""
    from ..core.family_sources import SELECTED_FAMILY_ENV, family_source

    name = getattr(args, "family", None)
    if name:
        family_source(name)
        os.environ[SELECTED_FAMILY_ENV] = name


@contextmanager
def prepared(args) -> Iterator[None]:
    """Everything a command settles before its own work (see the module's docstring), for the
    command and its child processes only: a command run in-process (tests, notebooks) leaves the
    environment as it found it."""
    from ..core.family_sources import SELECTED_FAMILY_ENV
    from ..core.paths import WORKSPACE_ENV

    saved = {name: os.environ.get(name) for name in (SELECTED_FAMILY_ENV, WORKSPACE_ENV)}
    cwd = Path.cwd().resolve()
    warning = other_checkout_warning(cwd)
    if warning:
        print(warning, file=sys.stderr)
    try:
        select_family(args)
        choose_workspace(args, cwd)
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def announce_store() -> None:
    """The first line of a command that records: where its runs go."""
    from ..record.tracking import tracking_uri

    print(f"stagelab: recording to {tracking_uri()}", flush=True)
