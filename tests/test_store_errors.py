"""Store errors: an unreachable tracking server, a damaged SQLite file, backups before migrations
and on demand. Real SQLite MLflow stores, the real `stagelab` command in a subprocess."""

import random
import sqlite3
import time
from pathlib import Path

from mlflow.tracking import MlflowClient

from stagelab.record import tracking
from stagelab.record.sqlite_store import schema_revision

# The damage: 4 KB of garbage written into the middle of mlflow.db.
GARBAGE_BYTES = 4096
# Enough logged runs that the middle of the file is table and index pages, not free space.
RUNS, METRICS_PER_RUN = 30, 200


def store_path(tmp_store: str) -> Path:
    return Path(tmp_store.removeprefix("sqlite:///"))


def fill_store() -> None:
    experiment_id = tracking.init_store("stagelab-sdpa")
    for _ in range(RUNS):
        run_id = tracking.create_run(experiment_id, "s0_baseline", "smoke")
        tracking.log_metrics(run_id, {f"p50_us/shape{i}": float(i) for i in range(METRICS_PER_RUN)})
        tracking.end_run(run_id)


def damage(db: Path) -> None:
    size = db.stat().st_size
    with open(db, "r+b") as handle:
        handle.seek(size // 2)
        handle.write(random.Random(0).randbytes(GARBAGE_BYTES))


def test_unreachable_server_fails_fast_with_one_line(stagelab_cli, tmp_path):
    """Today: four minutes of MLflow retries, then a traceback. Now: exit 2 within 15 s, before any build."""
    builds = tmp_path / "build"
    started = time.monotonic()
    proc = stagelab_cli("run", "--stages", "s0_baseline", "--params", "params/smoke.yaml", timeout=15,
                        MLFLOW_TRACKING_URI="http://127.0.0.1:9", STAGELAB_BUILD_DIR=str(builds))
    assert time.monotonic() - started < 15
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert "http://127.0.0.1:9" in lines[0] and "check that" in lines[0]
    assert not builds.exists()


def test_damaged_sqlite_store_is_named_before_any_work(tmp_store, stagelab_cli, tmp_path):
    """Today: a raw SQLAlchemy 'database disk image is malformed' traceback. Now: one line naming
    the file and how to recover, exit 2, no build started."""
    fill_store()
    db = store_path(tmp_store)
    damage(db)
    builds = tmp_path / "build"
    proc = stagelab_cli("run", "--stages", "s0_baseline", "--params", "params/smoke.yaml",
                        STAGELAB_BUILD_DIR=str(builds))
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert str(db) in lines[0] and "damaged" in lines[0] and ".recover" in lines[0]
    assert not builds.exists()


def test_backup_command_copies_the_store_and_is_the_way_back(tmp_store, stagelab_cli):
    """`stagelab backup` writes a consistent copy (online backup API) holding every run, even while
    another connection holds an unfinished write; a later damaged store points at that copy."""
    fill_store()
    db = store_path(tmp_store)
    writer = sqlite3.connect(db)
    writer.execute("BEGIN IMMEDIATE")  # an open write transaction: the copy must not wait for it or include it
    writer.execute("UPDATE runs SET name = 'uncommitted'")
    try:
        proc = stagelab_cli("backup")
    finally:
        writer.rollback()
        writer.close()
    assert proc.returncode == 0, proc.stderr[-2000:]
    copy = Path(proc.stdout.strip().rsplit(" ", 1)[1])
    assert copy.parent == db.parent / "backups" and copy.is_file()
    runs = MlflowClient(tracking_uri=f"sqlite:///{copy}").search_runs(
        [tracking.client().get_experiment_by_name("stagelab-sdpa").experiment_id])
    assert len(runs) == RUNS and {r.info.run_name for r in runs} == {"s0_baseline@smoke"}
    assert len(runs[0].data.metrics) == METRICS_PER_RUN

    damage(db)
    proc = stagelab_cli("runs")
    assert proc.returncode == 2 and f"cp {copy} {db}" in proc.stderr


def old_schema_store(db: Path, revisions_back: int) -> str:
    """A store at an older MLflow schema revision (as an older MLflow left it), with an experiment in it."""
    from alembic import command
    from alembic.script import ScriptDirectory
    from mlflow.store.db.utils import _get_alembic_config, create_sqlalchemy_engine
    from mlflow.store.tracking.dbmodels.initial_models import Base as InitialBase

    url = f"sqlite:///{db}"
    engine = create_sqlalchemy_engine(url)
    InitialBase.metadata.create_all(engine)
    config = _get_alembic_config(url)
    old = list(ScriptDirectory.from_config(config).walk_revisions())[revisions_back].revision
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, old)
    engine.dispose()
    with sqlite3.connect(db) as conn:
        conn.execute("INSERT INTO experiments (name, artifact_location, lifecycle_stage, creation_time, "
                     "last_update_time) VALUES ('logged-before', '', 'active', 0, 0)")
    return old


def test_schema_migration_backs_up_the_store_first(tmp_store):
    """Opening a store written by an older MLflow migrates it; the file as it was is copied first."""
    db = store_path(tmp_store)
    old = old_schema_store(db, revisions_back=5)
    tracking.init_store("stagelab-sdpa")

    backups = list((db.parent / "backups").glob("mlflow-*.db"))
    assert len(backups) == 1
    assert schema_revision(backups[0]) == old
    with sqlite3.connect(backups[0]) as conn:
        assert conn.execute("SELECT name FROM experiments").fetchall() == [("logged-before",)]
    assert schema_revision(db) != old
    assert tracking.client().get_experiment_by_name("logged-before") is not None
