"""Reading the lab's YAML files (parameter files, stage registries, trial sources): one error for a
missing file and one for a file that is not YAML, each naming the file (and for a syntax error the line
and column, on one line); and the checks of a mapping's keys and of its values' forms."""

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
        raise ConfigError(yaml_error_line(path, exc)) from exc


def yaml_error_line(path: Path, exc: yaml.YAMLError) -> str:
    """yaml's error in one line: file, line and column (1-based) where it went wrong, what, and in
    what (yaml's own text spreads this over up to eight lines)."""
    mark = getattr(exc, "problem_mark", None)
    if mark is None:
        return f"{path}: not valid YAML: {' '.join(str(exc).split())}"
    context, context_mark = getattr(exc, "context", None), getattr(exc, "context_mark", None)
    started = f" (line {context_mark.line + 1}, column {context_mark.column + 1})" if context_mark else ""
    within = f"; {context}{started}" if context else ""
    return f"{path}, line {mark.line + 1}, column {mark.column + 1}: not valid YAML: {exc.problem}{within}"


def check_keys(where: str, mapping: Any, allowed: set[str]) -> dict:
    if not isinstance(mapping, dict):
        raise ConfigError(f"{where}: expected a mapping, got {type(mapping).__name__}")
    unknown = sorted(set(mapping) - allowed)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(allowed)}")
    return mapping


def positive_int(where: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"{where}: expected a positive integer, got {value!r}")
    return value


def choice_list(where: str, value: Any, allowed: tuple[str, ...]) -> tuple[str, ...]:
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not values:
        raise ConfigError(f"{where}: expected a non-empty list drawn from {list(allowed)}")
    for item in values:
        if item not in allowed:
            raise ConfigError(f"{where}: {item!r} is not supported; supported: {list(allowed)}")
    return tuple(values)
