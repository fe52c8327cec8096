"""Promote a tuned configuration to a stage's defaults in stages.yaml, keeping the file as written.

The stage's `defines: {...}` line is rewritten in place (comments and layout elsewhere stay
untouched) and the result is read back through the registry before it replaces the file, so
a promotion can never leave an invalid registry behind. The unified diff is returned for
the tune run to record.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path

import yaml

from . import metrics as m
from . import tracking
from .errors import ConfigError

_DEFINES_LINE = re.compile(r"^(?P<indent>\s*)defines:\s*\{(?P<body>[^}]*)\}\s*$")
_ENTRY_START = re.compile(r"^\s*-\s+id:\s*(?P<id>\S+)\s*$")


def _defines_line(lines: list[str], stage_id: str) -> int:
    """Index of the flow-style `defines: {...}` line inside the stage's entry."""
    inside = False
    for index, line in enumerate(lines):
        entry = _ENTRY_START.match(line)
        if entry:
            inside = entry["id"] == stage_id
        elif inside and _DEFINES_LINE.match(line):
            return index
    raise ConfigError(f"stage {stage_id}: no one-line `defines: {{...}}` in its stages.yaml entry to promote into")


def promoted_text(text: str, stage_id: str, defines: dict[str, str]) -> str:
    """stages.yaml with the stage's defines updated by `defines` (the declared order is kept)."""
    lines = text.splitlines(keepends=True)
    index = _defines_line(lines, stage_id)
    match = _DEFINES_LINE.match(lines[index])
    current = yaml.safe_load("{" + match["body"] + "}") or {}
    merged = {**{str(k): str(v) for k, v in current.items()}, **defines}
    body = ", ".join(f"{k}: {v}" for k, v in merged.items())
    lines[index] = f"{match['indent']}defines: {{{body}}}\n"
    return "".join(lines)


def promote_defaults(registry_file: Path, stage_id: str, defines: dict[str, str]) -> str:
    """Write `defines` as the stage's defaults; returns the unified diff of stages.yaml ('' if unchanged)."""
    from .registry import load_registry

    old = registry_file.read_text()
    new = promoted_text(old, stage_id, defines)
    if new == old:
        return ""
    candidate = registry_file.with_name(f".{registry_file.name}.promote")
    candidate.write_text(new)
    try:
        promoted = load_registry(candidate).get(stage_id)
    finally:
        candidate.unlink()
    if any(promoted.defines.get(k) != v for k, v in defines.items()):
        raise ConfigError(f"stage {stage_id}: the promoted stages.yaml does not read back as {defines}")
    registry_file.write_text(new)
    return "".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                        fromfile=f"a/{registry_file.name}", tofile=f"b/{registry_file.name}"))


def record_promotion(parent_run_id: str, diff: str, label: str) -> None:
    """The stages.yaml diff as an artifact of the tune run, and a tag saying what was promoted."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="stagelab-promote-") as folder:
        path = Path(folder) / "stages.yaml.diff"
        path.write_text(diff)
        tracking.log_artifact(parent_run_id, path, "promotion")
    tracking.set_tags(parent_run_id, {m.TAG_PROMOTED: f"defaults: {label}"})
