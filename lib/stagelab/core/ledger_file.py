"""The lab's ledgers in docs/results/<family>/ (same_code.yaml, conclusions.yaml): a header comment
saying which command writes the file, then a list of entries under `entries`, each with the fields
of its dataclass (one with a default may be left out: it was added later, and is written only where
it differs from its default, so older entries read and stay as they were). One reader and one writer, so a hand-damaged ledger is refused the same way
(file, entry number, what was expected) whichever it is."""

from __future__ import annotations

from dataclasses import MISSING, asdict, fields
from pathlib import Path
from typing import Any, Callable, TypeVar

import yaml

from .errors import ConfigError
from .yaml_file import read_yaml

Entry = TypeVar("Entry")


def _optional(entry_type: Callable[..., Entry]) -> dict[str, Any]:
    """The fields with a default, and their defaults."""
    return {f.name: f.default for f in fields(entry_type) if f.default is not MISSING}


def _entry(path: Path, index: int, raw: Any, entry_type: Callable[..., Entry]) -> Entry:
    typed = {f.name: f.type for f in fields(entry_type)}
    required = set(typed) - set(_optional(entry_type))
    where = f"{path}: entry {index + 1}"
    if not isinstance(raw, dict) or not required <= set(raw) <= set(typed):
        raise ConfigError(f"{where}: expected the keys {sorted(typed)}, got "
                          f"{sorted(raw) if isinstance(raw, dict) else type(raw).__name__}")
    values = {}
    for name, kind in ((n, k) for n, k in typed.items() if n in raw):
        if kind in (int, "int"):
            if not isinstance(raw[name], int) or isinstance(raw[name], bool):
                raise ConfigError(f"{where}: {name} must be an integer, got {raw[name]!r}")
            values[name] = raw[name]
        else:
            values[name] = str(raw[name])
    return entry_type(**values)


def read_ledger(path: Path, entry_type: Callable[..., Entry]) -> list[Entry]:
    """The ledger's entries; none when it does not exist."""
    if not path.is_file():
        return []
    raw = read_yaml(path, f"{path} not found")
    if raw is None:
        return []
    if not isinstance(raw, dict) or not isinstance(raw.get("entries"), list):
        raise ConfigError(f"{path}: expected a mapping with a list under 'entries'")
    return [_entry(path, index, item, entry_type) for index, item in enumerate(raw["entries"])]


def _written(entry: Any) -> dict:
    """The entry's fields, those at their default left out."""
    defaults = _optional(type(entry))
    return {k: v for k, v in asdict(entry).items() if k not in defaults or v != defaults[k]}


def write_ledger(path: Path, header: str, entries: list) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    body = yaml.safe_dump({"entries": [_written(e) for e in entries]}, sort_keys=False, width=120, allow_unicode=True)
    path.write_text(header + body)
