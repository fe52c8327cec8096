"""The build every Python-file backend shares (`backend: triton`, `backend: cute`): a stage file
compiled ahead of time, without a GPU, into what a CUDA stage's build gives the lab.

A backend is a PythonBackend: its name, its language (for messages), the versions of its tools
(part of the cache key and of build.json; an error when a tool is missing) and
`compile_all(stage, module, workdir)`, which compiles the file's compile specs into workdir and
gives one dict per kernel instance:

    {"record": KernelResources,   # parsed from ptxas -v, filed under the instance's name
     "log": str,                  # that ptxas report, headed by the instance
     "listing": str,              # the instance's cuobjdump -sass listing
     "instance": dict}            # what build.json keeps of it ("spec": the spec's index, ...)

This module does the rest: the key over the stage file, the family folder's other .py and header
files, the defines, the architectures, the tool and Python versions; the folder build/<stage>/<key>/
published in one rename (core.build_folder); the cache; the fields of a BuildResult.

A named spec's kernel instance is filed as a template instance of its kernel would be, in the
Itanium form `_Z<len>kernelI<len>nameEv` (tag kernel.name.sm_90a): SASS keys, resource tags, the
profiler's kernel-name filter and `helper_kernels` read it as they read a CUDA stage's.
"""

from __future__ import annotations

import hashlib
import json
import platform
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from .build_folder import publish_build
from .errors import BuildError
from .paths import build_dir
from .python_stage import load_stage_module
from .registry import Registry, Stage
from .resources import KernelResources
from .sass import object_sass

HELPER_SUFFIXES = {".py", ".h", ".cuh", ".hpp"}


@dataclass(frozen=True)
class PythonBackend:
    name: str  # stages.yaml `backend:`
    language: str  # as messages name it: "Triton", "CuTe DSL"
    versions: Callable[[], dict[str, str]]  # {"triton": "3.9.0"}; raises BuildError when a tool is missing
    compile_all: Callable[[Stage, ModuleType, Path], list[dict[str, Any]]]


def helper_files(registry: Registry) -> list[Path]:
    """The family folder's .py and header files that are no stage's source: what a stage may share."""
    sources = {s.source.resolve() for s in registry.stages.values()}
    return sorted(p for p in registry.directory.iterdir()
                  if p.is_file() and p.suffix in HELPER_SUFFIXES and p.resolve() not in sources)


def files_digest(paths: list[Path]) -> str:
    """sha256 over each file's name and bytes, in order: a build's source hash."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def python_source_hash(stage: Stage, registry: Registry) -> str:
    """The source alone: the stage file and the family folder's other .py and header files."""
    return files_digest([stage.source, *helper_files(registry)])


def python_build_key(stage: Stage, registry: Registry, backend: PythonBackend) -> str:
    digest = hashlib.sha256()
    digest.update(python_source_hash(stage, registry).encode())
    digest.update(json.dumps({
        "backend": backend.name,
        "defines": sorted(stage.defines.items()),
        "arch": list(stage.arch),
        **backend.versions(),
        "python": platform.python_version(),
    }).encode())
    return digest.hexdigest()[:16]


def instance_names(entry: str, name: str) -> tuple[str, str]:
    """(the name the lab files a kernel instance under, the name people read)."""
    if not name:
        return entry, entry
    return f"_Z{len(entry)}{entry}I{len(name)}{name}Ev", f"{entry}<{name}>"


def file_record(record: KernelResources, name: str) -> KernelResources:
    """A ptxas record of a kernel entry filed under its instance's names (the spec's `name`)."""
    record.mangled, record.kernel = instance_names(record.mangled, name)
    return record


def instance_listing(cubin: Path, names: dict[str, str]) -> str:
    """cuobjdump -sass of one cubin, each function {entry: filed name} filed under its instance's name."""
    listing = object_sass(cubin)
    for entry, mangled in names.items():
        listing = re.sub(rf"^(\s*Function\s*:\s*){re.escape(entry)}\s*$", lambda m: m[1] + mangled, listing,
                         flags=re.M)
    return listing


def _check_unique(stage: Stage, built: list[dict[str, Any]]) -> None:
    """Two instances filed under one name for one architecture are an error."""
    seen = {}
    for one in built:
        where, index = (one["record"].mangled, one["record"].arch), one["instance"]["spec"]
        if where in seen:
            raise BuildError(f"{stage.source.name}: compile_specs()[{seen[where]}] and [{index}] are both "
                             f"{one['record'].kernel} for {where[1]}", "give each spec of one kernel its own name")
        seen[where] = index


def _write_build(stage: Stage, registry: Registry, key: str, module: ModuleType, backend: PythonBackend,
                 workdir: Path) -> None:
    """Every instance's files, ptxas.log, sass.txt and build.json, into workdir."""
    built = backend.compile_all(stage, module, workdir)
    _check_unique(stage, built)
    (workdir / "ptxas.log").write_text("\n".join(b["log"] for b in built))
    (workdir / "sass.txt").write_text("\n".join(b["listing"] for b in built))
    meta = {"stage": stage.id, "key": key, "backend": backend.name, **backend.versions(),
            "source_hash": python_source_hash(stage, registry), "source": str(stage.source),
            "instances": [b["instance"] for b in built], "kernels": [asdict(b["record"]) for b in built]}
    (workdir / "build.json").write_text(json.dumps(meta, indent=2))


def build_python_stage(stage: Stage, registry: Registry, backend: PythonBackend, *, load: bool = True
                       ) -> dict[str, Any]:
    """Compile (or reuse) a Python-file stage; the fields of a core.build.BuildResult (that module
    dispatches here, so this one cannot name its class). `module` is the stage's file with its knobs."""
    started = time.perf_counter()
    key = python_build_key(stage, registry, backend)
    name = f"{stage.id}_{key}"
    folder = build_dir() / stage.id / key
    cached = (folder / "build.json").is_file()
    module = None
    if not cached:
        module = load_stage_module(stage, name, backend.language)
        publish_build(folder, key, lambda workdir: _write_build(stage, registry, key, module, backend, workdir))
    meta = json.loads((folder / "build.json").read_text())
    resources = [KernelResources(**{**row, "advisories": tuple(row["advisories"])}) for row in meta["kernels"]]
    return dict(stage_id=stage.id, key=key, source_hash=meta["source_hash"], directory=folder,
                ptxas_log=(folder / "ptxas.log").read_text(), resources=resources, cached=cached,
                seconds=time.perf_counter() - started,
                module=(module or load_stage_module(stage, name, backend.language)) if load else None)
