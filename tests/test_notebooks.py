"""Stage notebooks are generated from the registry and notebooks/explore/: the committed ones
must be what those sources make, and their intros must say what the registry says."""

import json

import pytest

from stagelab.core.errors import ConfigError
from stagelab.notebooks import explore_cells, write_notebooks
from stagelab.core.paths import repo_root
from stagelab.core.registry import all_registries


def test_committed_notebooks_match_their_sources():
    assert write_notebooks(check=True) == [], "run `stagelab notebooks` and commit the result"


@pytest.mark.parametrize("registry, stage_id", [(r, s) for r in all_registries().values() for s in r.stages])
def test_intro_carries_the_registry_and_no_outputs(registry, stage_id):
    stage = registry.get(stage_id)
    notebook = json.loads((repo_root() / "notebooks" / f"{stage_id}.ipynb").read_text())
    intro = "".join(notebook["cells"][0]["source"])
    assert stage.hypothesis.splitlines()[0] in intro
    assert (f"`{stage.parent}`" in intro) if stage.parent else "baseline" in intro
    assert stage.changes, f"{stage_id}: stages.yaml needs a `changes` entry"
    assert stage.changes.splitlines()[0] in intro
    assert all(not c.get("outputs") for c in notebook["cells"] if c["cell_type"] == "code")
    assert "parameters" in notebook["cells"][1]["metadata"]["tags"]


def test_explore_source_needs_its_separator(tmp_path):
    path = tmp_path / "x.py"
    path.write_text("only markdown\n")
    with pytest.raises(ConfigError, match="no line '# %%'"):
        explore_cells(path)
    with pytest.raises(ConfigError, match="no exploration source"):
        explore_cells(tmp_path / "missing.py")


def test_the_build_cell_says_how_the_stage_is_built():
    from dataclasses import replace

    from stagelab.notebooks import common_cells

    stage = next(iter(all_registries()["softmax"].stages.values()))
    for backend, words in (("cuda", "nvcc compiles"), ("triton", "Triton compiles")):
        head, _ = common_cells(replace(stage, backend=backend), "params/softmax-acceptance.yaml", "{}")
        assert any(words in "".join(cell["source"]) for cell in head if cell["cell_type"] == "markdown")
