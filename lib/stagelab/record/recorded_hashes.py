"""The run source hashes an earlier commit's own lab computes, for `stagelab same-code`.

A run records as `source_hash` what the lab of its own commit computed (core.sources.run_source_hash),
and that scheme changes now and then (219f523: a family's kind packages count only for their input
kinds' stages). Today's lab applied to an earlier commit's files computes today's scheme, which is not
what the runs at that commit recorded, and a same_code.yaml entry of it would link none of them. So
where the lab is part of the family's repository (a built-in family, or one on STAGELAB_FAMILY_PATH
kept in the lab's repository), the earlier commit's lab package is archived beside its family
(record.same_code_sides) and asked, in a child process, for every stage's hash. Where it cannot
answer (an older lab without run_source_hash, an import error), today's lab computes them and a note
says so: those hashes link runs only if the scheme did not change.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..core.family_sources import FAMILY_PATH_ENV, family_source
from ..core.paths import WORKSPACE_ENV, repo_root

LAB_TIMEOUT_S = 600  # the family's import (torch) and a hash per stage: seconds, on a busy machine more
LAB_PACKAGE = Path(__file__).resolve().parents[1]  # stagelab/ (not `import stagelab`: the record layer stays below it)

# Run by the earlier commit's lab: every stage's run source hash, as JSON on the last line.
SCRIPT = """
import json, sys
import stagelab
from stagelab.core.registry import family_registry
from stagelab.core.sources import run_source_hash
registry = family_registry(sys.argv[1])
hashes = {stage.id: run_source_hash(stage, registry) for stage in registry.stages.values()}
print(json.dumps({"lab": stagelab.__file__, "hashes": hashes}))
"""

TODAYS_SCHEME = "today's scheme is used, which links runs only if the scheme did not change"


@dataclass(frozen=True)
class LabHashes:
    """What the earlier commit's lab said: every stage's run source hash, or why there is none."""

    hashes: Mapping[str, str] | None = None  # by stage id; None: today's lab computes them
    note: str = ""  # why the lab of the commit did not answer (empty when it did or was not asked)


def lab_to_archive(root: Path) -> str | None:
    """The lab's package relative to the family's work tree `root`, or None: a lab installed outside
    it cannot be had at the commit, and today's lab computes both sides."""
    return LAB_PACKAGE.relative_to(root).as_posix() if LAB_PACKAGE.is_relative_to(root) else None


def archived_lab_environment(root: Path, tmp: Path, folder: str, built_in: bool) -> dict[str, str]:
    """The earlier lab imported from the archive, finding the family there, not where this one does."""
    env = {k: v for k, v in os.environ.items() if k not in (FAMILY_PATH_ENV, WORKSPACE_ENV)}
    checkout = repo_root()
    env |= {"PYTHONPATH": str(tmp / LAB_PACKAGE.parent.relative_to(root)), "PYTHONDONTWRITEBYTECODE": "1",
            "STAGELAB_ROOT": str(tmp / checkout.relative_to(root) if checkout.is_relative_to(root) else tmp)}
    if not built_in:  # a family on STAGELAB_FAMILY_PATH: the archive's parent folder of it
        env[FAMILY_PATH_ENV] = str((tmp / folder).parent)
    return env


def _failed(label: str, reason: str) -> LabHashes:
    return LabHashes(note=f"the lab at {label} could not compute its run hashes ({reason}): {TODAYS_SCHEME}")


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


def _answer(label: str, proc: subprocess.CompletedProcess, tmp: Path, stage_ids: list[str]) -> LabHashes:
    """The child's hashes, checked: from the archived lab, one for every stage."""
    if proc.returncode != 0:
        return _failed(label, _last_line(proc.stderr))
    try:
        answer = json.loads(_last_line(proc.stdout))
        lab, hashes = Path(answer["lab"]).resolve(), dict(answer["hashes"])
    except (ValueError, KeyError, TypeError):
        return _failed(label, f"its answer was not the hashes: {_last_line(proc.stdout)[:200]}")
    if not lab.is_relative_to(tmp):
        return _failed(label, f"the lab imported was {lab.parent}, not the archived one")
    missing = [s for s in stage_ids if s not in hashes]
    if missing:
        return _failed(label, f"it does not know the stages {', '.join(missing)}")
    return LabHashes(hashes)


def lab_hashes(label: str, root: Path, tmp: Path, family: str, folder: str, stage_ids: list[str]) -> LabHashes:
    """Every stage's run source hash as the lab archived under `tmp` (at lab_to_archive's path, the
    family's folder `folder` and its package beside it) computes it; a note instead when it cannot."""
    source = family_source(family)
    if not source.built_in and not source.origin.startswith(FAMILY_PATH_ENV):
        return LabHashes(note=f"the family {family} comes from an {source.origin}, which the lab at {label} "
                              f"would load from where it is installed, not from {label}: {TODAYS_SCHEME}")
    tmp = tmp.resolve()
    try:
        proc = subprocess.run([sys.executable, "-c", SCRIPT, family], cwd=tmp, capture_output=True, text=True,
                              env=archived_lab_environment(root, tmp, folder, source.built_in), timeout=LAB_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return _failed(label, f"no answer in {LAB_TIMEOUT_S} s")
    return _answer(label, proc, tmp, stage_ids)
