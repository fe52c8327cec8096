"""The planted bugs of docs/results/sdpa/history/plants/ stay applicable: each is a trial's patch
(`stagelab try STAGE --patch PLANT`), so a refactor that moves the code it edits must re-anchor it."""

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PLANTS = sorted((ROOT / "docs" / "results" / "sdpa" / "history" / "plants").glob("*.diff"))


@pytest.mark.parametrize("plant", PLANTS, ids=[p.stem for p in PLANTS])
def test_a_plant_applies_to_the_kernels_as_they_are(plant, tmp_path):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    copy = tmp_path / "checkout"
    shutil.copytree(ROOT / "kernels", copy / "kernels")
    result = subprocess.run(["git", "apply", "--check", str(plant)], cwd=copy, capture_output=True, text=True,
                            env={"GIT_CEILING_DIRECTORIES": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, f"{plant.name} no longer applies: {result.stderr}"


def test_there_are_plants():
    assert PLANTS, "docs/results/sdpa/history/plants/ holds the planted bugs"
