"""The triton build backend (stages.yaml `backend: triton`): a Triton stage file compiled ahead of
time, without a GPU, into what a CUDA stage's build gives the lab, so the same gates judge it.

For each compile spec of the file (core.triton_stage) and each architecture of the stage
(core.triton_compile does 1 and 2):

1. triton.compile(ASTSource(kernel, signature, constexprs), target=GPUTarget("cuda", 90, 32) for
   sm_90a) -> the PTX, the cubin and the metadata (its `shared`: the launch-time shared memory).
2. ptxas --verbose on that PTX, with the flags that reproduce Triton's cubin byte for byte (tried
   in turn; the build records whether one did) -> the report core.resources.parse_ptxas reads.
3. cuobjdump -sass on Triton's cubin -> the SASS, one listing for all instances (sass.txt).

The key, the cache folder and the instance names are every Python backend's (core.python_build):
the key hashes the file, the family folder's other .py and header files, the defines, the
architectures, the Triton and the Python versions.
"""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType
from typing import Any

from .errors import BuildError
from .python_build import PythonBackend, build_python_stage, file_record, instance_listing, python_build_key
from .registry import Registry, Stage
from .resources import parse_ptxas
from .triton_compile import aot_compile, capability, ptxas_report
from .triton_stage import LANGUAGE, compile_specs

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


def _compile_instance(stage: Stage, spec: dict, index: int, arch: str, workdir: Path) -> dict[str, Any]:
    """One spec for one architecture: its files in workdir, resources, report and SASS listing."""
    label = f"compile_specs()[{index}]" + (f" ({spec['name']})" if spec.get("name") else "")
    compiled = aot_compile(stage, spec, label, arch)
    entry = compiled.metadata.name
    stem = f"{entry}.{spec['name']}.{arch}" if spec.get("name") else f"{entry}.{arch}"
    ptx, cubin = workdir / f"{stem}.ptx", workdir / f"{stem}.cubin"
    ptx.write_text(compiled.asm["ptx"])
    cubin.write_bytes(compiled.asm["cubin"])
    log, reproduced = ptxas_report(compiled, ptx)
    records = parse_ptxas(log)
    if len(records) != 1 or records[0].mangled != entry:
        raise BuildError(f"ptxas reported {[r.mangled for r in records]} for {label}, not the one entry {entry}", log)
    record = file_record(records[0], spec.get("name", ""))
    record.dynamic_shared_memory_bytes = int(compiled.metadata.shared)
    return {"record": record, "log": f"# {record.kernel} for {record.arch}: {label}\n{log}",
            "listing": instance_listing(cubin, {entry: record.mangled}),
            "instance": {"spec": index, "name": spec.get("name", ""), "entry": entry, "kernel": record.mangled,
                         "arch": record.arch, "ptx": ptx.name, "cubin": cubin.name,
                         "ptxas_reproduces_cubin": reproduced}}


def _compile_all(stage: Stage, module: ModuleType, workdir: Path) -> list[dict[str, Any]]:
    """Every spec for every architecture."""
    specs = compile_specs(stage, module)
    archs = {}
    for arch in stage.arch:  # one per capability: Triton names the target itself (sm_90 and sm_90a -> sm_90a)
        archs.setdefault(capability(arch), arch)
    return [_compile_instance(stage, spec, index, arch, workdir)
            for arch in archs.values() for index, spec in enumerate(specs)]


TRITON = PythonBackend(name="triton", language=LANGUAGE, versions=lambda: {"triton": triton_version()},
                       compile_all=_compile_all)


def triton_build_key(stage: Stage, registry: Registry) -> str:
    return python_build_key(stage, registry, TRITON)


def build_triton_stage(stage: Stage, registry: Registry, *, load: bool = True) -> dict[str, Any]:
    """Compile (or reuse) a Triton stage; the fields of a core.build.BuildResult."""
    return build_python_stage(stage, registry, TRITON, load=load)
