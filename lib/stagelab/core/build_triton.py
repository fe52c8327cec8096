"""The triton build backend (stages.yaml `backend: triton`): a Triton stage file compiled ahead of
time, without a GPU, into what a CUDA stage's build gives the lab, so the same gates judge it.

For each compile spec of the file (core.triton_stage) and each architecture of the stage
(core.triton_compile does 1 and 2):

1. triton.compile(ASTSource(kernel, signature, constexprs), target=GPUTarget("cuda", 90, 32) for
   sm_90a) -> the PTX, the cubin and the metadata (its `shared`: the launch-time shared memory).
2. ptxas --verbose on that PTX, with the flags that reproduce Triton's cubin byte for byte (tried
   in turn; the build records whether one did) -> the report core.resources.parse_ptxas reads.
3. cuobjdump -sass on Triton's cubin -> the SASS, one listing for all instances (sass.txt).

A named spec's kernel instance is filed as a template instance of its kernel would be, in the
Itanium form `_Z<len>kernelI<len>nameEv` (tag kernel.name.sm_90a): SASS keys, resource tags, the
profiler's kernel-name filter and `helper_kernels` read it as they read a CUDA stage's. Everything
is cached under build/<stage>/<key>/, the key hashing the file, the family folder's other .py and
header files, the defines, the architectures, the Triton and the Python versions.
"""

from __future__ import annotations

import hashlib
import json
import platform
import re
import shutil
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from types import ModuleType
from typing import Any

from .errors import BuildError
from .paths import build_dir
from .registry import Registry, Stage
from .resources import KernelResources, parse_ptxas
from .sass import object_sass
from .triton_compile import aot_compile, capability, ptxas_report
from .triton_stage import compile_specs, load_stage_module

HELPER_SUFFIXES = {".py", ".h", ".cuh", ".hpp"}
# The oldest Triton checked (3.3, 3.6, 3.9): ASTSource with a {name: type} signature and attribute paths.
MIN_TRITON = (3, 3)


def triton_version() -> str:
    """The installed Triton's version; an error when there is none, or one older than MIN_TRITON."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("triton")
    except PackageNotFoundError as exc:
        raise BuildError("Triton is not installed: a `backend: triton` stage needs it", "pip install triton") from exc
    if tuple(int(part) for part in re.findall(r"\d+", found)[:2]) < MIN_TRITON:
        raise BuildError(f"Triton {found} is older than {'.'.join(map(str, MIN_TRITON))}, the oldest the triton "
                         "backend takes (its ASTSource signature and attributes)", "pip install 'triton>=3.3'")
    return found


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


def triton_source_hash(stage: Stage, registry: Registry) -> str:
    """The source alone: the stage file and the family folder's other .py and header files."""
    return files_digest([stage.source, *helper_files(registry)])


def triton_build_key(stage: Stage, registry: Registry) -> str:
    digest = hashlib.sha256()
    digest.update(triton_source_hash(stage, registry).encode())
    digest.update(json.dumps({
        "backend": "triton",
        "defines": sorted(stage.defines.items()),
        "arch": list(stage.arch),
        "triton": triton_version(),
        "python": platform.python_version(),
    }).encode())
    return digest.hexdigest()[:16]


def instance_names(entry: str, name: str) -> tuple[str, str]:
    """(the name the lab files a kernel instance under, the name people read)."""
    if not name:
        return entry, entry
    return f"_Z{len(entry)}{entry}I{len(name)}{name}Ev", f"{entry}<{name}>"


def instance_listing(cubin: Path, entry: str, mangled: str) -> str:
    """cuobjdump -sass of one instance's cubin, its function filed under the instance's name."""
    return re.sub(rf"^(\s*Function\s*:\s*){re.escape(entry)}\s*$", lambda m: m[1] + mangled, object_sass(cubin),
                  flags=re.M)


