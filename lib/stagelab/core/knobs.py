"""A stage's knobs: the names a define (`stagelab try --define`, a notebook's `defines=`) may set.

A define reaches a stage's code in one of two ways, so a knob is one of:
- for a CUDA stage (`-DNAME=VALUE` to nvcc), a macro its own source or a family header it includes
  (with quotes, transitively) tests with the preprocessor (`#if`, `#elif`, `#ifdef`, `#ifndef`, `defined(NAME)`); a header's
  include guard and names the compiler reserves (`__CUDA_ARCH__`, `_WIN32`) are not knobs;
- for a Python stage (`backend: triton` or `cute`), a key of the file's `KNOBS` dict
  (core.python_stage: a define that is not one is refused at build time), read from the source
  without running it;
- for either, a define its stages.yaml entry names (compile_options.defines, search_space, variants).

A define that is none of these would build the default again under another name (a trial timing
the default against itself), so `check_defines` refuses it before anything is built.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from .errors import ConfigError
from .registry import Registry, Stage

_DIRECTIVE_RE = re.compile(r"^[ \t]*#[ \t]*(if|elif|ifdef|ifndef|elifdef|elifndef)\b(.*)$", re.MULTILINE)
_FIRST_DIRECTIVE_RE = re.compile(r"^[ \t]*#[ \t]*(\w+)[ \t]*(\w*)[ \t]*(.*)$", re.MULTILINE)
_NAME_RE = re.compile(r"\b[A-Za-z_]\w*\b")
_COMMENT_RE = re.compile(r"/\*.*?\*/|//[^\n]*", re.DOTALL)
_NOT_MACROS = {"defined", "__has_include", "__has_include_next"}


def _preprocessed_text(source: str) -> str:
    """The source without comments and with continued lines joined: one directive, one line."""
    return _COMMENT_RE.sub(" ", source.replace("\\\n", " "))


def _include_guard(text: str) -> str | None:
    """The include guard's macro: the file's first directive `#ifndef X` followed by `#define X`."""
    directives = _FIRST_DIRECTIVE_RE.findall(text)
    if len(directives) >= 2 and directives[0][0] == "ifndef" and directives[1][:2] == ("define", directives[0][1]) \
            and not directives[1][2].strip():
        return directives[0][1]
    return None


def _reserved(name: str) -> bool:
    return name.startswith("__") or (name.startswith("_") and name[1:2].isupper())


def macros_tested(source: str) -> set[str]:
    """The macro names the preprocessor conditions of one C/C++/CUDA source test."""
    text = _preprocessed_text(source)
    names = {name for _, condition in _DIRECTIVE_RE.findall(text) for name in _NAME_RE.findall(condition)}
    guard = _include_guard(text)
    return {name for name in names - _NOT_MACROS if not _reserved(name) and name != guard}


def python_knobs(source: Path) -> set[str] | None:
    """The keys of a Python stage file's top-level `KNOBS = {...}`; None when they cannot be read
    without running the file (KNOBS built by code), so nothing can be said before the build."""
    for node in ast.parse(source.read_text(), filename=str(source)).body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == "KNOBS" for t in targets) and isinstance(node.value, ast.Dict):
            keys = node.value.keys
            if all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in keys):
                return {k.value for k in keys}
            return None
    return set()


def registry_knobs(stage: Stage) -> set[str]:
    """The defines the stage's stages.yaml entry names: compile_options.defines, search_space, variants."""
    names = set(stage.defines) | {name for name, _ in stage.search_space.axes}
    return names | {name for defines in stage.variants.values() for name in defines}


_INCLUDE_RE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', re.MULTILINE)


def included_sources(source: Path, folder: Path) -> list[Path]:
    """The source and every file it includes with quotes, transitively, that lies in its own folder or
    `folder` (the family's): what nvcc reads of the family for this stage."""
    seen: dict[Path, None] = {}
    pending = [source]
    while pending:
        path = pending.pop()
        if path in seen or not path.is_file():
            continue
        seen[path] = None
        for name in _INCLUDE_RE.findall(_preprocessed_text(path.read_text(errors="replace"))):
            pending += [base / name for base in (path.parent, folder) if (base / name).is_file()][:1]
    return list(seen)


def stage_knobs(stage: Stage, registry: Registry) -> set[str] | None:
    """Every knob of the stage (the module's rules); None where its source cannot say (see python_knobs)."""
    if stage.backend == "cuda":
        sources = included_sources(stage.source, registry.directory)
        found = set().union(*(macros_tested(path.read_text(errors="replace")) for path in sources))
    else:
        found = python_knobs(stage.source)
        if found is None:
            return None
    return found | registry_knobs(stage)


def _named(knobs: set[str] | None) -> str:
    return "the keys of its KNOBS" if knobs is None else ", ".join(sorted(knobs)) or "none"


def check_defines(stage: Stage, registry: Registry, defines: dict, where: str) -> None:
    """A ConfigError naming the defines that are no knob of the stage, and its knobs; `where` says
    who asked (a trial, a notebook's `defines=`)."""
    knobs = stage_knobs(stage, registry)
    unknown = sorted(set(map(str, defines)) - knobs) if knobs is not None else []
    if unknown:
        raise ConfigError(f"{where}: {', '.join(unknown)} {'is no knob' if len(unknown) == 1 else 'are no knobs'} "
                          f"of stage {stage.id}; its knobs: {_named(knobs)}")


def check_variant(stage: Stage, registry: Registry, name: str, where: str) -> None:
    """A ConfigError for a variant the stage's stages.yaml entry does not name, naming its variants and knobs."""
    if name not in stage.variants:
        raise ConfigError(f"{where}: stage {stage.id} has no variant {name!r}; its variants: "
                          f"{', '.join(sorted(stage.variants)) or 'none'}; its knobs (--define NAME=VALUE): "
                          f"{_named(stage_knobs(stage, registry))}")
