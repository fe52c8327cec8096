"""The team server for real: PostgreSQL, `stagelab server`, eight `stagelab run` at once.

Each run is a whole batch process (papermill notebook, its own kernel) on the cheapest smoke
stage; the stage is built once first, so the eight measure the server and not nvcc.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from services import LOOPBACK, free_port, http_server, missing, postgres
from stagelab.record import runs_view

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]
CONCURRENT_RUNS = 8  # the bar: a team's worth of batches landing together
STAGE, PARAMS, EXPERIMENT = "s0_baseline", "params/smoke.yaml", "stagelab-sdpa"
RUN_TIMEOUT_S = 1200  # eight notebooks on two cores, each about 15 s alone


@pytest.fixture(scope="module")
def team_server(tmp_path_factory):
    """`stagelab server` on a fresh PostgreSQL; yields (url, artifacts folder)."""
    try:
        import psycopg  # noqa: F401  (MLflow's PostgreSQL driver)
    except ImportError:
        missing("psycopg", "pip install -e '.[dev]'")
    tmp = tmp_path_factory.mktemp("team")
    artifacts = tmp / "artifacts"
    port = free_port()
    url = f"http://{LOOPBACK}:{port}"
    with postgres() as database:
        command = [sys.executable, "-m", "stagelab", "server", "--backend-store-uri", database,
                   "--artifacts-destination", str(artifacts), "--port", str(port)]
        with http_server(command, url, tmp / "server.log"):
            yield url, artifacts


def _stagelab(*args: str, env: dict) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "stagelab", *args], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_concurrent_runs_lose_nothing(team_server):
    url, artifacts = team_server
    env = {**os.environ, "MLFLOW_TRACKING_URI": url}
    built = subprocess.run([sys.executable, "-m", "stagelab", "build", STAGE], cwd=ROOT, env=env,
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stdout + built.stderr
    procs = [_stagelab("run", "--stages", STAGE, "--params", PARAMS, env=env) for _ in range(CONCURRENT_RUNS)]
    outputs = [proc.communicate(timeout=RUN_TIMEOUT_S) for proc in procs]
    for proc, (out, err) in zip(procs, outputs):
        assert proc.returncode == 0, err[-3000:]

    client = MlflowClient(url)
    experiment = client.get_experiment_by_name(EXPERIMENT)
    assert experiment.artifact_location.startswith("mlflow-artifacts:")  # proxied through the server
    assert json.loads(experiment.tags[runs_view.SHARED_VIEW_TAG_PREFIX + runs_view.STAGES.key()])
    runs = client.search_runs([experiment.experiment_id], max_results=100)
    assert len(runs) == CONCURRENT_RUNS
    assert len({r.data.tags["batch"] for r in runs}) == CONCURRENT_RUNS  # one batch folder each
    for run in runs:
        _assert_complete(client, run, artifacts)


def _assert_complete(client: MlflowClient, run, artifacts: Path) -> None:
    """Metrics, tags and artifacts of one run read back through the server, and on its disk."""
    assert run.info.status == "FINISHED" and run.data.tags["outcome"] == "no_gpu"
    assert run.data.metrics["max_registers"] > 0 and run.data.metrics["notebook_seconds"] > 0
    assert run.data.params["stage"] == STAGE
    names = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"notebook", "ptxas.log", "results", "source"} <= names, names
    local = Path(client.download_artifacts(run.info.run_id, f"notebook/{STAGE}.ipynb"))
    notebook = json.loads(local.read_text())
    assert any("papermill" in cell.get("metadata", {}) for cell in notebook["cells"])
    assert "registers" in Path(client.download_artifacts(run.info.run_id, "ptxas.log")).read_text()
    assert list(artifacts.rglob(f"{run.info.run_id}/artifacts/ptxas.log"))  # stored by the server