def _compile_instance(stage: Stage, spec: dict, index: int, arch: str, workdir: Path) -> dict[str, Any]:
    """One spec for one architecture: its files in workdir, resources, report and SASS listing."""
    label = f"compile_specs()[{index}]" + (f" ({spec['name']})" if spec.get("name") else "")
    compiled = aot_compile(stage, spec, label, arch)
    entry = compiled.metadata.name
    mangled, readable = instance_names(entry, spec.get("name", ""))
    stem = f"{entry}.{spec['name']}.{arch}" if spec.get("name") else f"{entry}.{arch}"
    ptx, cubin = workdir / f"{stem}.ptx", workdir / f"{stem}.cubin"
    ptx.write_text(compiled.asm["ptx"])
    cubin.write_bytes(compiled.asm["cubin"])
    log, reproduced = ptxas_report(compiled, ptx, workdir)
    records = parse_ptxas(log)
    if len(records) != 1 or records[0].mangled != entry:
        raise BuildError(f"ptxas reported {[r.mangled for r in records]} for {label}, not the one entry {entry}", log)
    record = records[0]
    record.mangled, record.kernel = mangled, readable
    record.dynamic_shared_memory_bytes = int(compiled.metadata.shared)
    return {"record": record, "log": f"# {readable} for {record.arch}: {label}\n{log}",
            "listing": instance_listing(cubin, entry, mangled),
            "instance": {"spec": index, "name": spec.get("name", ""), "entry": entry, "kernel": mangled,
                         "arch": record.arch, "ptx": ptx.name, "cubin": cubin.name,
                         "ptxas_reproduces_cubin": reproduced}}


def _compile_all(stage: Stage, module: ModuleType, workdir: Path) -> list[dict[str, Any]]:
    """Every spec for every architecture; two instances filed under one name are an error."""
    specs = compile_specs(stage, module)
    built, seen, archs = [], {}, {}
    for arch in stage.arch:  # one per capability: Triton names the target itself (sm_90 and sm_90a -> sm_90a)
        archs.setdefault(capability(arch), arch)
    for arch in archs.values():
        for index, spec in enumerate(specs):
            one = _compile_instance(stage, spec, index, arch, workdir)
            where = (one["record"].mangled, one["record"].arch)
            if where in seen:
                raise BuildError(f"{stage.source.name}: compile_specs()[{seen[where]}] and [{index}] are both "
                                 f"{one['record'].kernel} for {where[1]}", "give each spec of one kernel its own name")
            seen[where] = index
            built.append(one)
    return built


def _write_build(stage: Stage, registry: Registry, key: str, module: ModuleType, folder: Path) -> None:
    """Compile into a private folder, then publish it as `folder` in one rename."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=folder.parent))
    try:
        built = _compile_all(stage, module, workdir)
        (workdir / "ptxas.log").write_text("\n".join(b["log"] for b in built))
        (workdir / "sass.txt").write_text("\n".join(b["listing"] for b in built))
        meta = {"stage": stage.id, "key": key, "backend": "triton", "triton": triton_version(),
                "source_hash": triton_source_hash(stage, registry), "source": str(stage.source),
                "instances": [b["instance"] for b in built], "kernels": [asdict(b["record"]) for b in built]}
        (workdir / "build.json").write_text(json.dumps(meta, indent=2))
        try:
            workdir.rename(folder)
        except OSError:  # another process finished the same build first: keep theirs
            shutil.rmtree(workdir, ignore_errors=True)
    except BaseException:
        shutil.rmtree(workdir, ignore_errors=True)
        raise


def build_triton_stage(stage: Stage, registry: Registry, *, load: bool = True) -> dict[str, Any]:
    """Compile (or reuse) a Triton stage; the fields of a core.build.BuildResult (that module
    dispatches here, so this one cannot name its class). `module` is the stage's file with its knobs."""
    started = time.perf_counter()
    key = triton_build_key(stage, registry)
    name = f"{stage.id}_{key}"
    folder = build_dir() / stage.id / key
    cached = (folder / "build.json").is_file()
    module = None
    if not cached:
        module = load_stage_module(stage, name)
        _write_build(stage, registry, key, module, folder)
    meta = json.loads((folder / "build.json").read_text())
    resources = [KernelResources(**{**row, "advisories": tuple(row["advisories"])}) for row in meta["kernels"]]
    return dict(stage_id=stage.id, key=key, source_hash=meta["source_hash"], directory=folder,
                ptxas_log=(folder / "ptxas.log").read_text(), resources=resources, cached=cached,
                seconds=time.perf_counter() - started,
                module=(module or load_stage_module(stage, name)) if load else None)
