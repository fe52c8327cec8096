"""The git questions `stagelab same-code` asks of the repository that holds a family: which commit a
name means, whether the files compared differ from HEAD, and those files as a commit had them."""

from __future__ import annotations

import subprocess
import tarfile
import tempfile
from pathlib import Path

from .errors import ConfigError

GIT_TIMEOUT_S = 300


def _git(root: Path, *args: str, text: bool = True) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=text, timeout=GIT_TIMEOUT_S,
                              check=False)
    except OSError as exc:
        raise ConfigError(f"cannot run git in {root}: {exc}") from exc


def toplevel(folder: Path) -> Path:
    """The work tree that holds `folder`."""
    proc = _git(folder, "rev-parse", "--show-toplevel")
    if proc.returncode != 0:
        raise ConfigError(f"{folder} is in no git repository: there is no earlier commit to compare with")
    return Path(proc.stdout.strip()).resolve()


def resolve_commit(root: Path, name: str) -> str:
    """The full hash of the commit `name` means in the repository at `root`."""
    proc = _git(root, "rev-parse", "--verify", "--quiet", f"{name}^{{commit}}")
    if proc.returncode != 0:
        raise ConfigError(f"unknown commit {name!r} in {root}")
    return proc.stdout.strip()


def changed_files(root: Path, paths: list[str]) -> list[str]:
    """The files under `paths` (relative to root) that differ from HEAD: edited, staged or untracked
    (not ignored ones, build outputs, nor Python's bytecode caches: importing a family's family.py
    writes one beside it, in a repository that may not ignore them)."""
    proc = _git(root, "status", "--porcelain", "--untracked-files=normal", "--", *paths)
    if proc.returncode != 0:
        raise ConfigError(f"git status failed in {root}: {proc.stderr.strip()}")
    changed = [line[3:] for line in proc.stdout.splitlines() if line.strip()]
    return [path for path in changed if "__pycache__" not in Path(path).parts]


def exists_at(root: Path, commit: str, path: str) -> bool:
    return _git(root, "cat-file", "-e", f"{commit}:{path}").returncode == 0


def archive(root: Path, commit: str, paths: list[str], into: Path) -> None:
    """The files under `paths` as `commit` had them, written below `into` at their own relative paths."""
    proc = _git(root, "archive", "--format=tar", commit, "--", *paths, text=False)
    if proc.returncode != 0:
        raise ConfigError(f"git archive {commit} {' '.join(paths)} failed: {proc.stderr.decode().strip()}")
    with tempfile.TemporaryFile() as tar_file:
        tar_file.write(proc.stdout)
        tar_file.seek(0)
        with tarfile.open(fileobj=tar_file) as tar:
            tar.extractall(into, filter="data")
