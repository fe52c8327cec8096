"""tools/int8_recipe_trials.py: each INT8 recipe variant against float64 truth beside the default, on
the CPU emulation, and recorded as a trial run of the stage."""

import pytest

from tool_module import load_tool


@pytest.fixture(scope="module")
def tool():
    return load_tool("int8_recipe_trials")


def test_each_variant_changes_one_choice_of_the_default(tool):
    from stagelab.families.sdpa.int8.recipe import DEFAULT_RECIPE

    for name, recipe in tool.VARIANTS.items():
        changed = [field for field in ("q_block", "k_block", "v_scaling", "smooth_k", "smooth_v", "kv_tile", "p_max")
                   if getattr(recipe, field) != getattr(DEFAULT_RECIPE, field)]
        assert len(changed) == 1, (name, changed)


def test_a_variant_is_a_trial_run_with_its_errors_beside_the_default(tool, tmp_path, tmp_store, monkeypatch, capsys):
    from stagelab.core import metrics as m
    from stagelab.record import tracking

    monkeypatch.setenv("STAGELAB_GIT_COMMIT", "abc1234")
    with pytest.raises(SystemExit, match="--record needs --hypothesis"):
        tool.main(["--record", "s19_int8"])
    with pytest.raises(SystemExit, match="unknown distributions"):
        tool.main(["--distributions", "gaussian"])
    args = ["--shape", "1x1x96x64", "--variants", "v_per_head", "--distributions", "outlier", "--out", str(tmp_path),
            "--record", "s19_int8", "--hypothesis", "per-channel V scales beat one per head on outlier channels"]
    assert tool.main(args) == 0
    out = capsys.readouterr().out
    assert "| 1x1x96x64 outlier | relative L1 error vs float64 truth |" in out and "recorded as trial run" in out
    experiment = tracking.client().get_experiment_by_name("stagelab-sdpa").experiment_id
    (run,) = tracking.client().search_runs([experiment])
    assert run.data.tags[m.TAG_TRIAL_NAME] == "recipe v_per_head"
    metrics = run.data.metrics
    trial = metrics["imported/other/1x1x96x64 outlier/relative L1 error vs float64 truth/trial"]
    default = metrics["imported/other/1x1x96x64 outlier/relative L1 error vs float64 truth/default"]
    assert trial > default > 0  # one scale per head for channels 100x apart loses the small ones
    assert [a.path for a in tracking.client().list_artifacts(run.info.run_id, "recipe")] == ["recipe/recipe-v_per_head.md"]
