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


def resolve_params_path(params: str | Path) -> Path:
    """A parameter file as given, or relative to the repo root when not found from here."""
    path = Path(params)
    if not path.is_absolute() and not path.exists():
        path = repo_root() / path
    return path


def kernels_root() -> Path:
    return repo_root() / "kernels"


def kernels_dir(family: str) -> Path:
    """kernels/<family>: its stages, shared headers, binding and stages.yaml."""
    return kernels_root() / family


def build_dir() -> Path:
    """Compiled stages, keyed by content hash; $STAGELAB_BUILD_DIR overrides."""
    return Path(os.environ.get("STAGELAB_BUILD_DIR", repo_root() / "build")).resolve()


def binding_cache_dir() -> Path:
    """Compiled family bindings (core.binding), keyed by content; $STAGELAB_BINDING_CACHE overrides,
    so that builds into separate build folders (the tests') share one binding per family."""
    env = os.environ.get("STAGELAB_BINDING_CACHE")
    return Path(env).resolve() if env else build_dir() / "_binding"


def mlruns_dir() -> Path:
    return repo_root() / "mlruns"


def runs_dir() -> Path:
    """Executed notebooks of batch runs, one sub-folder per batch."""
    return repo_root() / "runs"
