"""Promote a tuned configuration in stages.yaml, keeping the file as written: as the stage's
defaults (its `defines: {...}` line is rewritten in place) or as a named variant (a line under
its `variants:`). Comments and layout elsewhere stay untouched, and the result is read back
through the registry before it replaces the file, so a promotion can never leave an invalid
registry behind. The unified diff is returned for the tune run to record.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path

import yaml

from ..core import metrics as m
from ..record import tracking
from ..core.errors import ConfigError
from .store import elite_tag

_DEFINES_LINE = re.compile(r"^(?P<indent>\s*)defines:\s*\{(?P<body>[^}]*)\}\s*$")
_ENTRY_START = re.compile(r"^\s*-\s+id:\s*(?P<id>\S+)\s*$")


def _entry_span(lines: list[str], stage_id: str) -> tuple[int, int]:
    """[first, end) lines of the stage's entry, blank and comment lines at its end left out."""
    starts = [(i, m["id"]) for i, line in enumerate(lines) if (m := _ENTRY_START.match(line))]
    for index, (first, found) in enumerate(starts):
        if found == stage_id:
            end = starts[index + 1][0] if index + 1 < len(starts) else len(lines)
            while end > first + 1 and (not lines[end - 1].strip() or lines[end - 1].lstrip().startswith("#")):
                end -= 1
            return first, end
    raise ConfigError(f"stage {stage_id}: no `- id: {stage_id}` entry in stages.yaml")


def _defines_line(lines: list[str], stage_id: str) -> int:
    """Index of the flow-style `defines: {...}` line inside the stage's entry."""
    first, end = _entry_span(lines, stage_id)
    for index in range(first, end):
        if _DEFINES_LINE.match(lines[index]):
            return index
    raise ConfigError(f"stage {stage_id}: no one-line `defines: {{...}}` in its stages.yaml entry to promote into")


def _flow(mapping: dict[str, str]) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in mapping.items()) + "}"


def promoted_text(text: str, stage_id: str, defines: dict[str, str]) -> str:
    """stages.yaml with the stage's defines updated by `defines` (the declared order is kept)."""
    lines = text.splitlines(keepends=True)
    index = _defines_line(lines, stage_id)
    match = _DEFINES_LINE.match(lines[index])
    current = yaml.safe_load("{" + match["body"] + "}") or {}
    merged = {**{str(k): str(v) for k, v in current.items()}, **defines}
    lines[index] = f"{match['indent']}defines: {_flow(merged)}\n"
    return "".join(lines)


def variant_text(text: str, stage_id: str, name: str, defines: dict[str, str]) -> str:
    """stages.yaml with `variants: {name: defines}` added to (or replaced in) the stage's entry."""
    lines = text.splitlines(keepends=True)
    first, end = _entry_span(lines, stage_id)
    key_indent = " " * (lines[first].index("-") + 2)
    entry = f"{key_indent}  {name}: {_flow(defines)}\n"
    header = next((i for i in range(first, end) if lines[i] == f"{key_indent}variants:\n"), None)
    if header is None:
        lines[end:end] = [f"{key_indent}variants:\n", entry]
        return "".join(lines)
    same = next((i for i in range(header + 1, end) if lines[i].startswith(f"{key_indent}  {name}:")), None)
    if same is not None:
        lines[same] = entry
    else:
        lines.insert(header + 1, entry)
    return "".join(lines)


def _write_checked(registry_file: Path, new: str, stage_id: str, expect) -> str:
    """Replace stages.yaml with `new` once the registry reads it back and `expect(stage)` holds;
    returns the unified diff ('' when nothing changes)."""
    from ..core.registry import load_registry

    old = registry_file.read_text()
    if new == old:
        return ""
    candidate = registry_file.with_name(f".{registry_file.name}.promote")
    candidate.write_text(new)
    try:
        promoted = load_registry(candidate).get(stage_id)
    finally:
        candidate.unlink()
    if not expect(promoted):
        raise ConfigError(f"stage {stage_id}: the promoted stages.yaml does not read back as intended")
    registry_file.write_text(new)
    return "".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                        fromfile=f"a/{registry_file.name}", tofile=f"b/{registry_file.name}"))


def promote_defaults(registry_file: Path, stage_id: str, defines: dict[str, str]) -> str:
    """Write `defines` as the stage's defaults; returns the unified diff of stages.yaml."""
    new = promoted_text(registry_file.read_text(), stage_id, defines)
    return _write_checked(registry_file, new, stage_id,
                          lambda stage: all(stage.defines.get(k) == v for k, v in defines.items()))


def promote_variant(registry_file: Path, stage_id: str, name: str, defines: dict[str, str]) -> str:
    """Write `defines` as the stage's variant `name`; returns the unified diff of stages.yaml."""
    new = variant_text(registry_file.read_text(), stage_id, name, defines)
    return _write_checked(registry_file, new, stage_id, lambda stage: stage.variants.get(name) == defines)


def promote(registry_file: Path, stage_id: str, defines: dict[str, str], variant: str | None = None) -> tuple[str, str]:
    """`defines` as the stage's defaults, or as its variant `variant`; (the diff of stages.yaml,
    what was promoted, as record_promotion tags it)."""
    from ..core.space import config_label

    if variant:
        return promote_variant(registry_file, stage_id, variant, defines), f"variant {variant}: {config_label(defines)}"
    return promote_defaults(registry_file, stage_id, defines), f"defaults: {config_label(defines)}"


def record_promotion(parent_run_id: str, diff: str, promoted_to: str) -> None:
    """The stages.yaml diff as an artifact of the tune run, and a tag saying what was promoted."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="stagelab-promote-") as folder:
        path = Path(folder) / "stages.yaml.diff"
        path.write_text(diff)
        tracking.log_artifact(parent_run_id, path, "promotion")
    tracking.set_tags(parent_run_id, {m.TAG_PROMOTED: promoted_to})


def recorded_best(stage_id: str, run_id: str) -> tuple[str, dict[str, str]]:
    """(local run id, defines) of the best configuration a recorded tune run kept. The tune usually
    ran on a GPU machine whose store was then merged here with `stagelab import`, so `run_id` may be
    this store's id or the one the GPU machine printed (kept on the copy as portable.SOURCE_RUN_TAG)."""
    from ..record.portable import run_here_or_imported
    from ..core.space import parse_label

    run = run_here_or_imported(run_id)
    if run is None:
        raise ConfigError(f"no run {run_id} in {tracking.tracking_uri()}, here or imported")
    tags = run.data.tags
    if tags.get(m.TAG_TUNE_ROLE) != m.TUNE_ROLE_PARENT:
        raise ConfigError(f"run {run_id} is not a tune run (tag {m.TAG_TUNE_ROLE}={tags.get(m.TAG_TUNE_ROLE)})")
    if tags.get(m.TAG_STAGE) != stage_id:
        raise ConfigError(f"tune run {run_id} tuned {tags.get(m.TAG_STAGE)}, not {stage_id}")
    best = tags.get(elite_tag(1))
    if not best:
        raise ConfigError(f"tune run {run_id} kept no elite: no configuration was checked correct and timed")
    return run.info.run_id, parse_label(best)
