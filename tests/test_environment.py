"""pyproject.toml and environment.yml list the same dependencies."""

import re
from pathlib import Path

import pytest
import yaml

tomllib = pytest.importorskip("tomllib")  # Python 3.11+; the check needs to run on one version only

ROOT = Path(__file__).resolve().parents[1]


def normalize(req: str) -> str:
    return re.sub(r"\s+", "", req).lower()


def test_environment_matches_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = {normalize(r) for r in project["dependencies"] + project["optional-dependencies"]["dev"]}
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    assert {normalize(r) for r in pip} == wanted
    python = next(d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python"))
    assert normalize(python.removeprefix("python")) == normalize(project["requires-python"])
