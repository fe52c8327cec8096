"""A store that travels: a SQLite MLflow store and its artifacts/ folder, copied anywhere.

MLflow writes absolute artifact URIs (file:///<where the run happened>/mlruns/artifacts/...)
into the database. A store brought back from a GPU machine, or copied to a laptop, would
open with every artifact missing. Two tools:

- `relocate(db)` (sqlite_store, which the tracking store opens with): point every artifact URI
  that lives under some `.../artifacts/` folder at the `artifacts/` folder beside this database;
- `import_store(source_db)`: merge another store's runs into the current one (`stagelab
  import`), each run once: a re-import finds the runs it already brought by their source id.
"""

from __future__ import annotations

from pathlib import Path

from . import tracking
from ..core import metrics
from ..core.errors import ConfigError
from .run_summary import SOURCE_RUN_TAG, TAG_ARTIFACTS_AT, artifacts_elsewhere, write_summary
from .sqlite_store import relocate



def _already_imported(experiment_id: str) -> set[str]:
    found = tracking.client().search_runs([experiment_id], max_results=50000)
    return {r.data.tags[SOURCE_RUN_TAG] for r in found if SOURCE_RUN_TAG in r.data.tags}


def run_here_or_imported(run_id: str):
    """The run of this id in this store, or the copy `stagelab import` made of the run that had it
    in another store (a GPU machine prints that store's ids: `try`, `tune`); None where neither is."""
    from mlflow.exceptions import MlflowException

    client = tracking.client()
    try:
        return client.get_run(run_id)
    except MlflowException:
        experiment_ids = [e.experiment_id for e in client.search_experiments()]
        copies = client.search_runs(experiment_ids, f"tags.`{SOURCE_RUN_TAG}` = '{run_id}'",
                                    max_results=1) if experiment_ids else []
        return copies[0] if copies else None


def _copy_run(source, run, experiment_id: str, origin: str) -> None:
    dest = tracking.client()
    tags = {**run.data.tags, SOURCE_RUN_TAG: run.info.run_id}
    has_artifacts = bool(source.list_artifacts(run.info.run_id))
    if not has_artifacts and TAG_ARTIFACTS_AT not in tags:
        tags[TAG_ARTIFACTS_AT] = artifacts_elsewhere(tags, origin)
    created = dest.create_run(experiment_id, start_time=run.info.start_time, run_name=run.info.run_name, tags=tags)
    run_id = created.info.run_id
    tracking.log_params(run_id, run.data.params)
    tracking.log_metrics(run_id, run.data.metrics, timestamp_ms=run.info.start_time or 0)
    if has_artifacts:
        tracking.log_artifacts(run_id, source.download_artifacts(run.info.run_id, ""))
    dest.set_terminated(run_id, status=run.info.status, end_time=run.info.end_time)
    write_summary(run_id)  # a run from an older store has none; the artifacts' place goes in it


def import_store(source_db: Path, progress=print, origin: str | None = None) -> int:
    """Copy every run of `source_db` (a mlflow.db with its artifacts/ beside it) that this store
    does not hold yet; returns how many were copied. `origin`: the store's name in a run's
    description where it brought no artifacts (default: the database's path)."""
    from mlflow.tracking import MlflowClient

    source_db = Path(source_db).resolve()
    if not source_db.is_file():
        raise ConfigError(f"no MLflow database at {source_db} (give the mlflow.db of the store to import)")
    relocate(source_db)  # its artifact URIs name the machine it came from
    source = MlflowClient(tracking_uri=f"sqlite:///{source_db}")
    copied = 0
    for experiment in source.search_experiments():
        runs = source.search_runs([experiment.experiment_id], max_results=50000)
        if not runs:
            continue
        experiment_id = tracking.init_store(experiment.name)
        done = _already_imported(experiment_id)
        for run in runs:
            if run.info.run_id in done or run.data.tags.get(SOURCE_RUN_TAG) in done:
                continue
            _copy_run(source, run, experiment_id, origin or str(source_db))
            copied += 1
        progress(f"{experiment.name}: {len(runs)} runs, {copied} copied so far")
    return copied


# A session's record kept in the repository (docs/results/<family>/records/): the SQLite store
# alone, compressed; metrics, parameters and tags, which the results page is written from. Its
# artifacts (notebooks, .ncu-rep files) stay with the store it was taken from. xz (`xz -9e`) packs a
# store into half of what gzip does: the records travel with the tree to every GPU call, whose copy
# is capped at 64 MiB; the first records are gzipped.
XZ_RECORD, GZIP_RECORD = ".db.xz", ".db.gz"
RECORD_SUFFIXES = (XZ_RECORD, GZIP_RECORD)


def is_record(path: Path) -> bool:
    return Path(path).name.endswith(RECORD_SUFFIXES)


def import_record(record: Path, progress=print) -> int:
    """import_store for a compressed mlflow.db (`stagelab backup --to F && xz -9e F`), unpacked into a
    scratch folder, since importing rewrites the source's artifact locations."""
    import gzip
    import lzma
    import shutil
    import tempfile

    record = Path(record)
    if not record.is_file() or not is_record(record):
        raise ConfigError(f"no record at {record} (a compressed mlflow.db, `*{XZ_RECORD}` or `*{GZIP_RECORD}`)")
    opener, packing = (lzma.open, "xz") if record.name.endswith(XZ_RECORD) else (gzip.open, "gzip")
    with tempfile.TemporaryDirectory() as scratch:
        db = Path(scratch) / "mlflow.db"
        try:
            with opener(record) as packed, open(db, "wb") as plain:
                shutil.copyfileobj(packed, plain)
        except (OSError, EOFError, lzma.LZMAError) as err:
            raise ConfigError(f"{record} is not an {packing}-compressed MLflow database: {err}") from err
        return import_store(db, progress, origin=f"the record {record.name}")


def pack_record(db: Path, dest: Path) -> int:
    """A record of the SQLite store `db` at `dest` (*.db.xz): a consistent copy (SQLite's backup API),
    VACUUMed (a store keeps the pages of what it deleted, and xz packs them too: a fifth of a session's
    record) and packed by xz at its highest preset (`xz -9e`). Returns the record's size in bytes."""
    import lzma
    import shutil
    import sqlite3
    import tempfile
    from contextlib import closing

    from .sqlite_store import backup

    dest = Path(dest)
    if not dest.name.endswith(XZ_RECORD):
        raise ConfigError(f"a record is written as `*{XZ_RECORD}`, not {dest.name}")
    with tempfile.TemporaryDirectory() as scratch:
        copy = backup(Path(db), Path(scratch) / "mlflow.db")
        with closing(sqlite3.connect(copy)) as conn:
            conn.execute("VACUUM")
        dest.parent.mkdir(parents=True, exist_ok=True)
        with open(copy, "rb") as plain, lzma.open(dest, "wb", preset=9 | lzma.PRESET_EXTREME) as packed:
            shutil.copyfileobj(plain, packed)
    return dest.stat().st_size
