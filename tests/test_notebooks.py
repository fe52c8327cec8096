"""Stage notebooks are generated from the registry and notebooks/explore/: the committed ones
must be what those sources make, and their intros must say what the registry says."""

import json

import pytest

from stagelab.core.errors import ConfigError
from stagelab.core.family import load_family
from stagelab import notebooks
from stagelab.notebooks import explore_cells, stage_notebook, write_notebooks
from stagelab.core.paths import repo_root
from stagelab.core.registry import all_registries, family_registry


def markdown_of(notebook) -> str:
    return "\n".join("".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "markdown")


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


def test_a_stage_without_an_explore_file_gets_no_exploration_section(tmp_path, monkeypatch):
    """Nothing to explore is no error: the notebook goes from the profile to the outcome, numbered
    on, and its intro names no explore file; with the file, section 5 is its exploration."""
    monkeypatch.setattr(notebooks, "stage_notebook_file", lambda registry, stage_id: tmp_path / f"{stage_id}.ipynb")
    registry = family_registry("softmax")
    stage = registry.get("sm0_block_three_pass")
    notebook = stage_notebook(registry, stage)
    bare = markdown_of(notebook)
    assert "Exploration" not in bare and "## 5. Outcome" in bare and "## 6." not in bare
    assert "notebooks/explore" not in bare
    assert "".join(notebook["cells"][-3]["source"]) == "run.profile()", "the outcome's two cells follow the profile"
    (tmp_path / "explore").mkdir()
    (tmp_path / "explore" / f"{stage.id}.py").write_text("Threads per row.\n# %%\nprint(run.stage.id)\n")
    explored = markdown_of(stage_notebook(registry, stage))
    assert "## 5. Exploration\nThreads per row." in explored and "## 6. Outcome" in explored
    assert f"notebooks/explore/{stage.id}.py" in explored


def test_the_family_words_its_notebook_prose():
    """The sanitizer's and the profiler's intros say what the family computes: attention's causal
    masks and tensor pipe in sdpa's notebooks, none of it in softmax's."""
    sdpa = family_registry("sdpa")
    attention = markdown_of(stage_notebook(sdpa, sdpa.get("s0_baseline")))
    assert "small odd problems, causal and not" in attention and "tensor pipe, FLOP/s" in attention
    softmax = family_registry("softmax")
    for stage in softmax.stages.values():
        text = markdown_of(stage_notebook(softmax, stage))
        assert "causal" not in text and "tensor pipe" not in text
        assert "one narrower than a block's stride" in text


def test_the_build_cell_says_how_the_stage_is_built():
    from dataclasses import replace

    from stagelab.notebooks import _measuring_cells

    registry = all_registries()["softmax"]
    stage = next(iter(registry.stages.values()))
    family = load_family("softmax")
    for backend, words in (("cuda", "nvcc compiles"), ("triton", "Triton compiles"), ("cute", "CuTe DSL compiles")):
        cells = _measuring_cells(replace(stage, backend=backend), family)
        assert any(words in "".join(cell["source"]) for cell in cells if cell["cell_type"] == "markdown")


def _knobs_named(python: str) -> set[str]:
    """The compile-time knobs an exploration cell names: `run.variant(KNOB=...)` keywords and the
    upper-case keys of dict literals (try_variants' {"label": {"KNOB": value}})."""
    import ast
    import re

    named = set()
    for node in ast.walk(ast.parse(python)):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "variant":
            named |= {k.arg for k in node.keywords if k.arg}
        if isinstance(node, ast.Dict):
            named |= {k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)
                      and re.fullmatch(r"[A-Z][A-Z0-9_]+", k.value)}
    return named


@pytest.mark.parametrize("family", sorted(all_registries()))
def test_every_knob_an_exploration_names_is_one_its_stage_has(family):
    """An exploration cell runs only on a GPU with `steps: [explore]` (acceptance.yaml): a knob removed
    from its stage (s7's turn knobs, with the composed parts) would end that run `error` after all its
    checks and timing. Read here, from the cell's source, against the stage's knobs."""
    from stagelab.core.knobs import stage_knobs

    registry = family_registry(family)
    checked = 0
    for stage in registry.stages.values():
        path = notebooks.explore_path(registry, stage)
        if path is None:
            continue
        python = "".join(explore_cells(path)[1]["source"])
        unknown = _knobs_named(python) - set(stage_knobs(stage, registry) or ())
        assert not unknown, f"{path} names knobs {stage.id} does not have: {sorted(unknown)}"
        checked += 1
    assert checked or family != "sdpa"


def test_the_knob_reader_sees_variant_keywords_and_variant_dicts():
    cell = ('v = run.variant(BLOCK_N=64)\n'
            'x = try_variants(run, "t", {"a": {"STAGES_D128": 2, "note": 1}}, shapes=[])\n'
            'label = {"K wait": 1}')
    assert _knobs_named(cell) == {"BLOCK_N", "STAGES_D128"}
