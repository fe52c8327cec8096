"""`stagelab run --gpus` and `--shard` end to end: a real runner executing real papermill notebooks
(smoke parameters; without a GPU each stage ends `no_gpu` after its build) side by side. Which GPU a
notebook had is read from what its own kernel process recorded, and when it ran from papermill's
own timestamps in the executed notebook the run keeps."""

import json
import re
import signal
from datetime import datetime
from itertools import combinations
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from stagelab.core import metrics

from stagelab.record import tracking
from stagelab.run.gpus import ASSUME_GPUS
from stagelab.core.sources import run_source_hash
from stagelab.core.registry import family_registry
from test_stopped_runs import finished_run, signal_once_running, stage_runs, start_runner

pytestmark = pytest.mark.slow
THREE = ["s0_baseline", "s1_cp_async", "s2_wmma"]
RESUMED_S0 = r"s0_baseline: no_gpu \(\d+s\) \(resumed"  # the kept run's own seconds, whatever the load


@pytest.fixture(autouse=True)
def two_gpus(monkeypatch):
    """The runner takes this machine to have GPUs 0 and 1 (run.gpus.ASSUME_GPUS): `--gpus 0,1` is
    checked against the machine, and these tests run it where there is no GPU at all."""
    monkeypatch.setenv(ASSUME_GPUS, "0,1")


def notebook_interval(run_id: str, stage: str, into: Path) -> tuple[float, float]:
    """When the notebook ran, as papermill recorded it in the executed notebook logged on the run."""
    path = MlflowClient().download_artifacts(run_id, f"notebook/{stage}.ipynb", str(into))
    recorded = json.loads(Path(path).read_text())["metadata"]["papermill"]
    return tuple(datetime.fromisoformat(recorded[key]).timestamp() for key in ("start_time", "end_time"))


def test_gpu_list_runs_one_notebook_per_gpu_at_a_time_each_seeing_only_its_own(tmp_store, stagelab_cli, tmp_path):
    proc = stagelab_cli("run", "--params", "params/smoke.yaml", "--stages", *THREE, "--gpus", "0,1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = [stage_runs(stage).iloc[0] for stage in THREE]
    ran = {}
    for run in runs:
        seen = run[f"tags.{metrics.TAG_CUDA_VISIBLE_DEVICES}"]  # written by the notebook's own kernel process
        assert seen in ("0", "1") and seen == run[f"tags.{metrics.TAG_GPU_INDEX}"], (run["tags.stage"], seen)
        ran[run["tags.stage"]] = (seen, notebook_interval(run["run_id"], run["tags.stage"], tmp_path))
    overlapping = [(a, b) for a, b in combinations(ran, 2)
                   if ran[a][1][0] < ran[b][1][1] and ran[b][1][0] < ran[a][1][1]]
    assert overlapping, f"no two notebooks ran at once: {ran}"
    for a, b in overlapping:
        assert ran[a][0] != ran[b][0], f"{a} and {b} shared GPU {ran[a][0]} at once: {ran}"
    header = next(line for line in proc.stdout.splitlines() if line.startswith("| stage"))
    assert [cell.strip() for cell in header.split("|")][-2] == "gpu"  # the summary says where each ran


def test_a_signal_stops_every_running_notebook_and_records_each_killed(tmp_store):
    stderr = signal_once_running(start_runner(tmp_store, "--stages", *THREE, "--gpus", "0,1"), signal.SIGTERM,
                                 kernels=2)
    assert stderr.strip().splitlines()[-1].endswith(
        "stopped by SIGTERM; s0_baseline, s1_cp_async recorded as killed; not run: s2_wmma"), stderr[-2000:]
    for stage, gpu in (("s0_baseline", "0"), ("s1_cp_async", "1")):
        run = stage_runs(stage).iloc[0]
        assert run["status"] == "KILLED" and run["tags.outcome"] == metrics.OUTCOME_KILLED
        assert "SIGTERM" in run["tags.outcome_reason"] and run[f"tags.{metrics.TAG_GPU_INDEX}"] == gpu
    assert stage_runs("s2_wmma").empty


def test_shards_with_resume_and_gpus_run_each_pair_once(tmp_store, stagelab_cli):
    """Four stages in two shards on two GPUs: shard 1/2 is s0 and s2, and s0 already has a finished run
    of its source, which --resume keeps; shard 2/2 is s1 and s3a. Every stage ends up run once."""
    registry = family_registry("sdpa")
    kept = finished_run(tracking.init_store("stagelab-sdpa"), "s0_baseline",
                        run_source_hash(registry.stages["s0_baseline"], registry))
    four = [*THREE[:2], "s2_wmma", "s3a_no_sp"]
    printed = {}
    for shard, ran in (("1/2", ["s2_wmma"]), ("2/2", ["s1_cp_async", "s3a_no_sp"])):
        proc = printed[shard] = stagelab_cli("run", "--params", "params/smoke.yaml", "--stages", *four, "--shard", shard,
                            "--resume", "--gpus", "0,1", "--kernel", "no-such-kernel")
        assert proc.returncode == 0, proc.stderr[-3000:]
        for stage in ran:
            run = stage_runs(stage)
            assert len(run) == 1 and run.iloc[0][f"tags.{metrics.TAG_SHARD}"] == shard, (stage, shard)
    assert re.search(RESUMED_S0, printed["1/2"].stdout)
    assert list(stage_runs("s0_baseline")["run_id"]) == [kept]
    assert all(len(stage_runs(stage)) == 1 for stage in four)
