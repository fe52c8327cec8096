"""MLflow: the store, the experiment, and one run per (stage, parameter file).

Default store: sqlite:///<repo>/mlruns/mlflow.db with artifacts under
<repo>/mlruns/artifacts; MLFLOW_TRACKING_URI in the environment wins (a team's
tracking server backed by PostgreSQL, say). The database and the experiment
are created once, under a file lock, before any run starts: concurrent first
use of a fresh SQLite store can corrupt it, and a concurrent set_experiment
can drop a run into the Default experiment.
"""

from __future__ import annotations

import fcntl
import math
import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from ..core.metrics import TAG_PARAMS_FILE, TAG_STAGE, safe_key
from ..core.paths import mlruns_dir


EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
EXPERIMENT_KIND = "custom_model_development"


def tracking_uri() -> str:
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{mlruns_dir() / 'mlflow.db'}"


def artifact_location() -> str | None:
    """Artifacts in an `artifacts/` folder beside a SQLite store (the default one included);
    a tracking server decides its own. Without this MLflow puts them under ./mlruns of
    whatever folder the first run happened to start in."""
    uri = tracking_uri()
    if uri.startswith("sqlite:///"):
        return (Path(uri.removeprefix("sqlite:///")).parent / "artifacts").as_uri()
    return None


@contextmanager
def _store_lock():
    mlruns_dir().mkdir(parents=True, exist_ok=True)
    with open(mlruns_dir() / ".init.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


_checked: set[str] = set()


def check_store() -> None:
    """Once per process and store, before MLflow touches it: a tracking server must answer; a
    SQLite file must be intact, and is backed up before its schema is migrated (under the lock,
    so concurrent runners migrate once)."""
    from .server_probe import check_reachable
    from .sqlite_store import check_intact, migrate_with_backup, sqlite_path

    uri = tracking_uri()
    if uri in _checked:
        return
    db = sqlite_path(uri)
    if uri.startswith(("http://", "https://")):
        check_reachable(uri)
    elif db is not None and db.is_file():
        check_intact(db)
        with _store_lock():
            saved = migrate_with_backup(db)
        if saved is not None:
            print(f"stagelab: backed up {db} to {saved} before migrating its schema", file=sys.stderr)
    _checked.add(uri)


def client():
    from mlflow.tracking import MlflowClient

    check_store()
    return MlflowClient(tracking_uri=tracking_uri())


def _open_experiment(c, name: str):
    """The experiment, created when missing. Several machines can share one tracking server, which
    the local lock does not cover: a creation that lost the race reads the winner's experiment."""
    from mlflow.exceptions import MlflowException

    found = c.get_experiment_by_name(name)  # creates the schema on first use
    if found is not None:
        return found
    try:
        c.create_experiment(name, artifact_location=artifact_location())
    except MlflowException as exc:
        if exc.error_code != "RESOURCE_ALREADY_EXISTS":
            raise
    return c.get_experiment_by_name(name)


def init_store(experiment: str) -> str:
    """Create the database (schema migrations run on first use) and the experiment; returns its id."""
    import mlflow

    from . import runs_view

    check_store()  # before the lock: it takes the lock itself to migrate
    mlflow.set_tracking_uri(tracking_uri())
    with _store_lock():
        c = client()
        found = _open_experiment(c, experiment)
        relocate_local_store()  # after the schema exists; only artifact URIs change
        # MLflow 3 opens an untagged experiment on its GenAI overview; these are training-style runs.
        if found.tags.get(EXPERIMENT_KIND_TAG) != EXPERIMENT_KIND:
            c.set_experiment_tag(found.experiment_id, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND)
        runs_view.install(c, found)
        return found.experiment_id


def relocate_local_store() -> None:
    """A SQLite store copied from elsewhere: point its artifact URIs at the artifacts/ beside it."""
    from .sqlite_store import relocate, sqlite_path

    db = sqlite_path(tracking_uri())
    if db is not None and db.is_file():
        relocate(db)


def run_name(stage_id: str, params_name: str) -> str:
    return f"{stage_id}@{params_name}"


def create_run(experiment_id: str, stage_id: str, params_name: str, tags: dict[str, str] | None = None,
               name: str | None = None, timeout_s: int | None = None) -> str:
    """A run in RUNNING state that a notebook (or the batch runner, or a tune) fills in; returns its id.
    Named `<stage>@<params>` unless `name` says otherwise. This process is recorded as its owner
    (see `owner`), with the time-out after which a silent owner on another host counts as gone."""
    from .owner import owner_tags

    run = client().create_run(experiment_id, run_name=name or run_name(stage_id, params_name),
                              tags={TAG_STAGE: stage_id, TAG_PARAMS_FILE: params_name,
                                    **owner_tags(timeout_s), **(tags or {})})
    return run.info.run_id


def log_metrics(run_id: str, metrics: dict[str, float], timestamp_ms: int | None = None) -> None:
    from mlflow.entities import Metric

    now = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    batch = [Metric(safe_key(k), float(v), now, 0) for k, v in metrics.items()
             if v is not None and math.isfinite(float(v))]
    c = client()
    for start in range(0, len(batch), 900):  # MLflow caps one batch at 1000 metrics
        c.log_batch(run_id, metrics=batch[start:start + 900])


def log_params(run_id: str, params: dict[str, object]) -> None:
    from mlflow.entities import Param

    c = client()
    items = [Param(k, str(v)[:6000]) for k, v in params.items()]
    for start in range(0, len(items), 90):
        c.log_batch(run_id, params=items[start:start + 90])


TAG_VALUE_CHARS = 5000  # MLflow's limit on a tag's value (8000 in 3.x, 5000 in older stores' schema)


def set_tags(run_id: str, tags: dict[str, object]) -> None:
    from mlflow.entities import RunTag

    client().log_batch(run_id, tags=[RunTag(k, str(v)[:TAG_VALUE_CHARS]) for k, v in tags.items()])


def log_artifact(run_id: str, path: Path | str, artifact_path: str | None = None) -> None:
    client().log_artifact(run_id, str(path), artifact_path)


def log_artifacts(run_id: str, folder: Path | str, artifact_path: str | None = None) -> None:
    client().log_artifacts(run_id, str(folder), artifact_path)


def end_run(run_id: str, status: str = "FINISHED") -> None:
    client().set_terminated(run_id, status=status)


def get_tag(run_id: str, key: str) -> str | None:
    return client().get_run(run_id).data.tags.get(key)
