"""Families anywhere: built in, on STAGELAB_FAMILY_PATH, by entry point; stage ids scoped by family;
`stagelab new-family`; the store of a family outside the repo; the other-checkout warning."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from stagelab.cli.new_family import write_family
from stagelab.cli.workspace import choose_workspace, other_checkout_warning
from stagelab.core.errors import ConfigError
from stagelab.core.family import load_family
from stagelab.core.family_sources import FAMILY_PATH_ENV, SELECTED_FAMILY_ENV, discover_families
from stagelab.core.paths import WORKSPACE_ENV, mlruns_dir, repo_root
from stagelab.core.registry import find_stage

ROOT = Path(__file__).resolve().parents[1]


def stagelab(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """The real command, with this checkout's code first on the path."""
    full = {**os.environ, "PYTHONPATH": str(ROOT / "lib"), **(env or {})}
    full.pop("STAGELAB_ROOT", None)
    full.pop(WORKSPACE_ENV, None)
    return subprocess.run([sys.executable, "-m", "stagelab", *args], cwd=cwd, env=full, capture_output=True,
                          text=True, timeout=600)


@pytest.fixture
def family_path(tmp_path, monkeypatch):
    """An empty folder on STAGELAB_FAMILY_PATH."""
    folder = tmp_path / "families"
    folder.mkdir()
    monkeypatch.setenv(FAMILY_PATH_ENV, str(folder))
    monkeypatch.delenv(SELECTED_FAMILY_ENV, raising=False)
    return folder


@pytest.mark.parametrize("backend", ["cuda", "triton"])
def test_new_family_is_found_on_the_path_and_listed(family_path, tmp_path, backend):
    folder = write_family("myop", family_path, backend)
    source = discover_families()["myop"]
    assert source.directory == folder and not source.built_in
    assert {"sdpa", "softmax"} <= set(discover_families())
    family = load_family("myop")
    assert family.name == "myop" and family.contenders == ("torch",)
    registry, stage = find_stage("s0_naive", "myop")
    assert registry.directory == folder and stage.id == "s0_naive"
    listed = stagelab("stages", "--family", "myop", cwd=tmp_path, env={FAMILY_PATH_ENV: str(family_path)})
    assert listed.returncode == 0, listed.stderr
    assert "# myop" in listed.stdout and "s0_naive" in listed.stdout and "# sdpa" not in listed.stdout


def test_the_skeleton_reference_is_float64_silu(family_path):
    import torch

    write_family("myop", family_path, "cuda")
    family = load_family("myop")
    problem = family.parse_problem("test", {"shape": [3, 5]})[0]
    (x,) = family.make_inputs(problem, torch.float16, seed=1, device="cpu")
    again = family.make_inputs(problem, torch.float16, seed=2, device="cpu")[0]
    assert x.shape == (3, 5) and x.dtype == torch.float16 and not torch.equal(x, again)
    truth = family.reference(problem, (x,), torch.float64)
    assert truth.dtype == torch.float64
    assert torch.allclose(truth, torch.nn.functional.silu(x.double()))
    with pytest.raises(ConfigError, match="positive integer"):
        family.parse_problem("test", {"shape": [3, 0]})


def test_new_family_refuses_to_overwrite_and_bad_names(family_path):
    write_family("myop", family_path, "cuda")
    marker = family_path / "myop" / "family.py"
    before = marker.read_text()
    with pytest.raises(ConfigError, match="already exists"):
        write_family("myop", family_path, "triton")
    assert marker.read_text() == before
    with pytest.raises(ConfigError, match="letters, digits"):
        write_family("my-op", family_path, "cuda")
    with pytest.raises(ConfigError, match="--backend"):
        write_family("other", family_path, "cute")


def test_a_stage_id_two_families_share_needs_family(family_path):
    write_family("first", family_path, "cuda")
    write_family("second", family_path, "triton")
    with pytest.raises(ConfigError, match="first and second; pick one with --family"):
        find_stage("s0_naive")
    assert find_stage("s0_naive", "second")[0].family == "second"
    os.environ[SELECTED_FAMILY_ENV] = "first"
    try:
        assert find_stage("s0_naive")[0].family == "first"
    finally:
        del os.environ[SELECTED_FAMILY_ENV]


def test_a_family_name_found_twice_is_an_error_naming_both(family_path):
    write_family("softmax", family_path, "cuda")
    with pytest.raises(ConfigError, match=r"two families are named 'softmax'.*built in.*STAGELAB_FAMILY_PATH"):
        discover_families()


def test_a_family_folder_without_family_py_is_named(family_path):
    (family_path / "broken").mkdir()
    (family_path / "broken" / "stages.yaml").write_text("family: broken\nstages: []\n")
    with pytest.raises(ConfigError, match="no family.py"):
        discover_families()


