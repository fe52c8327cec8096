"""What a trial changes: a named variant, define overrides, a patch (a code change that is not a
knob), or a patch with defines (a removed knob replayed: its patch restores it, a define turns it
on). `prepare` turns a spec into the stage and registry to build, with clear errors for an
unknown variant, a bad define or one that is no knob of the stage (core.knobs), a missing patch and
a patch that does not apply."""

from __future__ import annotations

import difflib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .errors import ConfigError
from .knobs import check_defines, check_variant
from .paths import repo_root
from .registry import Registry, Stage, load_registry

_DEFINE_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(\S+)")


def parse_define(text: str) -> tuple[str, str]:
    """NAME=VALUE -> (NAME, VALUE); anything else is a clear error."""
    match = _DEFINE_RE.fullmatch(text)
    if not match:
        raise ConfigError(f"bad define {text!r}: expected NAME=VALUE, e.g. BLOCK_N=64")
    return match[1], match[2]


def parse_defines(texts: list[str]) -> dict[str, str]:
    defines: dict[str, str] = {}
    for text in texts:
        key, value = parse_define(text)
        if key in defines and defines[key] != value:
            raise ConfigError(f"define {key} given twice in one trial ({defines[key]} and {value})")
        defines[key] = value
    return defines


@dataclass(frozen=True)
class TrialSpec:
    """One trial: a variant name, defines, a patch file; `name` labels it (its run, its table rows)."""

    name: str
    variant: str | None = None
    defines: dict[str, str] = field(default_factory=dict)
    patch: Path | None = None

    @classmethod
    def of(cls, *, variant: str | None = None, defines: dict[str, str] | None = None,
           patch: str | Path | None = None, name: str | None = None) -> "TrialSpec":
        defines = dict(defines or {})
        parts = ([variant] if variant else []) + ([Path(patch).stem] if patch else [])
        parts += [",".join(f"{k}={v}" for k, v in sorted(defines.items()))] if defines else []
        if not parts:
            raise ConfigError("a trial needs a variant, defines or a patch")
        return cls(name or "+".join(parts), variant, defines, Path(patch) if patch else None)

    def describe(self) -> dict[str, str]:
        return {"variant": self.variant or "", "defines": ",".join(f"{k}={v}" for k, v in sorted(self.defines.items())),
                "patch": self.patch.name if self.patch else ""}


def patch_root(directory: Path) -> Path:
    """The folder a patch's paths start from: the checkout for its own families; for a family outside
    it, the git work tree that holds the family's folder, else the folder holding that folder."""
    directory = directory.resolve()
    if directory.is_relative_to(repo_root().resolve()):
        return repo_root().resolve()
    proc = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=directory, capture_output=True, text=True,
                          check=False)
    return Path(proc.stdout.strip()).resolve() if proc.returncode == 0 else directory.parent


def patched_copy(patch: Path, registry: Registry) -> tuple[Registry, Path, str]:
    """The family's kernel folder copied to a temporary root (at the same relative path, so the
    patch's paths hold), the patch applied there with `git apply`; returns the patched registry,
    the root (the caller removes it) and the change as a unified diff of the files it touched."""
    if not patch.is_file():
        raise ConfigError(f"--patch: no such file {patch}")
    relative = registry.directory.resolve().relative_to(patch_root(registry.directory))
    root = Path(tempfile.mkdtemp(prefix="stagelab-try-"))
    shutil.copytree(registry.directory, root / relative)
    # Outside any repository git apply patches the working files; a ceiling keeps it from finding one above /tmp.
    env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(root.parent)}
    proc = subprocess.run(["git", "apply", "--whitespace=nowarn", str(patch.resolve())], cwd=root, env=env,
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        raise ConfigError(f"--patch {patch}: does not apply to {relative} as it is now "
                          f"(git apply exit {proc.returncode}):\n{proc.stderr.strip()}")
    return load_registry(root / relative / "stages.yaml"), root, tree_diff(registry.directory, root / relative,
                                                                             str(relative))


def tree_diff(before: Path, after: Path, label: str) -> str:
    """Unified diffs of the files that differ between two copies of a folder."""
    names = sorted({p.relative_to(before) for p in before.rglob("*") if p.is_file()}
                   | {p.relative_to(after) for p in after.rglob("*") if p.is_file()})
    chunks = []
    for name in names:
        old, new = before / name, after / name
        old_text = old.read_text(errors="replace") if old.is_file() else ""
        new_text = new.read_text(errors="replace") if new.is_file() else ""
        if old_text != new_text:
            chunks += difflib.unified_diff(old_text.splitlines(keepends=True), new_text.splitlines(keepends=True),
                                           fromfile=f"a/{label}/{name}", tofile=f"b/{label}/{name}")
    return "".join(chunks)


def prepare(spec: TrialSpec, registry: Registry, stage: Stage) -> tuple[Stage, Registry, str, Path | None]:
    """(the trial's stage, the registry it builds from, its source diff, a temporary folder to remove)."""
    workdir, diff = None, ""
    if spec.patch is not None:
        registry, workdir, diff = patched_copy(spec.patch, registry)
        try:
            stage = registry.get(stage.id)
        except ConfigError:
            shutil.rmtree(workdir, ignore_errors=True)
            raise
        if not diff:
            shutil.rmtree(workdir, ignore_errors=True)
            raise ConfigError(f"--patch {spec.patch}: applies but changes nothing")
    try:
        if spec.variant:
            check_variant(stage, registry, spec.variant, f"trial {spec.name}")
        # against the sources the trial builds: a patch may add the knob its defines turn on
        check_defines(stage, registry, spec.defines, f"trial {spec.name}")
        trial_stage = stage.variant(spec.variant) if spec.variant else stage
    except ConfigError:
        if workdir:
            shutil.rmtree(workdir, ignore_errors=True)
        raise
    return trial_stage.with_defines(spec.defines), registry, diff, workdir
