#!/usr/bin/env python3
"""Repack committed records (docs/results/<family>/records/*.db.xz) as `stagelab backup --record`
packs a new one (record.portable.pack_record: VACUUM, then xz at its highest preset), keeping each
new file only where it is smaller and holds the same runs, metrics, parameters and tags. The tree
travels to every GPU call under a 64 MiB cap (tools/carry_size.py); the records are most of it.

    python3 tools/repack_records.py docs/results/sdpa/records/*.db.xz
"""

from __future__ import annotations

import argparse
import lzma
import shutil
import sqlite3
import sys
import tempfile
from contextlib import closing
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))

from stagelab.record.portable import XZ_RECORD, pack_record  # noqa: E402

COUNTED_TABLES = ("runs", "metrics", "latest_metrics", "params", "tags", "experiments", "experiment_tags")


def contents(db: Path) -> dict[str, int]:
    """Rows per table that carries what a record holds."""
    with closing(sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)) as conn:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        return {t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in COUNTED_TABLES if t in tables}


def repack(record: Path) -> tuple[int, int]:
    """(old size, new size) of the record; the file is replaced only where the new one is smaller."""
    with tempfile.TemporaryDirectory() as scratch:
        db = Path(scratch) / "mlflow.db"
        with lzma.open(record) as packed, open(db, "wb") as plain:
            shutil.copyfileobj(packed, plain)
        before = contents(db)
        candidate = Path(scratch) / record.name
        pack_record(db, candidate)
        unpacked = Path(scratch) / "check.db"
        with lzma.open(candidate) as packed, open(unpacked, "wb") as plain:
            shutil.copyfileobj(packed, plain)
        if contents(unpacked) != before:
            raise SystemExit(f"{record}: the repacked store does not hold the same rows; left as it was")
        old, new = record.stat().st_size, candidate.stat().st_size
        if new < old:
            shutil.copyfile(candidate, record)
    return old, new


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", nargs="+", type=Path, help=f"records (*{XZ_RECORD})")
    args = parser.parse_args(argv)
    total_old = total_new = 0
    for record in args.records:
        old, new = repack(record)
        kept = min(old, new)
        total_old, total_new = total_old + old, total_new + kept
        print(f"{record.name}: {old} -> {kept} bytes{'' if new < old else ' (kept as it was)'}", flush=True)
    print(f"{len(args.records)} record(s): {total_old} -> {total_new} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