def test_unknown_family_says_where_families_come_from(monkeypatch):
    monkeypatch.delenv(FAMILY_PATH_ENV, raising=False)
    with pytest.raises(ConfigError, match="unknown kernel family 'nope'.*STAGELAB_FAMILY_PATH"):
        load_family("nope")


def test_an_entry_point_family_is_found(tmp_path):
    """A real installed distribution's entry point (a dist-info on the path), in a child process."""
    site = tmp_path / "site"
    package = site / "epfam_pkg"
    write_family("epfam", tmp_path, "triton")
    package.mkdir(parents=True)
    for path in (tmp_path / "epfam").rglob("*"):
        if path.is_file():
            target = package / path.relative_to(tmp_path / "epfam")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(path.read_text())
    (package / "__init__.py").write_text("from .family import FAMILY\n")
    info = site / "epfam_pkg-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: epfam-pkg\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[stagelab.families]\nepfam = epfam_pkg:FAMILY\n")
    listed = stagelab("stages", "--family", "epfam", cwd=tmp_path,
                      env={"PYTHONPATH": os.pathsep.join([str(ROOT / "lib"), str(site)])})
    assert listed.returncode == 0, listed.stderr
    assert "# epfam" in listed.stdout and "s0_naive" in listed.stdout


def test_an_outside_family_records_where_the_command_runs(family_path, tmp_path, monkeypatch):
    write_family("myop", family_path, "cuda")
    monkeypatch.delenv(WORKSPACE_ENV, raising=False)
    outside = tmp_path / "work"
    outside.mkdir()
    choose_workspace(argparse.Namespace(family="myop"), outside)
    assert mlruns_dir() == outside / "mlruns"
    monkeypatch.delenv(WORKSPACE_ENV)
    choose_workspace(argparse.Namespace(family="softmax"), outside)
    assert mlruns_dir() == repo_root() / "mlruns"
    choose_workspace(argparse.Namespace(family="myop"), repo_root())
    assert WORKSPACE_ENV not in os.environ


def test_another_checkout_is_named_not_used_silently(tmp_path):
    other = tmp_path / "other-checkout"
    (other / "kernels").mkdir(parents=True)
    (other / "pyproject.toml").write_text('[project]\nname = "stagelab"\n')
    warning = other_checkout_warning(other)
    assert warning is not None and str(other) in warning and str(ROOT) in warning
    assert other_checkout_warning(ROOT) is None
    listed = stagelab("stages", "--family", "softmax", cwd=other)
    assert listed.returncode == 0 and listed.stderr.count("warning: running the code of checkout") == 1


def test_the_example_family_is_what_new_family_writes(tmp_path):
    """examples/families/silu is new-family's CUDA skeleton plus a Triton stage: the files the
    skeleton wrote stay as it writes them (a change to the templates shows up here)."""
    example = ROOT / "examples" / "families" / "silu"
    written = write_family("silu", tmp_path, "cuda")
    for path in sorted(p for p in written.rglob("*") if p.is_file() and p.name != "stages.yaml"):
        relative = path.relative_to(written)
        assert (example / relative).read_text() == path.read_text(), f"{relative} differs from the skeleton's"
    skeleton_stages = (written / "stages.yaml").read_text()
    assert (example / "stages.yaml").read_text().startswith(skeleton_stages.rstrip("\n"))


def test_a_patch_to_an_outside_family_applies_from_the_folder_holding_it(family_path):
    """`stagelab try --patch` on a family outside the repo (not in a git work tree): the patch's
    paths start at the folder that holds the family's folder, as `diff -ru` there writes them."""
    import shutil

    from stagelab.core.trial_spec import patched_copy

    folder = write_family("myop", family_path, "cuda")
    before = family_path / "before"
    shutil.copytree(folder, before / "myop")
    source = folder / "s0_naive.cu"
    source.write_text(source.read_text().replace("1.0f + __expf(-v)", "1.0f + expf(-v)"))
    patch = family_path / "exact_exp.diff"
    diff = subprocess.run(["diff", "-ru", "before/myop", "myop"], cwd=family_path, capture_output=True, text=True).stdout
    patch.write_text(diff.replace("--- before/myop/", "--- a/myop/").replace("+++ myop/", "+++ b/myop/"))
    shutil.rmtree(folder)
    shutil.copytree(before / "myop", folder)
    registry, root, change = patched_copy(patch, find_stage("s0_naive", "myop")[0])
    try:
        patched = (root / "myop" / "s0_naive.cu").read_text()
        assert "1.0f + expf(-v)" in patched and "__expf" not in patched
        assert registry.family == "myop" and "+    out[i] = static_cast<T>(v / (1.0f + expf(-v)));" in change
    finally:
        shutil.rmtree(root)
