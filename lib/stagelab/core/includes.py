"""The family headers a CUDA translation unit can include: what its build's source hash covers.

A stage's build hash (core.build.source_hash) covers its own file, the binding and the headers of the
family that the two can reach through `#include "..."`, not every header of the family: an edit to
a header only the INT8 stage includes leaves the fp16 stages' hashes, and their runs, current.

The closure is found the way the preprocessor looks, but over-including where unsure:
- every quoted `#include` counts, whatever `#if` it sits under (a header behind a disabled branch
  counts too), and comments are left out (`//` and `/* */`, string literals respected);
- a quoted name is looked up in the including file's folder, then in the folders of the stage's nvcc
  flags and the family's folder (the `-I` the build adds after them), -iquote, -I, -isystem, as gcc does;
  a file found outside the family's folder (a library's headers) is not the family's source and is
  neither hashed nor followed;
- `#include <...>` is a system or toolkit header, covered by the tool versions in the build key.
Where the closure cannot be known, every header of the family counts (Registry.header_files): an
include that is no quoted literal (`#include KERNEL_HEADER`), a quoted one found nowhere, an
`#include_next`, a relative include folder in the flags (nvcc resolves it against a folder the hash
cannot know) or a forced include (`-include`, `--pre-include`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from .registry import Registry, Stage

_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*(include_next|include|import)\b(.*)$", re.M)
_QUOTED = re.compile(r'[ \t]*"([^"\n]+)"')
_ANGLED = re.compile(r"[ \t]*<[^>\n]+>")
# what starts a comment or a literal (a raw string's prefix not inside a longer name)
_TOKEN = re.compile(r'//|/\*|(?<![A-Za-z0-9_])(?:u8|[uUL])?R"([^()\\ \t\n]{0,16})\(|"|\'')
# nvcc's flags that add an include folder (each as -Xdir, -X dir or --long=dir / --long dir)
_INCLUDE_FLAGS = {"-I": "-I", "--include-path": "-I", "-iquote": "-iquote", "-isystem": "-isystem",
                  "--system-include": "-isystem"}
_FORCED_FLAGS = ("-include", "--pre-include")


class _Unknown(Exception):
    """The closure cannot be known: the caller falls back to every header of the family."""


def strip_comments(text: str) -> str:
    """The text with its line continuations joined and its comments blanked (newlines kept), string,
    character and raw string literals left as they are."""
    text = text.replace("\r\n", "\n").replace("\\\n", "")
    out, i, n = [], 0, len(text)
    while (token := _TOKEN.search(text, i)) is not None:
        start = token.start()
        out.append(text[i:start])
        if token.group() == "//":
            end = text.find("\n", start)
            end, kept = n if end < 0 else end, ""
        elif token.group() == "/*":
            end = text.find("*/", start + 2)
            end = n if end < 0 else end + 2
            kept = " " + "\n" * text.count("\n", start, end)
        elif token.group(1) is not None:  # a raw string: up to its )delimiter"
            end = text.find(")" + token.group(1) + '"', token.end())
            end = n if end < 0 else end + len(token.group(1)) + 2
            kept = text[start:end]
        else:  # a string or character literal, up to its unescaped quote or the line's end
            end = start + 1
            while end < n and text[end] not in (token.group(), "\n"):
                end += 2 if text[end] == "\\" else 1
            end = min(end + 1, n)
            kept = text[start:end]
        out.append(kept)
        i = end
    out.append(text[i:])
    return "".join(out)


def quoted_includes(path: Path) -> list[str]:
    """The names of a file's quoted includes, in order; _Unknown for an include of any other form."""
    names = []
    for directive, rest in _DIRECTIVE.findall(strip_comments(path.read_text(errors="replace"))):
        if (quoted := _QUOTED.match(rest)) and directive != "include_next":
            names.append(quoted.group(1))
        elif not _ANGLED.match(rest) or directive == "include_next":
            raise _Unknown(f"{path.name}: #{directive}{rest}")
    return names


