"""A stage written as a Python file (`backend: triton` or `cute`, <family folder>/<stage id>.py) as
the lab reads it, whatever the language of its kernels.

The file holds its kernels and:

    KNOBS = {"BLOCK_ROWS": 4, "num_warps": 4}   # knob defaults; stages.yaml defines override them
    def compile_specs(): ...                    # what the lab compiles ahead of time (the backend's spec keys)
    def stage_config() -> str: ...              # the configuration in words, recorded with each run
    def forward(...): ...                       # whatever the family calls, as a CUDA binding exposes it

Its launcher reads KNOBS when it is called, so every build loads the file as a module of its own
(named <stage>_<build key>) and sets that module's KNOBS right after executing it: a stage and its
parent, or two knob settings of one stage, live side by side in one process. Code that reads
KNOBS at import time sees the defaults, so the file reads them inside its functions.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
import traceback
from collections.abc import Callable
from types import ModuleType
from typing import Any

from .errors import BuildError, ConfigError
from .registry import Stage

INSTANCE_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
REQUIRED_FUNCTIONS = ("compile_specs", "stage_config")


def knob_value(text: str) -> Any:
    """A define as the file's code sees it: the Python literal it spells ("4" -> 4, "True" -> True),
    else the text itself ("fp16")."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text


def knobs_of(stage: Stage, defaults: Any) -> dict[str, Any]:
    """The file's KNOBS with the stage's defines over them; a define the file has no knob for is an error."""
    if not isinstance(defaults, dict):
        raise BuildError(f"{stage.source.name}: KNOBS must be a dict of knob defaults",
                         f"got {type(defaults).__name__}")
    unknown = sorted(set(stage.defines) - set(defaults))
    if unknown:
        raise ConfigError(f"stage {stage.id}: define(s) {unknown} are not knobs of {stage.source.name}; "
                          f"its KNOBS: {sorted(defaults) or 'none'}")
    return {**defaults, **{name: knob_value(text) for name, text in stage.defines.items()}}


def _execute(stage: Stage, name: str, language: str) -> ModuleType:
    """The file run as a new module `name`, with its folder on sys.path meanwhile (a stage may
    import the family's shared .py files at its top)."""
    spec = importlib.util.spec_from_file_location(name, stage.source)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # registered first, as an import does (dataclasses look themselves up)
    folder = str(stage.source.parent)
    sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise BuildError(f"importing the {language} stage {stage.source} failed: {type(exc).__name__}: {exc}",
                         traceback.format_exc()) from exc
    finally:
        sys.path.remove(folder)
    return module


def load_stage_module(stage: Stage, name: str, language: str) -> ModuleType:
    """The stage's file as module `name` with its knobs set (the same object for the same name)."""
    if name in sys.modules:
        return sys.modules[name]
    module = _execute(stage, name, language)
    try:
        module.KNOBS = knobs_of(stage, getattr(module, "KNOBS", {}))
        missing = [f for f in REQUIRED_FUNCTIONS if not callable(getattr(module, f, None))]
        if missing:
            raise BuildError(f"{stage.source.name} defines no {', '.join(missing)}",
                             f"a {language} stage file defines {', '.join(REQUIRED_FUNCTIONS)} (core/python_stage.py)")
    except Exception:
        del sys.modules[name]
        raise
    return module


def check_spec_keys(where: str, spec: Any, allowed: set[str], required: tuple[str, ...]) -> dict:
    """A compile spec is a dict of the backend's keys, with its required ones."""
    if not isinstance(spec, dict):
        raise BuildError(f"{where}: expected a dict, got {type(spec).__name__}", "")
    unknown = sorted(set(spec) - allowed)
    missing = [k for k in required if k not in spec]
    if unknown or missing:
        raise BuildError(f"{where}: unknown key(s) {unknown}, missing {missing}", f"allowed keys: {sorted(allowed)}")
    name = spec.get("name", "")
    if name and not (isinstance(name, str) and INSTANCE_NAME_RE.match(name)):
        raise BuildError(f"{where}: 'name' must be letters, digits and underscores, not starting with a digit",
                         repr(name))
    return spec


def compile_specs(stage: Stage, module: ModuleType, check: Callable[[str, Any], dict]) -> list[dict]:
    """The file's compile_specs(), each entry checked by the backend's `check(where, spec)`."""
    try:
        specs = module.compile_specs()
    except Exception as exc:
        raise BuildError(f"{stage.source.name}: compile_specs() raised {type(exc).__name__}: {exc}",
                         traceback.format_exc()) from exc
    if not isinstance(specs, list) or not specs:
        raise BuildError(f"{stage.source.name}: compile_specs() must return a non-empty list of dicts", repr(specs))
    return [check(f"{stage.source.name}: compile_specs()[{i}]", spec) for i, spec in enumerate(specs)]
