"""Whether an edit of a family's Python left its runs' inputs as they were, for `stagelab same-code`.

A run's source hash covers the family's Python, since that decides the inputs, the reference and the
budget. An edit may still leave every result as it was: when each definition it touches lies on the
family's input path (FamilySettings.input_path, record.input_path) and that path makes, for every check
of every parameter file of the family, the same tensors at both commits. Both sides are asked in a
child process, each with its own lab and family (the earlier one archived, as record.recorded_hashes
does): every problem, dtype, seed (and seed 0, which chains use) and distribution of each file, drawn
on the CPU, hashed byte for byte with its shape, strides and dtype.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import ConfigError
from ..core.family_sources import FAMILY_PATH_ENV, family_folders, family_source
from ..core.params import DEFAULT_FAMILY
from ..core.yaml_file import read_yaml
from ..core.paths import WORKSPACE_ENV, repo_root
from .input_path import changed_names, outside_input_path
from .recorded_hashes import LAB_PACKAGE, archived_lab_environment, lab_to_archive
from .same_code_sides import Side

PROBE_TIMEOUT_S = 3600  # acceptance.yaml's largest problems draw for seconds each on a small machine

# Run by each side's lab: {file: {"digest", "draws"} or {"error"}} as JSON on the last line; a line
# per file on stderr as it goes.
SCRIPT = r"""
import hashlib, json, sys
import torch
from stagelab.core.family import DEFAULT_DISTRIBUTION
from stagelab.core.params import load_params
family_name, answer, drawn = sys.argv[1], {}, {}

def digest_of(family, problem, dtype, seed, distribution):
    # a check's inputs, hashed with their shapes, strides and dtypes (no names: those may change)
    digest = hashlib.sha256()
    try:
        tensors = family.make_inputs(problem, family.torch_dtype(dtype), seed, "cpu", distribution)
    except Exception as exc:  # the same refusal on both sides is the same behaviour
        return hashlib.sha256(f"{type(exc).__name__}: {exc}".encode()).hexdigest()
    for t in tensors:
        digest.update(repr((tuple(t.shape), t.stride(), str(t.dtype))).encode())
        digest.update(t.contiguous().view(torch.uint8).numpy())
    return digest.hexdigest()

for name in sys.argv[2:]:
    try:
        params = load_params(name)
    except Exception as exc:
        answer[name] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
        continue
    family = params.family
    if family is None or family.name != family_name:
        continue
    digest, draws = hashlib.sha256(), 0
    for problem in dict.fromkeys([*params.shapes, *params.timed, params.mission]):
        for seed in dict.fromkeys([*params.seeds, 0]):
            for distribution in dict.fromkeys([*params.distributions, DEFAULT_DISTRIBUTION]):
                for dtype in params.dtypes:  # innermost: a family may keep a draw for its next dtype
                    key = (repr(problem), dtype, seed, distribution)  # files share problems: drawn once
                    if key not in drawn:
                        drawn[key] = digest_of(family, problem, dtype, seed, distribution)
                    digest.update(drawn[key].encode())
                    draws += 1
    answer[name] = {"digest": digest.hexdigest(), "draws": draws}
    print(f"{name.rsplit('/', 1)[-1]}: {draws} draws", file=sys.stderr, flush=True)
print(json.dumps(answer))
"""


@dataclass(frozen=True)
class InputsVerdict:
    """Whether an edit of the family's Python left the inputs of every check as they were."""

    differences: list[str]  # why not, one line each; empty when it did
    note: str = ""  # what was shown, for the record (same_code.yaml's `family_python`)


def _family_of(path: Path) -> object:
    """The family a parameter file names (params.DEFAULT_FAMILY where it names none); None where the
    file cannot be read: the draws then name its error on both sides."""
    try:
        raw = read_yaml(path, f"{path} not found")
    except ConfigError:
        return None
    return raw.get("family", DEFAULT_FAMILY) if isinstance(raw, dict) else None


def params_files(family: str) -> list[Path]:
    """Every parameter file the family's runs may use: those of its folder's params/ and the
    checkout's that name it (another family's files are that family's business)."""
    folders = [*(f / "params" for f in family_folders(family)), repo_root() / "params"]
    found = [p.resolve() for folder in folders if folder.is_dir() for p in sorted(folder.glob("*.yaml"))]
    return [p for p in dict.fromkeys(found) if _family_of(p) in (family, None)]


# Each side's answer, by (commit, archive folder, files): stages of several input kinds ask once.
_answers: dict[tuple, dict] = {}
Progress = Callable[[str], None]


def _probe(side: Side, env: dict[str, str], cwd: Path, files: list[Path], progress: Progress) -> dict:
    """The side's answer ({file: ...}), or {"failed": why}."""
    key = (side.commit, side.archive, tuple(files))
    if key not in _answers:
        _answers[key] = _ask(side, env, cwd, files, progress)
    return _answers[key]


