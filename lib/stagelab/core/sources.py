"""Everything that decides a stage's result, as files, and the hash a run records of them.

The build's source hash (core.build.source_hash: the stage, the family headers it and the binding
include (core.includes), the binding) decides the built module, and only that keys the build cache.
A result depends on more: the family's Python makes the inputs, the float64 reference and the
budget, and picks the contenders. A fix there changes what a run finds without changing a byte of
the module, so the run's source hash (`run_source_hash`, the `source_hash` tag that `stagelab run
--resume` and a tune's reopened run compare) covers the family's Python too, and the run keeps those
files with its sources.
"""

from __future__ import annotations

import hashlib
import inspect
from pathlib import Path

from .build import source_hash
from .family import Family, load_family
from .registry import Registry, Stage


def family_package_dir(family: Family) -> Path:
    """The folder of the module that defines the family's class: its package for a built-in
    family (stagelab/families/<name>/), the family folder for one whose family.py stands alone."""
    return Path(inspect.getfile(type(family))).resolve().parent


def python_files_under(folder: Path) -> list[Path]:
    """Every .py file under a folder, sub-packages included (sdpa/fp8/), sorted."""
    return sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.relative_to(folder).parts)


def family_python_files(family: Family | str) -> list[Path]:
    """The family's Python: every .py file under its package folder, sub-packages included
    (sdpa/fp8/), sorted. Over-cautious rather than short: a helper module the family imports
    lazily counts as much as one it imports at once."""
    if isinstance(family, str):
        family = load_family(family)
    return python_files_under(family_package_dir(family))


def result_python_files(registry: Registry, family: Family | None = None) -> list[Path]:
    """The family's Python less the stage sources among it (a Triton stage's .py in a family
    folder): those are each stage's own source, hashed with that stage only, so an edit to one
    stage never marks its siblings' runs stale."""
    return result_python_files_in(family_package_dir(family or load_family(registry.family)), registry)


def result_python_files_in(folder: Path, registry: Registry) -> list[Path]:
    """result_python_files of a family whose package folder is `folder` (a checkout of another
    commit, `stagelab same-code`)."""
    stage_sources = {s.source.resolve() for s in registry.stages.values()}
    return [p for p in python_files_under(folder) if p.resolve() not in stage_sources]


def kind_python_files(python_files: list[Path], folder: Path, family: Family, input_kind: str) -> list[Path]:
    """Of the family's result Python under `folder`, the files a stage of `input_kind` can use: all
    but those in a sub-package the family keeps for other kinds (FamilySettings.kind_packages)."""
    left_out = [(folder / package).resolve() for package, kinds in family.kind_packages.items()
                if input_kind not in kinds]
    return [p for p in python_files if not any(p.resolve().is_relative_to(package) for package in left_out)]


def run_source_hash(stage: Stage, registry: Registry, family: Family | None = None) -> str:
    """The build's source hash and the family's Python its input kind uses: what a run records as
    `source_hash`."""
    family = family or load_family(registry.family)
    folder = family_package_dir(family)
    python_files = kind_python_files(result_python_files_in(folder, registry), folder, family, stage.input_kind)
    return run_hash_of(source_hash(stage, registry), folder, python_files)


def run_hash_of(build_source_hash: str, folder: Path, python_files: list[Path]) -> str:
    """run_source_hash from its parts: the build's source hash and the family's Python files
    under its package folder `folder` (named relative to it)."""
    digest = hashlib.sha256(build_source_hash.encode())
    for path in python_files:
        digest.update(path.relative_to(folder).as_posix().encode())  # sdpa/ and sdpa/fp8/ both hold a contenders.py
        digest.update(path.read_bytes())
    return digest.hexdigest()
