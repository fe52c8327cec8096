"""`stagelab try import FILE`: measured history (docs/results/sdpa/history/trials.yaml) as trial runs.

One trial run per entry, in its stage's experiment, tagged like any trial (trial_record.trial_tags)
and `imported_from` the file; its start time is the entry's date and its commit the entry's, its
numbers metrics (`imported/<metric>/<problem>/<trial|default|clock_mhz>`), and the patch of each of
its defines that has one (`<file's folder>/patches/<KNOB>.diff`) an artifact, so `stagelab try
--patch` can replay it. Importing twice adds nothing: each run carries the content hash of its
entry (TAG_IMPORT_HASH), and an entry whose hash is in the store is skipped (or whose `imported_as`: an
entry since edited in notation alone, trial_source).

Schema (/work/notes/trials_schema.md): stage, date, commit, session, gpu, name, defines, hypothesis,
verdict, conclusion, numbers [{problem, metric, trial, default, clock_mhz, unit}], checks, source,
imported_as.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy


from ..core import metrics

from . import tracking
from .run_summary import write_summary
from ..core.errors import ConfigError
from ..core.paths import repo_root

from .trial_source import (NUMBER_VALUES, JOURNAL_ROWS, QUANTITY_IN_KEY, MLFLOW_MAX_KEY, KEY_HASH_CHARS, IMPORTED_PARAMS_FILE, entry_hash, start_ms, load_entries)


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _key(parts: list[str], field: str) -> str:
    key = metrics.IMPORTED_NUMBER.key(*parts, field)
    if len(key) <= MLFLOW_MAX_KEY:
        return key
    middle = "/".join(parts[1:])
    digest = hashlib.sha256(middle.encode()).hexdigest()[:KEY_HASH_CHARS]
    room = MLFLOW_MAX_KEY - len(metrics.IMPORTED_NUMBER.key(parts[0], "", field)) - KEY_HASH_CHARS - 1
    return metrics.IMPORTED_NUMBER.key(parts[0], f"{middle[:room]}~{digest}", field)


def number_metrics(entry: dict) -> dict[str, float]:
    """imported/<metric>/<problem>[/<quantity>]/<value>, for each value a row gives (a contender's as
    contender.<name>); a key a second row of the same name would repeat gets _2, _3, ..."""
    out: dict[str, float] = {}
    for n in entry.get("numbers") or []:
        # a `/` inside a label would make MLflow read the key as a longer path: one segment per label
        labels = [str(n["problem"])] + ([str(n["quantity"])[:QUANTITY_IN_KEY]] if n.get("quantity") else [])
        parts = [n["metric"], *(label.replace("/", ".").strip() for label in labels)]
        values = {field: n.get(field) for field in NUMBER_VALUES}
        values |= {f"contender.{name}": value for name, value in (n.get("contenders") or {}).items()}
        for field, value in values.items():
            if not _number(value):
                continue
            key, repeat = _key(parts, field), 2
            while key in out:
                key, repeat = _key(parts, f"{field}_{repeat}"), repeat + 1
            out[key] = float(value)
    return out


def _verbatim(value) -> str:
    """A number as the log gave it, every digit kept, never in scientific notation (1.066e-05 s
    reads 0.00001066)."""
    return numpy.format_float_positional(value, trim="0") if isinstance(value, float) else str(value)


def _row_text(n: dict) -> str:
    unit = f" {n['unit']}" if n.get("unit") else ""
    quantity = f" ({n['quantity']})" if n.get("quantity") else ""
    base = f" vs {_verbatim(n['default'])}" if n.get("default") is not None else ""
    clock = f" @{n['clock_mhz']} MHz" if n.get("clock_mhz") else ""
    clock += f"/{n['default_clock_mhz']} MHz" if n.get("default_clock_mhz") else ""
    others = ", ".join(f"{k} {_verbatim(v)}" for k, v in (n.get("contenders") or {}).items())
    return (f"{n['problem']} {n['metric']}{unit}{quantity} {_verbatim(n.get('trial'))}{base}{clock}"
            + (f" [{others}]" if others else ""))


def key_numbers(entry: dict) -> str:
    """The log's numbers as one line, `problem metric trial vs default @clock [contenders]` for the
    first JOURNAL_ROWS rows, then the checks."""
    rows = entry.get("numbers") or []
    parts = [_row_text(n) for n in rows[:JOURNAL_ROWS]]
    if len(rows) > JOURNAL_ROWS:
        parts.append(f"+{len(rows) - JOURNAL_ROWS} more rows in the run's metrics")
    if entry.get("checks"):
        parts.append(str(entry["checks"]))
    return "; ".join(parts)


def _relative(path: Path) -> str:
    resolved = path.resolve()
    root = repo_root().resolve()
    return str(resolved.relative_to(root)) if resolved.is_relative_to(root) else str(path)


def _tags(entry: dict, source: str, digest: str) -> dict[str, str]:
    from .trial_record import trial_tags

    defines = {str(k): str(v) for k, v in (entry.get("defines") or {}).items()}
    commit = str(entry.get("commit") or "unknown")
    tags = trial_tags(entry["stage"], str(entry["name"]), str(entry["hypothesis"]).strip(), defines)
    return tags | {
        metrics.TAG_STAGE: entry["stage"], metrics.TAG_PARAMS_FILE: IMPORTED_PARAMS_FILE,
        metrics.TAG_IMPORTED_FROM: source, metrics.TAG_IMPORT_HASH: digest,
        metrics.TAG_TRIAL_COMMIT: commit, "mlflow.source.git.commit": commit,
        metrics.TAG_TRIAL_GPU: str(entry.get("gpu") or "unknown"), metrics.TAG_TRIAL_DATE: str(entry["date"]),
        metrics.TAG_VERDICT: entry["verdict"], metrics.TAG_VERDICT_REASON: "as the log concluded",
        metrics.TAG_CONCLUSION: str(entry.get("conclusion") or "").strip(),
        metrics.TAG_KEY_NUMBERS: key_numbers(entry),
        metrics.TAG_TRIAL_SESSION: str(entry.get("session") or ""),
        metrics.TAG_TRIAL_LOG_SOURCE: str(entry.get("source") or ""),
        metrics.TAG_TRIAL_CHECKS: str(entry.get("checks") or ""),
        "mlflow.source.name": f"stagelab try import {source}", "mlflow.source.type": "LOCAL",
    }


def _patches(entry: dict, folder: Path) -> list[Path]:
    return [folder / "patches" / f"{knob}.diff" for knob in sorted(entry.get("defines") or {})
            if (folder / "patches" / f"{knob}.diff").is_file()]


def _import_entry(entry: dict, where: str, position: int, source: str, folder: Path, experiment_id: str,
                  digest: str) -> str:
    import tempfile

    client = tracking.client()
    start = start_ms(where, entry["date"], position)
    values = number_metrics(entry)
    run = client.create_run(experiment_id, start_time=start, tags=_tags(entry, source, digest),
                            run_name=f"{entry['stage']} try {entry['name']}")
    run_id = run.info.run_id
    try:
        tracking.log_metrics(run_id, values, timestamp_ms=start)
        with tempfile.TemporaryDirectory(prefix="stagelab-import-") as scratch:
            (Path(scratch) / "entry.json").write_text(json.dumps(entry, indent=2, default=str))
            tracking.log_artifact(run_id, Path(scratch) / "entry.json", "trial")
            for patch in _patches(entry, folder):  # `.txt` last: the UI previews it as text
                copy = Path(scratch) / f"{patch.stem}.diff.txt"
                copy.write_text(patch.read_text())
                tracking.log_artifact(run_id, copy, "trial/patches")
        client.set_terminated(run_id, status="FINISHED", end_time=start)
        write_summary(run_id)
    except Exception:
        client.delete_run(run_id)  # a half-written run carries the entry's hash: it would block a re-import
        raise
    return run_id


def _known_hashes(experiment_id: str) -> set[str]:
    from .journal import trials_filter

    runs = tracking.client().search_runs([experiment_id], filter_string=trials_filter(), max_results=50000)
    return {r.data.tags[metrics.TAG_IMPORT_HASH] for r in runs if metrics.TAG_IMPORT_HASH in r.data.tags}


def import_trials(path: str | Path, progress=print) -> tuple[int, int]:
    """Every entry of a trials file not yet in the store, as a trial run; returns (added, skipped).
    The whole file is checked before anything is written."""
    added, skipped = _import_file(Path(path), progress)
    return len(added), skipped


def import_entry(path: str | Path, progress=print) -> str | None:
    """A file of one entry (measurement_entry's) imported as import_trials would: its run's id, or None
    where the store already holds the entry."""
    added, _ = _import_file(Path(path), progress)
    return added[0] if added else None


def _import_file(path: Path, progress) -> tuple[list[str], int]:
    from ..core.family import load_family
    from ..core.registry import find_stage

    entries = load_entries(path)
    experiments = {}
    for index, entry in enumerate(entries):
        try:
            experiments.setdefault(entry["stage"], load_family(find_stage(entry["stage"])[0].family).experiment)
        except ConfigError as exc:
            raise ConfigError(f"{path}: entry {index} ({entry['name']}): {exc}") from exc
        start_ms(f"{path}: entry {index}", entry["date"], index)
    source, added, skipped = _relative(path), [], 0
    known: dict[str, set[str]] = {}
    for index, entry in enumerate(entries):
        experiment_id = tracking.init_store(experiments[entry["stage"]])
        hashes = known.setdefault(experiment_id, _known_hashes(experiment_id))
        digest = entry_hash(entry)
        if digest in hashes or entry.get("imported_as") in hashes:  # imported before, maybe in other notation
            skipped += 1
            continue
        added.append(_import_entry(entry, f"{path}: entry {index}", index, source, path.parent, experiment_id, digest))
        hashes.add(digest)
    progress(f"{source}: {len(entries)} entries, {len(added)} imported, {skipped} already there")
    return added, skipped