def _ask(side: Side, env: dict[str, str], cwd: Path, files: list[Path], progress: Progress) -> dict:
    """The child's answer; a line of `progress` per file it has drawn (a large file takes minutes)."""
    with tempfile.TemporaryFile("w+") as out:  # a file, not a pipe: its stdout never blocks the child
        proc = subprocess.Popen([sys.executable, "-c", SCRIPT, side.family.name, *map(str, files)], cwd=cwd,
                                stdout=out, stderr=subprocess.PIPE, text=True, env=env)
        timer = threading.Timer(PROBE_TIMEOUT_S, proc.kill)
        timer.start()
        last = "no output"
        assert proc.stderr is not None
        for line in proc.stderr:
            if line.strip():
                last = line.strip()
                if last.endswith(" draws"):
                    progress(f"inputs at {side.label}: {last}")
        returncode = proc.wait()
        timed_out = not timer.is_alive() and returncode != 0  # the timer fired: it killed the child
        timer.cancel()
        out.seek(0)
        lines = [line for line in out.read().splitlines() if line.strip()]
    if timed_out:
        return {"failed": f"no answer in {PROBE_TIMEOUT_S} s"}
    if returncode != 0 or not lines:
        return {"failed": f"exit {returncode}: {last[:300]}"}
    try:
        return dict(json.loads(lines[-1]))
    except ValueError:
        return {"failed": f"its answer was not JSON: {lines[-1][:200]}"}


def _compare(label_then: str, then: dict, now: dict) -> tuple[list[str], int]:
    """The lines where two answers differ, and the draws compared where they agree."""
    lines, draws = [], 0
    for name in sorted(then.keys() | now.keys()):
        old, new = then.get(name), now.get(name)
        shown = Path(name).name
        if old is None or new is None:
            lines.append(f"{shown} is a parameter file of the family on one side only")
        elif old == new and "error" in old:  # no lab reads it, so no run used it
            continue
        elif "error" in old or "error" in new:
            lines.append(f"{shown} cannot be read at {label_then if 'error' in old else 'HEAD'}: "
                         f"{(old.get('error') or new.get('error'))}")
        elif old != new:
            lines.append(f"{shown}: the inputs differ ({old['draws']} draws at {label_then}, {new['draws']} now)")
        else:
            draws += new["draws"]
    return lines, draws


def _then_environment(then: Side, now: Side) -> dict[str, str]:
    """The child's environment for the earlier side: its own lab where the family's repository holds
    the lab (record.recorded_hashes), else today's lab; the family as the commit had it either way."""
    assert then.archive is not None and then.root is not None
    folder = now.registry.directory.resolve().relative_to(then.root).as_posix()
    if lab_to_archive(then.root) is not None:
        return archived_lab_environment(then.root, then.archive, folder, family_source(now.family.name).built_in)
    env = {k: v for k, v in os.environ.items() if k != WORKSPACE_ENV}
    return env | {"PYTHONPATH": str(LAB_PACKAGE.parent), "PYTHONDONTWRITEBYTECODE": "1",
                  FAMILY_PATH_ENV: str((then.archive / folder).parent)}


def same_inputs(then: Side, now: Side, input_kind: str = "", files: list[Path] | None = None,
                progress: Progress = lambda line: None) -> InputsVerdict:
    """The verdict on the family's Python a stage of `input_kind` uses (`then` an archived side), its
    inputs drawn for every check of `files` (default: params_files, every file the family may run)."""
    before, after = then.python_bytes(input_kind), now.python_bytes(input_kind)
    changed = sorted(name for name in before.keys() | after.keys() if before.get(name) != after.get(name))
    if not changed:
        return InputsVerdict([])
    outside = outside_input_path(before, after, now.family.input_path)
    if outside:
        return InputsVerdict([f"the family's Python differs ({line}): it decides the inputs, the reference and "
                              "the budget, so a run of the older source judged other things" for line in outside])
    if not any(changed_names(before.get(path), after.get(path)) for path in changed):
        return InputsVerdict([], f"{', '.join(changed)}: no definition changed (docstrings, comments, layout or "
                                 "the input-path declaration)")
    if then.archive is None or then.root is None:
        return InputsVerdict([f"the family's Python differs ({', '.join(changed)}) and {then.label} is no archived "
                              "commit whose lab could draw its inputs"])
    now_env = {**os.environ, "PYTHONPATH": str(LAB_PACKAGE.parent), "PYTHONDONTWRITEBYTECODE": "1"}
    files = params_files(now.family.name) if files is None else files
    answers = {then.label: _probe(then, _then_environment(then, now), then.archive, files, progress),
               "HEAD": _probe(now, now_env, repo_root(), files, progress)}
    failed = [f"the lab at {label} could not draw the inputs ({answer['failed']})"
              for label, answer in answers.items() if "failed" in answer]
    if failed:
        return InputsVerdict(failed)
    lines, draws = _compare(then.label, answers[then.label], answers["HEAD"])
    if lines:
        return InputsVerdict(lines)
    return InputsVerdict([], f"{', '.join(changed)} changed on the input path only; the same inputs at both commits "
                             f"for {draws} draws of {len(answers['HEAD'])} parameter file(s)")
