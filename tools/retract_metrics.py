#!/usr/bin/env python3
"""Retract metrics that a known bug recorded wrong, keeping the run and saying why.

    tools/retract_metrics.py --commit 20cc0d5 --metric 'ncu_duration_us/%' --metric 'ncu_tflops/%' \
        --reason "ncu's durations read 1e9 too long (units bug, fixed in 4727dd1)" [--store mlruns/mlflow.db]

Deletes the matching metric rows (SQL LIKE patterns) of every run recorded at that commit and
tags each such run `stagelab.retracted` with the patterns and the reason, so the record shows what
was taken out and why. Only a SQLite store; back it up first (`stagelab backup`). MLflow has no
API to delete a metric, hence SQL.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from pathlib import Path

RETRACTED_TAG = "stagelab.retracted"
COMMIT_TAG = "git_commit"


def runs_at_commit(conn: sqlite3.Connection, commit: str) -> list[str]:
    rows = conn.execute("SELECT run_uuid FROM tags WHERE key = ? AND value LIKE ?", (COMMIT_TAG, f"{commit}%"))
    return [run for (run,) in rows]


def retract(db: Path, commit: str, patterns: list[str], reason: str) -> dict[str, int]:
    """Deleted metric rows per run (runs with nothing to retract are left untouched)."""
    deleted = {}
    with sqlite3.connect(db) as conn:
        for run in runs_at_commit(conn, commit):
            count = 0
            for pattern in patterns:
                for table in ("metrics", "latest_metrics"):
                    cursor = conn.execute(f"DELETE FROM {table} WHERE run_uuid = ? AND key LIKE ?", (run, pattern))
                    count += cursor.rowcount if table == "metrics" else 0
            if count:
                note = f"{', '.join(patterns)}: {reason}"
                conn.execute("INSERT OR REPLACE INTO tags (key, value, run_uuid) VALUES (?, ?, ?)",
                             (RETRACTED_TAG, note, run))
                deleted[run] = count
    return deleted


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, default=Path("mlruns/mlflow.db"))
    parser.add_argument("--commit", required=True, help="runs recorded at this commit (a prefix)")
    parser.add_argument("--metric", action="append", required=True, help="SQL LIKE pattern of metric keys")
    parser.add_argument("--reason", required=True)
    args = parser.parse_args(argv)
    if not args.store.is_file():
        print(f"retract_metrics: no SQLite store at {args.store}", file=sys.stderr)
        return 2
    deleted = retract(args.store, args.commit, args.metric, args.reason)
    for run, count in deleted.items():
        print(f"{run}: {count} metric value(s) retracted")
    print(f"{len(deleted)} run(s) at {args.commit} changed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
