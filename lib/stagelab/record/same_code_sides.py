"""The two sides `stagelab same-code` compares: a family as an earlier commit had it (its folder and
its Python package written to a temporary folder by `git archive`) and as the work tree has it now,
which must match HEAD in those files, so that the record names a commit for what was compiled.

The earlier side's run source hashes are those its own commit's lab computes (record.recorded_hashes:
the lab's package is archived with the family when it lies in the family's work tree), since runs at
that commit recorded what that lab computed; the HEAD side's are today's lab's."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from tempfile import TemporaryDirectory

from ..core import git_tree
from ..core.build import source_hash
from ..core.errors import ConfigError
from ..core.family import Family, load_family
from ..core.registry import Registry, Stage, family_registry, load_registry
from ..core.sources import family_package_dir, kind_python_files, result_python_files_in, run_hash_of
from .recorded_hashes import LabHashes, lab_hashes, lab_to_archive

SHORT = 7
DIRTY_SHOWN = 10


@dataclass(frozen=True)
class Side:
    """A family's sources at one commit: its registry (stages, headers, binding) and its Python."""

    label: str  # how messages name it: the short commit, or "HEAD"
    commit: str
    registry: Registry
    package_dir: Path
    python_files: tuple[Path, ...]
    family: Family  # the family as the work tree has it: its kind_packages scope both sides' Python
    # Each stage's run source hash as the lab of this commit computed it (record.recorded_hashes);
    # None: today's lab computes them (HEAD, a lab outside the family's work tree, or one that failed).
    recorded_hashes: Mapping[str, str] | None = None
    note: str = ""  # why the recorded hashes are missing where they should be there (the CLI prints it)
    # The earlier side: the folder its commit was archived into (its lab and family under their paths
    # relative to the work tree `root`, which record.same_inputs runs); None for HEAD.
    archive: Path | None = None
    root: Path | None = None

    def kind_python_files(self, input_kind: str) -> list[Path]:
        """The result Python a stage of `input_kind` uses (core.sources.kind_python_files)."""
        return kind_python_files(list(self.python_files), self.package_dir, self.family, input_kind)

    def run_source_hash(self, stage: Stage) -> str:
        """What a run of the stage at this commit records as its `source_hash`."""
        if self.recorded_hashes is not None:
            return self.recorded_hashes[stage.id]
        return run_hash_of(source_hash(stage, self.registry), self.package_dir, self.kind_python_files(stage.input_kind))

    def python_bytes(self, input_kind: str = "") -> dict[str, bytes]:
        """The family's result Python a stage of `input_kind` uses, by relative path."""
        return {p.relative_to(self.package_dir).as_posix(): p.read_bytes() for p in self.kind_python_files(input_kind)}


def _relative(path: Path, root: Path, what: str) -> str:
    if not path.resolve().is_relative_to(root):
        raise ConfigError(f"the family's {what} {path} is outside the git work tree {root}: same-code compares "
                          "files of one repository")
    return path.resolve().relative_to(root).as_posix() or "."


def _side(label: str, commit: str, registry: Registry, package_dir: Path, lab: LabHashes,
          archive: Path | None = None, root: Path | None = None) -> Side:
    return Side(label, commit, registry, package_dir, tuple(result_python_files_in(package_dir, registry)),
                load_family(registry.family), lab.hashes, lab.note, archive, root)


def _refuse_dirty(root: Path, paths: list[str]) -> None:
    changed = git_tree.changed_files(root, paths)
    if changed:
        shown = ", ".join(changed[:DIRTY_SHOWN]) + (f" and {len(changed) - DIRTY_SHOWN} more" if len(changed) > DIRTY_SHOWN else "")
        raise ConfigError(f"the files compared differ from HEAD ({shown}): commit or stash them first, so that "
                          "same_code.yaml names the commit that was compiled")


def _registry_at(path: Path, label: str) -> Registry:
    try:
        return load_registry(path)
    except ConfigError as exc:
        raise ConfigError(f"the stages.yaml at {label} cannot be read by this lab: {exc}") from exc


@contextmanager
def sides(family: str, from_commit: str) -> Iterator[tuple[Side, Side]]:
    """(the family at `from_commit`, the family now at HEAD); the earlier one's folder lasts as long
    as the context. Refuses an unknown commit and a work tree whose family files differ from HEAD."""
    registry = family_registry(family)
    package_dir = family_package_dir(load_family(family))
    root = git_tree.toplevel(registry.directory)
    folder, package = _relative(registry.directory, root, "folder"), _relative(package_dir, root, "Python package")
    commit = git_tree.resolve_commit(root, from_commit)
    _refuse_dirty(root, [folder, package])
    head = git_tree.resolve_commit(root, "HEAD")
    if not git_tree.exists_at(root, commit, f"{folder}/stages.yaml"):
        raise ConfigError(f"{folder}/stages.yaml does not exist at {commit[:SHORT]}: nothing to compare")
    lab = lab_to_archive(root)  # the lab of the commit computes its run hashes, if it is in this work tree
    with TemporaryDirectory(prefix="stagelab-same-code-") as tmp:
        paths = [p for p in dict.fromkeys([folder, package, *([lab] if lab else [])])
                 if git_tree.exists_at(root, commit, p)]
        git_tree.archive(root, commit, paths, Path(tmp))
        then = _registry_at(Path(tmp) / folder / "stages.yaml", commit[:SHORT])
        then_package = Path(tmp) / package
        then_package.mkdir(parents=True, exist_ok=True)  # a family whose Python came later: none then
        hashes = lab_hashes(commit[:SHORT], root, Path(tmp), family, folder, list(then.stages)) if lab else LabHashes()
        yield (_side(commit[:SHORT], commit, then, then_package.resolve(), hashes, Path(tmp).resolve(), root),
               _side(f"HEAD ({head[:SHORT]})", head, registry, package_dir, LabHashes()))
