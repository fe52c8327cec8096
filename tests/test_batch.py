"""papermill runs s0_baseline.ipynb through `stagelab run` on a machine without a GPU, end to end."""

import subprocess
import sys
from pathlib import Path

import mlflow
import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def stagelab(*args, env_store):
    import os

    env = {**os.environ, "MLFLOW_TRACKING_URI": env_store}
    return subprocess.run([sys.executable, "-m", "stagelab", *args], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=1800)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU record")
def test_run_s0_without_gpu_records_no_gpu(tmp_store):
    proc = stagelab("run", "--stages", "s0_baseline", "--params", "params/smoke.yaml", env_store=tmp_store)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "s0_baseline" in proc.stdout and "no_gpu" in proc.stdout

    runs = mlflow.search_runs(experiment_names=["stagelab-sdpa"])
    assert len(runs) == 1
    run = runs.iloc[0]
    assert run["tags.outcome"] == "no_gpu" and run["tags.stage"] == "s0_baseline"
    assert run["tags.mlflow.runName"] == "s0_baseline@smoke"
    assert "correctness and timing were not run" in run["tags.outcome_reason"]
    assert run["metrics.max_registers"] > 0 and run["metrics.total_spill_bytes"] == 0
    assert any(c.startswith("metrics.registers/sdpa_s0_kernel.fp16.64.sm_90a") for c in runs.columns)
    assert run["metrics.max_shared_memory_bytes"] > 0
    assert run["tags.source_hash"] and run["tags.git_commit"]
    client = mlflow.tracking.MlflowClient()
    artifacts = {a.path for a in client.list_artifacts(run["run_id"])}
    assert {"notebook", "source", "ptxas.log", "results"} <= artifacts
    notebook = [a.path for a in client.list_artifacts(run["run_id"], "notebook")]
    assert "notebook/s0_baseline.ipynb" in notebook


def test_failing_notebook_is_recorded(tmp_store, tmp_path):
    """A notebook that cannot even start gets outcome `error` with the reason, and the run is FAILED."""
    params = tmp_path / "bad.yaml"
    params.write_text("shapes: [{shape: [1, 1, 8, 64]}]\n")
    proc = stagelab("run", "--stages", "s0_baseline", "--params", str(params), "--kernel", "no-such-kernel",
                    env_store=tmp_store)
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = mlflow.search_runs(experiment_names=["stagelab-sdpa"])
    assert list(runs["tags.outcome"]) == ["error"]
    assert "No such kernel named no-such-kernel" in runs.iloc[0]["tags.outcome_reason"]
    assert runs.iloc[0]["status"] == "FAILED"
    # tagged by the runner before the notebook: a page can tell this error current, not stale
    from stagelab.core.registry import family_registry
    from stagelab.core.sources import run_source_hash

    registry = family_registry("sdpa")
    assert runs.iloc[0]["tags.source_hash"] == run_source_hash(registry.stages["s0_baseline"], registry)


def test_bad_params_file_is_a_clear_error(tmp_store, tmp_path):
    params = tmp_path / "bad.yaml"
    params.write_text("shapes: [{shape: [1, 1, 8, 80]}]\n")
    proc = stagelab("run", "--params", str(params), env_store=tmp_store)
    assert proc.returncode == 2
    assert "head_dim: 80 is not supported" in proc.stderr


def test_hung_notebook_times_out_and_is_recorded(tmp_store):
    """A notebook past its time-out is killed (kernel process too) and recorded as `error`."""
    proc = stagelab("run", "--stages", "s0_baseline", "--params", "params/smoke.yaml", "--timeout", "2",
                    env_store=tmp_store)
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = mlflow.search_runs(experiment_names=["stagelab-sdpa"])
    run = runs.iloc[0]
    assert run["tags.outcome"] == "error" and run["status"] == "FAILED"
    assert "timed out after 2s" in run["tags.outcome_reason"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU record")
def test_second_family_runs_through_the_same_core(tmp_store):
    """The softmax family end to end without a GPU: build, resources, SASS gates (an instruction form
    among them), no_gpu, its own experiment; --strict fails the batch, as no stage could be judged."""
    proc = stagelab("run", "--params", "params/softmax-smoke.yaml", "--strict", env_store=tmp_store)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "--strict: no stage could be judged: all 2 are no_gpu (no CUDA GPU visible here)" in proc.stderr
    runs = mlflow.search_runs(experiment_names=["stagelab-softmax"])
    assert sorted(runs["tags.stage"]) == ["sm0_block_three_pass", "sm1_warp_online"]
    assert set(runs["tags.outcome"]) == {"no_gpu"} and set(runs["tags.family"]) == {"softmax"}
    assert (runs["metrics.sass/LDL/softmax_sm1_kernel.fp16.sm_90a"] == 0).any()
    assert (runs["metrics.sass/LDG.E.128/softmax_sm1_kernel.fp16.sm_90a"] > 0).any()
    assert (runs["metrics.registers/softmax_sm0_kernel.bf16.sm_90a"] > 0).any()
    client = mlflow.tracking.MlflowClient()
    child = runs[runs["tags.stage"] == "sm1_warp_online"].iloc[0]
    source = {a.path for a in client.list_artifacts(child["run_id"], "source")}
    assert "source/sm0_block_three_pass_to_sm1_warp_online.diff.txt" in source, source
    assert {"source/binding.cpp", "source/python"} <= source, source
    assert mlflow.search_runs(experiment_names=["stagelab-sdpa"]).empty

