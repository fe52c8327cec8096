"""What a run records of its sources: the commit of the project's own tree (never an enclosing
repository's), whether the tree was dirty, and a source hash that covers the family's Python."""

import shutil
import subprocess

import pytest

from stagelab.core.build import build_key
from stagelab.core.envinfo import git_state
from stagelab.core.family import load_family
from stagelab.core.registry import Registry, Stage, family_registry
from stagelab.core.sources import family_package_dir, family_python_files, result_python_files, run_source_hash


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


def test_untracked_family_files_make_the_tree_dirty(outer_repo, monkeypatch):
    """A new family file nobody has added yet still decides results: the run must not say clean.
    Ignored files (build output) stay out of it."""
    project, _ = outer_repo
    git("init", "-q", cwd=project)
    (project / ".gitignore").write_text("/build/\n")
    git("add", "pyproject.toml", ".gitignore", cwd=project)
    git("commit", "-qm", "own", cwd=project)
    monkeypatch.setenv("STAGELAB_ROOT", str(project))
    monkeypatch.delenv("STAGELAB_GIT_COMMIT", raising=False)
    (project / "build").mkdir()
    (project / "build" / "cache.o").write_text("ignored\n")
    assert git_state()["git_dirty"] == "false"
    (project / "kernels" / "rmsnorm").mkdir()
    (project / "kernels" / "rmsnorm" / "stages.yaml").write_text("family: rmsnorm\n")
    assert git_state()["git_dirty"] == "true"


# -- the run's source hash: the family's Python counts ------------------------------------

