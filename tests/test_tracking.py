"""MLflow logging into a real temporary SQLite store, read back with mlflow.search_runs."""

from pathlib import Path

import mlflow

from stagelab.record import tracking


def test_log_and_read_back(tmp_store, tmp_path):
    experiment_id = tracking.init_store("unit")
    assert tracking.init_store("unit") == experiment_id  # idempotent: created once
    run_id = tracking.create_run(experiment_id, "s9_test", "smoke")
    tracking.log_params(run_id, {"stage": "s9_test", "repetitions": 100})
    tracking.log_metrics(run_id, {"p50_us/1x2x33x64_causal": 12.5, "max_registers": 96,
                                  "not_finite": float("nan"), "speedup_vs_parent/<odd>": 1.5})
    tracking.set_tags(run_id, {"outcome": "pass", "gpu": "test"})
    (tmp_path / "table.csv").write_text("a,b\n1,2\n")
    tracking.log_artifact(run_id, tmp_path / "table.csv", "results")
    tracking.end_run(run_id)

    runs = mlflow.search_runs([experiment_id])
    assert len(runs) == 1
    row = runs.iloc[0]
    assert row["tags.mlflow.runName"] == "s9_test@smoke"
    assert row["tags.outcome"] == "pass" and row["params.repetitions"] == "100"
    assert row["metrics.p50_us/1x2x33x64_causal"] == 12.5
    assert row["metrics.speedup_vs_parent/.odd."] == 1.5
    assert "metrics.not_finite" not in runs.columns  # NaN is not logged as a number
    assert row["status"] == "FINISHED"
    artifacts = [a.path for a in tracking.client().list_artifacts(run_id, "results")]
    assert artifacts == ["results/table.csv"]
    store_dir = tmp_store.removeprefix("sqlite:///").rsplit("/", 1)[0]
    assert (Path(store_dir) / "artifacts" / run_id / "artifacts" / "results" / "table.csv").is_file()


def test_default_store_is_sqlite_under_mlruns(monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert tracking.tracking_uri().startswith("sqlite:///") and tracking.tracking_uri().endswith("mlruns/mlflow.db")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5000")
    assert tracking.tracking_uri() == "http://127.0.0.1:5000" and tracking.artifact_location() is None
