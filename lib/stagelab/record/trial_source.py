"""The imported-trial source (docs/results/sdpa/history/trials.yaml): its schema, its checks and
the order its entries keep (trial_import writes them as runs)."""

from __future__ import annotations

import hashlib
import json
import re
from datetime import datetime, timezone
from pathlib import Path


from ..core.errors import ConfigError
from ..core.yaml_file import read_yaml

REQUIRED_KEYS = ("stage", "date", "name", "hypothesis", "verdict")
ENTRY_KEYS = {*REQUIRED_KEYS, "commit", "session", "gpu", "defines", "conclusion", "numbers", "checks", "source",
              "imported_as"}
# `imported_as`: the digest (entry_hash) an entry was first imported under, kept when it is edited in
# notation alone (numbers and commits written so none reads as scientific notation, issue 45): the
# importer counts it as there. Left out, an edited entry is a corrected one, imported as new.
IMPORT_HASH_RE = re.compile(r"[0-9a-f]{20}")
# A number row's values (docs/results/sdpa/history/README.md): the trial's and the default's, and what
# quick_check printed beside them (clocks, board power; the contenders' too).
NUMBER_VALUES = ("trial", "default", "clock_mhz", "default_clock_mhz", "power_w", "default_power_w",
                 "contender_clock_mhz", "contender_power_w")
NUMBER_KEYS = {"problem", "metric", "unit", "quantity", "contenders", *NUMBER_VALUES}
# Rows of a trial the journal line shows; every row is a metric of the run and in its entry.json.
JOURNAL_ROWS = 8
# MLflow keys are at most 250 characters: a long `quantity` is cut in the key (whole in entry.json),
# and a problem and quantity still too long together become their first characters and a hash.
QUANTITY_IN_KEY = 120
MLFLOW_MAX_KEY = 250
KEY_HASH_CHARS = 8
# trial_judge.VERDICTS and the log's own `inconclusive` (a measurement that could not decide).
IMPORTED_VERDICTS = ("faster", "valid_negative", "incorrect", "build_failed", "resource_fail", "inconclusive")
METRICS = ("tflops", "us_per_launch", "us", "ratio", "pct", "clocks", "registers", "spill_bytes", "other")
IMPORTED_PARAMS_FILE = "imported"


def entry_hash(entry: dict) -> str:
    return hashlib.sha256(json.dumps(entry, sort_keys=True, default=str).encode()).hexdigest()[:20]


def _check_entry(where: str, entry) -> dict:
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: expected a mapping")
    missing = [k for k in REQUIRED_KEYS if entry.get(k) in (None, "")]
    unknown = sorted(set(entry) - ENTRY_KEYS)
    if missing or unknown:
        raise ConfigError(f"{where}: " + "; ".join(filter(None, [missing and f"missing {missing}",
                                                                  unknown and f"unknown key(s) {unknown}"])))
    if entry["verdict"] not in IMPORTED_VERDICTS:
        raise ConfigError(f"{where}: verdict {entry['verdict']!r} is not one of {list(IMPORTED_VERDICTS)}")
    if "imported_as" in entry and not IMPORT_HASH_RE.fullmatch(str(entry["imported_as"])):
        raise ConfigError(f"{where}: imported_as {entry['imported_as']!r} is not an import hash (20 hex digits)")
    if not isinstance(entry.get("defines") or {}, dict):
        raise ConfigError(f"{where}: defines: expected a mapping NAME: value")
    for index, number in enumerate(entry.get("numbers") or []):
        if not isinstance(number, dict) or not {"problem", "metric"} <= set(number) or set(number) - NUMBER_KEYS:
            raise ConfigError(f"{where}: numbers[{index}]: expected problem, metric, trial, default "
                              f"(optional: {sorted(NUMBER_KEYS - {'problem', 'metric', 'trial', 'default'})}), "
                              f"got {number!r}")
        if not isinstance(number.get("contenders") or {}, dict):
            raise ConfigError(f"{where}: numbers[{index}]: contenders: expected a mapping name: number")
        if number["metric"] not in METRICS:
            raise ConfigError(f"{where}: numbers[{index}]: metric {number['metric']!r} is not one of {list(METRICS)}")
    return entry


def start_ms(where: str, date, position: int) -> int:
    """The entry's date (UTC when it names no zone) in ms, plus its position in the file in ms: entries
    of one day keep the file's (chronological) order, far below the date's own precision."""
    try:
        moment = date if isinstance(date, datetime) else datetime.fromisoformat(str(date))
    except ValueError as exc:
        raise ConfigError(f"{where}: date {date!r} is not an ISO date (2026-11-24, 2026-11-24T13:05)") from exc
    if not isinstance(moment, datetime):  # a YAML date without a time
        moment = datetime(moment.year, moment.month, moment.day)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return int(moment.timestamp() * 1000) + position


def load_entries(path: Path) -> list[dict]:
    raw = read_yaml(path, f"no trials file {path}")
    if not isinstance(raw, list):
        raise ConfigError(f"{path}: expected a list of trial entries")
    return [_check_entry(f"{path}: entry {i} ({(e or {}).get('name', '?') if isinstance(e, dict) else '?'})", e)
            for i, e in enumerate(raw)]
