"""`stagelab run --steps` (and a notebook's `steps` parameter): the optional steps to run instead
of the parameter file's, checked before any work and tagged on each run."""

from pathlib import Path

import mlflow
import pytest

from stagelab.core import metrics
from stagelab.core.errors import ConfigError
from stagelab.core.params import load_params, with_steps
from stagelab.measure.steps import StageContext


def test_steps_replace_the_files_and_are_validated():
    acceptance = load_params("params/acceptance.yaml")
    assert acceptance.steps == ("sanitize", "explore", "protocol")
    assert with_steps(acceptance, "sanitize").steps == ("sanitize",)
    assert with_steps(acceptance, "profile, sanitize").steps == ("profile", "sanitize")
    assert with_steps(acceptance, ["explore"]).steps == ("explore",)
    assert with_steps(acceptance, "").steps == () and with_steps(acceptance, []).steps == ()
    assert with_steps(acceptance, "sanitize").shapes == acceptance.shapes  # nothing else changes
    with pytest.raises(ConfigError, match="steps: 'fuzz' is not supported"):
        with_steps(acceptance, "sanitize,fuzz")


def test_a_stage_context_takes_the_override():
    assert StageContext.load("s0_baseline", "params/acceptance.yaml", steps="sanitize").params.steps == ("sanitize",)
    assert StageContext.load("s0_baseline", "params/acceptance.yaml").params.steps == ("sanitize", "explore", "protocol")


def test_a_bad_step_is_one_line_and_exit_2_before_any_run(tmp_store, stagelab_cli):
    proc = stagelab_cli("run", "--params", "params/smoke.yaml", "--stages", "s0_baseline", "--steps", "fuzz")
    assert proc.returncode == 2 and "'fuzz' is not supported" in proc.stderr, proc.stderr[-2000:]
    assert len(proc.stderr.strip().splitlines()) == 1
    assert mlflow.search_runs(search_all_experiments=True).empty


@pytest.mark.slow
def test_the_override_reaches_the_notebook_and_the_record(tmp_store, stagelab_cli, tmp_path):
    """smoke.yaml has no steps; `--steps sanitize` makes the notebook sanitize, which on this
    GPU-less machine says so (rather than that the file did not ask for it)."""
    proc = stagelab_cli("run", "--params", "params/smoke.yaml", "--stages", "s0_baseline", "--steps", "sanitize",
                        timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    [run] = mlflow.search_runs(search_all_experiments=True).to_dict("records")
    assert run[f"tags.{metrics.TAG_STEPS_OVERRIDE}"] == "sanitize"
    log = mlflow.artifacts.download_artifacts(run_id=run["run_id"], artifact_path="results/sanitizer/memcheck.log.txt",
                                              dst_path=str(tmp_path))
    assert "no CUDA device" in Path(log).read_text()


@pytest.mark.parametrize("command", ["profile", "sanitize"])
def test_the_profile_and_sanitize_commands_run_their_own_step_whatever_the_file_lists(monkeypatch, command):
    """`stagelab profile STAGE` on the default (acceptance) file once printed `skipped: acceptance has
    no steps: [profile]` on a GPU machine: asking for the tool is the opt-in."""
    from argparse import Namespace

    from stagelab.cli import tools as cli_tools
    from stagelab.stage import StageRun

    monkeypatch.setattr(StageRun, "build", lambda self, **kw: None)  # the step list is the point here,
    monkeypatch.setattr(StageRun, "resources", lambda self: None)  # not nvcc
    for params in (None, "params/acceptance.yaml", "params/long.yaml"):
        run = cli_tools._tool_run(Namespace(command=command, stage="s0_baseline", params=params, knobs=None))
        assert run.params.steps == (command,)