def include_folders(flags: Sequence[str], family: Path) -> list[Path]:
    """Where a quoted include is looked for after the including file's folder, in the preprocessor's
    order: the flags' -iquote folders, their -I folders then the family's (the -I the build adds last),
    their -isystem folders. _Unknown for a relative folder or a forced include."""
    kinds: dict[str, list[Path]] = {"-iquote": [], "-I": [], "-isystem": []}
    i = 0
    while i < len(flags):
        flag = flags[i]
        if any(flag == f or flag.startswith(f + "=") or (f == "-include" and flag.startswith(f)) for f in _FORCED_FLAGS):
            raise _Unknown(f"forced include {flag}")
        option = next((f for f in _INCLUDE_FLAGS if flag == f or flag.startswith(f)), None)
        if option is not None:
            value = flag[len(option):]
            if not value and i + 1 < len(flags):
                i += 1
                value = flags[i]
            value = value[1:] if value.startswith("=") and option.startswith("--") else value
            if not Path(value).is_absolute():
                raise _Unknown(f"relative include folder {flag}")
            kinds[_INCLUDE_FLAGS[option]].append(Path(value))
        i += 1
    return [*kinds["-iquote"], *kinds["-I"], Path(family), *kinds["-isystem"]]


def _resolve(name: str, including: Path, folders: Sequence[Path]) -> Path:
    for folder in (including.parent, *folders):
        candidate = folder / name
        if candidate.is_file():
            return candidate
    raise _Unknown(f"{including.name}: #include \"{name}\" is found nowhere")


def _closure(roots: Iterable[Path], family: Path, folders: Sequence[Path]) -> list[Path]:
    family = family.resolve()
    roots = [Path(r).resolve() for r in roots]
    seen, todo = set(roots), list(roots)
    while todo:
        current = todo.pop()
        for name in quoted_includes(current):
            found = _resolve(name, current, folders).resolve()
            if found.is_relative_to(family) and found not in seen:
                seen.add(found)
                todo.append(found)
    return sorted(seen - set(roots))


def include_closure(roots: Iterable[Path], family: Path, flags: Sequence[str] = ()) -> list[Path] | None:
    """The files inside `family` that the `roots` include, directly or not, sorted (the roots left
    out); None when that cannot be known. `flags`: nvcc flags that may add include folders."""
    try:
        return _closure(roots, family, include_folders(flags, family))
    except _Unknown:
        return None


def _in_family(paths: list[Path], registry: Registry) -> list[Path]:
    """The closure's files named under the registry's folder as given (not resolved), as header_files are."""
    base = registry.directory.resolve()
    return [registry.directory / p.relative_to(base) for p in paths]


def _binding_closure(registry: Registry) -> list[Path] | None:
    """include_closure of the binding (none without one): the binding is built without a stage's flags."""
    return include_closure([registry.binding], registry.directory) if registry.binding else []


def binding_headers(registry: Registry) -> list[Path]:
    """The family headers the binding includes: its own build key and part of every cuda stage's hash."""
    found = _binding_closure(registry)
    return registry.header_files() if found is None else _in_family(found, registry)


def stage_headers(stage: Stage, registry: Registry) -> list[Path]:
    """The family headers a cuda stage's build depends on: those its .cu can include (with its nvcc
    flags' include folders), and those the binding linked into its module includes; sorted, each
    once, the stage and the binding left out. Every header of the family where either is unknown."""
    found = include_closure([stage.source], registry.directory, stage.nvcc_flags)
    binding = _binding_closure(registry)
    if found is None or binding is None:
        return registry.header_files()
    own = {stage.source.resolve(), *([registry.binding.resolve()] if registry.binding else [])}
    return _in_family(sorted((set(found) | set(binding)) - own), registry)


def stage_sources(stage: Stage, registry: Registry) -> list[Path]:
    """What a cuda stage's build source hash covers, in its order: the stage, its headers, the binding."""
    return [stage.source, *stage_headers(stage, registry), *([registry.binding] if registry.binding else [])]
