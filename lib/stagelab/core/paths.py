"""Where the project's folders are, found from the package or the environment."""

from __future__ import annotations

import os
from pathlib import Path


def repo_root() -> Path:
    """The project checkout: $STAGELAB_ROOT, else the folder holding kernels/ above this file or cwd."""
    env = os.environ.get("STAGELAB_ROOT")
    if env:
        return Path(env).resolve()
    for start in (Path(__file__).resolve(), Path.cwd().resolve()):
        for candidate in (start, *start.parents):
            if (candidate / "kernels").is_dir() and (candidate / "pyproject.toml").is_file():
                return candidate
    raise FileNotFoundError(
        "cannot find the stagelab checkout (a folder with kernels/ and pyproject.toml); "
        "set STAGELAB_ROOT"
    )


def kernels_root() -> Path:
    return repo_root() / "kernels"


def build_dir() -> Path:
    """Compiled stages, keyed by content hash; $STAGELAB_BUILD_DIR overrides."""
    return Path(os.environ.get("STAGELAB_BUILD_DIR", workspace_root() / "build")).resolve()


# The folder a command keeps its default store (mlruns/) and executed notebooks (runs/) in:
# the checkout for its own families; the folder the command runs in for a family outside it
# (the CLI sets this, and child processes inherit it).
WORKSPACE_ENV = "STAGELAB_WORKSPACE"


def workspace_root() -> Path:
    env = os.environ.get(WORKSPACE_ENV)
    return Path(env).resolve() if env else repo_root()


def results_dir(family: str) -> Path:
    """docs/results/<family> of the checkout; results/<family> where the command runs for a store
    kept outside it (a family outside the repo, run outside it)."""
    if workspace_root() == repo_root():
        return repo_root() / "docs" / "results" / family
    return workspace_root() / "results" / family


def binding_cache_dir() -> Path:
    """Compiled family bindings (core.binding), keyed by content; $STAGELAB_BINDING_CACHE overrides,
    so that builds into separate build folders (the tests') share one binding per family."""
    env = os.environ.get("STAGELAB_BINDING_CACHE")
    return Path(env).resolve() if env else build_dir() / "_binding"


def mlruns_dir() -> Path:
    return workspace_root() / "mlruns"


def runs_dir() -> Path:
    """Executed notebooks of batch runs, one sub-folder per batch."""
    return workspace_root() / "runs"


def resolve_params_path(params: str | Path, *folders: Path) -> Path:
    """A parameter file: relative to each of `folders` first (a family's own folder, so that its
    `params/acceptance.yaml` is never another family's), then as given, then relative to the repo
    root; as given when found nowhere (the reader then names it)."""
    path = Path(params)
    if path.is_absolute():
        return path
    for folder in folders:
        if (folder / path).is_file():
            return folder / path
    if path.exists() or not (repo_root() / path).exists():
        return path
    return repo_root() / path
