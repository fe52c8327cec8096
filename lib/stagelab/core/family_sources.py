"""Where kernel families come from: built in, on STAGELAB_FAMILY_PATH, or by Python entry points.

A family is a folder holding its `stages.yaml`, the stage sources and its Python. The lab
finds families three ways, and names every family once:

- **built in**: `kernels/<name>/stages.yaml` of this checkout, with its Python in the package
  `stagelab.families.<name>` (sdpa, softmax, rmsnorm);
- **on the path**: every folder listed in `STAGELAB_FAMILY_PATH` (os.pathsep-separated) holds
  family folders `<entry>/<name>/` with `stages.yaml` and `family.py` (whose `FAMILY` is the
  family's `Family`);
- **entry points** of the group `stagelab.families`: the entry point's name is the family's
  name, and it loads the `Family` object; the family's folder is its `directory` attribute, else
  the folder of the module that defines it.

The same name from two places is an error that names both: the lab never picks one silently.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from .errors import ConfigError
from .paths import kernels_root, repo_root

FAMILY_PATH_ENV = "STAGELAB_FAMILY_PATH"
# The family a command's stage ids belong to (`--family NAME`; the CLI sets it, children inherit it).
SELECTED_FAMILY_ENV = "STAGELAB_FAMILY"
ENTRY_POINT_GROUP = "stagelab.families"
BUILTIN_PACKAGE = "stagelab.families"
# The module a folder family's Python lives in, and the name it is imported under.
FAMILY_FILE = "family.py"
FOLDER_MODULE_PREFIX = "stagelab_family_"
BUILT_IN = "built in"


@dataclass(frozen=True)
class FamilySource:
    """One family's folder and where its `Family` object comes from."""

    name: str
    directory: Path
    # "built in", "STAGELAB_FAMILY_PATH entry <folder>" or "entry point <value>".
    origin: str
    # How to load the Family: a module holding FAMILY (built in, folder) or an entry point.
    module: str = ""
    family_file: Path | None = None
    entry_point: Any = None

    @property
    def built_in(self) -> bool:
        return self.origin == BUILT_IN

    @property
    def stages_yaml(self) -> Path:
        return self.directory / "stages.yaml"

    def load(self) -> Any:
        """What the family's module gives as its Family (core.family.load_family checks it is one)."""
        if self.entry_point is not None:
            return _family_attribute(self.entry_point.load())
        if self.family_file is not None:
            return _family_attribute(_import_file(self.module, self.family_file))
        return _family_attribute(importlib.import_module(self.module))


def _family_attribute(loaded: Any) -> Any:
    """A module's FAMILY, or the object itself (an entry point may name the Family directly)."""
    return getattr(loaded, "FAMILY", loaded)


def _import_file(module_name: str, path: Path):
    """A folder family's family.py, imported once per process under a name of its own."""
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception:
        del sys.modules[module_name]
        raise
    return module


def _built_in() -> list[FamilySource]:
    import pkgutil

    # By name, as a family's package is found: the families stand above core (they import it).
    package = importlib.import_module(BUILTIN_PACKAGE)
    modules = {m.name for m in pkgutil.iter_modules(package.__path__)}
    root = kernels_root()
    return [FamilySource(name, root / name, BUILT_IN, module=f"{BUILTIN_PACKAGE}.{name}")
            for name in sorted(modules) if (root / name / "stages.yaml").is_file()]


def family_path_entries() -> list[Path]:
    """The folders STAGELAB_FAMILY_PATH names, in order; empty entries are skipped."""
    raw = os.environ.get(FAMILY_PATH_ENV, "")
    return [Path(entry).expanduser().resolve() for entry in raw.split(os.pathsep) if entry.strip()]


def _on_path() -> list[FamilySource]:
    found = []
    for entry in family_path_entries():
        if not entry.is_dir():
            raise ConfigError(f"{FAMILY_PATH_ENV} names {entry}, which is not a folder")
        for folder in sorted(p for p in entry.iterdir() if (p / "stages.yaml").is_file()):
            family_file = folder / FAMILY_FILE
            if not family_file.is_file():
                raise ConfigError(f"family folder {folder} has a stages.yaml but no {FAMILY_FILE} "
                                  "(its Family: problems, inputs, reference, contenders)")
            found.append(FamilySource(folder.name, folder, f"{FAMILY_PATH_ENV} entry {entry}",
                                      module=FOLDER_MODULE_PREFIX + folder.name, family_file=family_file))
    return found


def _entry_point_folder(entry_point) -> Path:
    family = _family_attribute(entry_point.load())
    directory = getattr(family, "directory", None)
    if directory:
        return Path(directory).resolve()
    return Path(inspect.getfile(type(family))).resolve().parent


def _entry_points() -> list[FamilySource]:
    found = []
    for entry_point in metadata.entry_points(group=ENTRY_POINT_GROUP):
        found.append(FamilySource(entry_point.name, _entry_point_folder(entry_point),
                                  f"entry point {entry_point.value}", entry_point=entry_point))
    return found


_discovered: dict[tuple[str, str], dict[str, FamilySource]] = {}


def discover_families() -> dict[str, FamilySource]:
    """Every family the lab can see, by name; a name found twice is a ConfigError naming both.
    Found once per process for each family path and checkout (commands ask many times)."""
    key = (os.environ.get(FAMILY_PATH_ENV, ""), str(kernels_root()))
    if key not in _discovered:
        _discovered[key] = _discover()
    return _discovered[key]


def _discover() -> dict[str, FamilySource]:
    sources: dict[str, FamilySource] = {}
    for source in (*_built_in(), *_on_path(), *_entry_points()):
        if not source.name.isidentifier():
            raise ConfigError(f"family folder {source.directory} ({source.origin}): {source.name!r} is not a "
                              "valid family name (letters, digits and underscores)")
        if source.name in sources:
            first = sources[source.name]
            raise ConfigError(f"two families are named {source.name!r}: {first.directory} ({first.origin}) and "
                              f"{source.directory} ({source.origin}); rename one")
        sources[source.name] = source
    return sources


def family_source(name: str) -> FamilySource:
    """One family's source; a clear error naming the families there are."""
    sources = discover_families()
    if name not in sources:
        known = ", ".join(sources) or "none"
        hint = "" if os.environ.get(FAMILY_PATH_ENV) else f" (a family outside the repo: set {FAMILY_PATH_ENV})"
        raise ConfigError(f"unknown kernel family {name!r}; known: {known}{hint}")
    return sources[name]


def stage_notebook_file(registry, stage_id: str) -> Path:
    """Where a stage's notebook is: notebooks/ of the checkout for a built-in family, the family
    folder's notebooks/ for one found elsewhere (stagelab.notebooks writes both)."""
    if family_source(registry.family).built_in:
        return repo_root() / "notebooks" / f"{stage_id}.ipynb"
    return Path(registry.directory) / "notebooks" / f"{stage_id}.ipynb"


def selected_family() -> str | None:
    """The family `--family` picked for this command and its child processes, if any."""
    return os.environ.get(SELECTED_FAMILY_ENV) or None


def family_folders(name: str | None) -> tuple[Path, ...]:
    """The folder of a family (where its own parameter files are looked for); none for no family."""
    return (family_source(name).directory,) if name else ()
