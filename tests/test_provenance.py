"""A run records the commit of the project's own tree, never an enclosing repository's."""

import subprocess

import pytest

from stagelab.core.envinfo import git_state


IDENTITY = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"}


def git(*args, cwd) -> str:
    """Run git in `cwd`; returns HEAD afterwards (empty before the first commit)."""
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, env=IDENTITY)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, env=IDENTITY)
    return head.stdout.strip()


@pytest.fixture
def outer_repo(tmp_path):
    git("init", "-q", cwd=tmp_path)
    (tmp_path / "README").write_text("another project\n")
    git("add", "README", cwd=tmp_path)
    commit = git("commit", "-qm", "outer", cwd=tmp_path)
    project = tmp_path / "vendor" / "stagelab"
    (project / "kernels").mkdir(parents=True)
    (project / "pyproject.toml").write_text("[project]\nname = 'copy'\n")
    return project, commit


def test_copy_inside_another_checkout_records_no_foreign_commit(outer_repo, monkeypatch):
    project, outer_commit = outer_repo
    monkeypatch.setenv("STAGELAB_ROOT", str(project))
    monkeypatch.delenv("STAGELAB_GIT_COMMIT", raising=False)
    state = git_state()
    assert state["git_commit"] != outer_commit and state["git_commit"] == "unknown"


def test_own_repository_commit_is_recorded(outer_repo, monkeypatch):
    project, outer_commit = outer_repo
    git("init", "-q", cwd=project)
    git("add", "pyproject.toml", cwd=project)
    own = git("commit", "-qm", "own", cwd=project)
    monkeypatch.setenv("STAGELAB_ROOT", str(project))
    monkeypatch.delenv("STAGELAB_GIT_COMMIT", raising=False)
    state = git_state()
    assert state["git_commit"] == own != outer_commit and state["git_dirty"] == "false"


def test_environment_wins_where_there_is_no_git(monkeypatch):
    monkeypatch.setenv("STAGELAB_GIT_COMMIT", "0123abc")
    monkeypatch.setenv("STAGELAB_GIT_DIRTY", "true")
    assert git_state() == {"git_commit": "0123abc", "git_dirty": "true"}