@pytest.fixture
def sdpa_copy(tmp_path, monkeypatch):
    """A real copy of the sdpa family's package that the run's source hash reads in its place."""
    from stagelab.core import sources

    real = sources.family_package_dir(load_family("sdpa"))
    copy = tmp_path / "sdpa"
    shutil.copytree(real, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(sources, "family_package_dir", lambda family: copy)
    return copy


def test_family_python_is_every_module_of_its_package():
    files = {p.relative_to(family_package_dir(load_family("sdpa"))).as_posix() for p in family_python_files("sdpa")}
    assert {"__init__.py", "reference.py", "inputs.py", "contenders.py", "fp8/budget.py"} <= files
    assert not any("__pycache__" in f for f in files)


def test_a_reference_fix_changes_the_run_source_hash_but_not_the_build(sdpa_copy):
    registry = family_registry("sdpa")
    stage = registry.get("s0_baseline")
    before, build_before = run_source_hash(stage, registry), build_key(stage, registry)
    reference = sdpa_copy / "reference.py"
    reference.write_text(reference.read_text() + "\n# a fix to the float64 reference\n")
    assert run_source_hash(stage, registry) != before
    assert build_key(stage, registry) == build_before, "a Python change must not rebuild the kernel"
    # a sub-package counts for the stages of the input kinds that use it (FamilySettings.kind_packages):
    # fp8/ for the FP8 stage, not for the fp16 baseline
    fp8_stage = registry.get("s9_fp8")
    budget = sdpa_copy / "fp8" / "budget.py"
    after_reference = {s.id: run_source_hash(s, registry) for s in (stage, fp8_stage)}
    budget.write_text(budget.read_text() + "\n# a fix to the FP8 budget\n")
    assert run_source_hash(fp8_stage, registry) != after_reference[fp8_stage.id]
    assert run_source_hash(stage, registry) == after_reference[stage.id]


def test_resume_runs_a_stage_again_after_a_reference_change(sdpa_copy, tmp_store):
    """`stagelab run --resume` keeps a finished run only at the current run source hash."""
    from stagelab.core import metrics
    from stagelab.record import tracking
    from stagelab.run.resume import finished_run

    registry = family_registry("sdpa")
    experiment_id = tracking.init_store("stagelab-sdpa")
    run_id = tracking.create_run(experiment_id, "s0_baseline", "smoke")
    tracking.set_tags(run_id, {metrics.TAG_SOURCE_HASH: run_source_hash(registry.get("s0_baseline"), registry),
                               metrics.TAG_OUTCOME: "no_gpu"})
    tracking.end_run(run_id)
    assert finished_run(experiment_id, registry, "s0_baseline", "smoke") == run_id
    reference = sdpa_copy / "reference.py"
    reference.write_text(reference.read_text().replace("float64", "float64 ", 1))
    assert finished_run(experiment_id, registry, "s0_baseline", "smoke") is None


def test_a_stage_file_in_the_family_folder_is_hashed_with_its_own_stage_only(tmp_path):
    """A family folder that holds its Triton stages beside family.py: one stage's edit leaves the
    other stage's run source hash alone, and the family's own module still counts for both."""
    folder = tmp_path / "fam"
    folder.mkdir()
    (folder / "family.py").write_text("# the family\n")
    for name in ("s0_a", "s1_b"):
        (folder / f"{name}.py").write_text(f"# stage {name}\n")
    (folder / "binding.cpp").write_text("// binding\n")
    stages = {n: Stage(id=n, title=n, parent=None, source=folder / f"{n}.py") for n in ("s0_a", "s1_b")}
    registry = Registry(family="fam", directory=folder, binding=folder / "binding.cpp", stages=stages)
    family = load_family("softmax")
    with pytest.MonkeyPatch.context() as patch:
        from stagelab.core import sources

        patch.setattr(sources, "family_package_dir", lambda f: folder)
        assert [p.name for p in result_python_files(registry, family)] == ["family.py"]
        s0 = run_source_hash(stages["s0_a"], registry, family)
        (folder / "s1_b.py").write_text("# stage s1_b, edited\n")
        assert run_source_hash(stages["s0_a"], registry, family) == s0
        (folder / "family.py").write_text("# the family, edited\n")
        assert run_source_hash(stages["s0_a"], registry, family) != s0


def test_a_run_keeps_every_source_its_hash_covers(tmp_store, tmp_path):
    """The stage, headers and binding under source/, the family's Python under source/python/ in its
    package's layout, and the diff against the parent."""
    from types import SimpleNamespace

    from mlflow.tracking import MlflowClient

    from stagelab.record import tracking
    from stagelab.record.saved_sources import log_sources

    registry = family_registry("sdpa")
    ctx = SimpleNamespace(stage=registry.get("s1_cp_async"), parent=registry.get("s0_baseline"),
                          registry=registry, family=load_family("sdpa"))
    run_id = tracking.create_run(tracking.init_store("stagelab-sdpa"), "s1_cp_async", "smoke")
    log_sources(run_id, ctx, tmp_path)
    client = MlflowClient()
    saved = {a.path for a in client.list_artifacts(run_id, "source")}
    assert {"source/s1_cp_async.cu", "source/sdpa_common.cuh", "source/binding.cpp",
            "source/s0_baseline_to_s1_cp_async.diff.txt", "source/python"} <= saved
    # the headers its hash covers (core.includes): none of the INT8 stage's or the Hopper stages'
    assert not {"source/int8", "source/sdpa_wgmma.cuh"} & saved
    python = {a.path for a in client.list_artifacts(run_id, "source/python")}
    assert {"source/python/reference.py", "source/python/__init__.py", "source/python/fp8"} <= python
    assert "source/python/fp8/budget.py" in {a.path for a in client.list_artifacts(run_id, "source/python/fp8")}


def test_a_cudnn_that_torch_refuses_is_named_not_fatal(monkeypatch):
    """torch's first cuDNN query raises on a cuDNN it finds unusable; the run's provenance says so."""
    import torch

    from stagelab.core.envinfo import software_versions

    def refuse():
        raise RuntimeError("cuDNN version incompatibility: PyTorch was compiled against (9, 19, 0)\n"
                           "but found runtime version (9, 1, 0)")

    monkeypatch.setattr(torch.backends.cudnn, "is_available", lambda: True)
    monkeypatch.setattr(torch.backends.cudnn, "version", refuse)
    assert software_versions()["cudnn"] == ("unusable: cuDNN version incompatibility: PyTorch was compiled "
                                            "against (9, 19, 0) but found runtime version (9, 1, 0)")
