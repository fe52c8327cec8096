"""The SQLite store's file: is it intact, its backups, and schema migrations that back up first.

A damaged file (a crash mid-write, a bad disk, a bad copy) is found by SQLite's own
`PRAGMA quick_check` before MLflow or any build touches it, and reported with the way
back: the newest backup. Backups use SQLite's online backup API, which copies a
consistent snapshot even while another process writes, and are taken before MLflow
migrates the schema (migrations on SQLite are not transactional). A store copied from another
machine has its artifact URIs re-rooted at the `artifacts/` folder beside it (`relocate`).
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import unquote, urlparse

from ..core.errors import StoreError

ARTIFACTS = "artifacts"
BACKUPS = "backups"
# Concurrent runners commit to the store in milliseconds each; a reader waits this long for their
# locks before giving up, so a busy store is never mistaken for a damaged one.
BUSY_TIMEOUT_S = 60


def backups_dir(db: Path) -> Path:
    return db.parent / BACKUPS


def latest_backup(db: Path) -> Path | None:
    found = sorted(backups_dir(db).glob(f"{db.stem}-*.db"))  # the stamp sorts by time
    return found[-1] if found else None


def _recovery_step(db: Path) -> str:
    backup = latest_backup(db)
    if backup is not None:
        return f"restore the newest backup (cp {backup} {db})"
    return (f"no backup in {backups_dir(db)}; salvage what SQLite can read "
            f"(sqlite3 {db} .recover | sqlite3 {db.with_suffix('.recovered.db')}) or move {db} aside")


def _read_only(db: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S)


def check_intact(db: Path) -> None:
    """Raise StoreError naming the file and the recovery step when SQLite finds it damaged."""
    try:
        with closing(_read_only(db)) as conn:
            problems = [row[0] for row in conn.execute("PRAGMA quick_check").fetchall()]
    except sqlite3.OperationalError as exc:  # locked past the time-out, unreadable: not known to be damaged
        raise StoreError(f"cannot read the MLflow store {db} ({exc}): check its permissions and "
                         "whether another process holds it locked") from None
    except sqlite3.DatabaseError as exc:  # "file is not a database", "database disk image is malformed"
        problems = [str(exc)]
    if problems != ["ok"]:
        # quick_check's report is multi-line ("*** in database main ***", "Page 445: ..."): its first finding
        findings = [line for problem in problems for line in problem.splitlines()
                    if not line.startswith("***")] or problems
        more = f" and {len(findings) - 1} more finding(s)" if len(findings) > 1 else ""
        raise StoreError(f"the MLflow store {db} is damaged ({findings[0]}{more}); stagelab left it untouched: "
                         f"{_recovery_step(db)}")


def backup(db: Path, dest: Path | None = None) -> Path:
    """A consistent copy of `db` by SQLite's online backup API; returns where it went."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S-%f")
    dest = dest or backups_dir(db) / f"{db.stem}-{stamp}.db"
    dest.parent.mkdir(parents=True, exist_ok=True)
    with closing(_read_only(db)) as source, closing(sqlite3.connect(dest)) as target:
        source.backup(target)
    return dest


def schema_revision(db: Path) -> str | None:
    """The store's MLflow schema revision; None for a file MLflow has not initialized yet."""
    with closing(_read_only(db)) as conn:
        if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'alembic_version'").fetchone() is None:
            return None
        row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    return row[0] if row else None


def migrate_with_backup(db: Path) -> Path | None:
    """Bring an initialized store to this MLflow's schema, backing it up first; returns the backup
    (None when nothing needed migrating). A fresh, empty file is left to MLflow."""
    from mlflow.store.db.utils import _get_latest_schema_revision, _upgrade_db, create_sqlalchemy_engine

    current = schema_revision(db)
    if current is None or current == _get_latest_schema_revision():
        return None
    saved = backup(db)
    engine = create_sqlalchemy_engine(f"sqlite:///{db}")
    try:
        _upgrade_db(engine)
    finally:
        engine.dispose()
    return saved


def _local_artifacts(db: Path) -> str:
    return (db.parent / ARTIFACTS).resolve().as_uri()


def _moved(uri: str | None, target: str) -> str | None:
    """`uri` re-rooted at `target` when it is a file URI under another artifacts/ folder."""
    if not uri or not uri.startswith("file://") or uri.startswith(target + "/") or uri == target:
        return None
    marker = f"/{ARTIFACTS}/"
    path = unquote(urlparse(uri).path)
    if marker not in path + "/":
        return None
    tail = (path + "/").split(marker, 1)[1].rstrip("/")
    return f"{target}/{tail}" if tail else target


def relocate(db: Path) -> int:
    """Rewrite artifact locations of experiments and runs to the artifacts/ beside `db`; returns how many moved."""
    target = _local_artifacts(db)
    moved = 0
    with sqlite3.connect(db) as conn:
        for table, key, column in (("experiments", "experiment_id", "artifact_location"),
                                   ("runs", "run_uuid", "artifact_uri")):
            for row_key, uri in conn.execute(f"SELECT {key}, {column} FROM {table}").fetchall():
                new = _moved(uri, target)
                if new is not None:
                    conn.execute(f"UPDATE {table} SET {column} = ? WHERE {key} = ?", (new, row_key))
                    moved += 1
    return moved


def sqlite_path(uri: str) -> Path | None:
    return Path(uri.removeprefix("sqlite:///")) if uri.startswith("sqlite:///") else None
