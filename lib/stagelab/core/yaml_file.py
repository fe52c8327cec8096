"""Reading the lab's YAML files (parameter files, stage registries, trial sources): one error for a
missing file and one for a file that is not YAML, each naming the file; and the check of a mapping's keys."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from .errors import ConfigError


def read_yaml(path: Path, missing: str) -> Any:
    """The parsed document; `missing` is the error's text when the file is not there."""
    if not path.is_file():
        raise ConfigError(missing)
    try:
        return yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc


def check_keys(where: str, mapping: Any, allowed: set[str]) -> dict:
    if not isinstance(mapping, dict):
        raise ConfigError(f"{where}: expected a mapping, got {type(mapping).__name__}")
    unknown = sorted(set(mapping) - allowed)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(allowed)}")
    return mapping
