"""The cute build backend (stages.yaml `backend: cute`): a CuTe DSL stage file (FlashAttention-4's
language) compiled ahead of time, without a GPU, into what a CUDA stage's build gives the lab, so
the same gates judge it.

For each compile spec of the file (core.cute_stage) and each architecture of the stage
(core.cute_compile does 1 and 2):

1. cute.compile(function, *args, options="--gpu-arch sm_90a --keep-ptx --keep-cubin --dump-dir ...")
   -> the PTX and the cubin, renamed <function>.<name>.<arch>.ptx / .cubin in the build folder.
2. ptxas --verbose on that PTX by a ptxas of this machine that reproduces CuTe's cubin byte for
   byte (tried in turn; the build records whether one did) -> the report core.resources.parse_ptxas
   reads: one record per kernel the function launches.
3. cuobjdump -sass on CuTe's cubin -> the SASS (sass.txt).

A kernel's entry is CuTe's own name for it (kernel_cutlass_<kernel>_<argument types>_<n>: the name
ncu sees), filed under the spec's `name` as a Triton instance is. The key, the cache folder and the
instance names are every Python backend's (core.python_build): the key hashes the file, the family
folder's other .py and header files, the defines, the architectures, the CuTe DSL version, its
compiler library, the CUTE_DSL_* settings and the Python version.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from types import ModuleType
from typing import Any

from .cute_compile import aot_compile, cutlass_dsl_versions, ptxas_report
from .cute_stage import LANGUAGE, compile_specs
from .errors import BuildError
from .python_build import PythonBackend, build_python_stage, file_record, instance_listing, python_build_key
from .registry import Registry, Stage
from .resources import parse_ptxas


def _compile_spec(stage: Stage, spec: dict, index: int, arch: str, workdir: Path) -> list[dict[str, Any]]:
    """One spec for one architecture: its files in workdir, and each kernel it launches as an instance."""
    name = spec.get("name", "")
    label = f"compile_specs()[{index}]" + (f" ({name})" if name else "")
    dump = workdir / f".cute-{index}-{arch}"
    kept_ptx, kept_cubin = aot_compile(stage, spec, label, arch, dump)
    stem = f"{getattr(spec['function'], '__name__', 'function')}.{name or index}.{arch}"
    ptx, cubin = kept_ptx.rename(workdir / f"{stem}.ptx"), kept_cubin.rename(workdir / f"{stem}.cubin")
    shutil.rmtree(dump)
    log, reproduced = ptxas_report(spec, ptx, cubin)
    records = parse_ptxas(log)
    if not records:
        raise BuildError(f"ptxas reported no kernel for {label} of {stage.source.name}", log)
    entries = [record.mangled for record in records]
    for record in records:
        file_record(record, name).dynamic_shared_memory_bytes = spec.get("dynamic_shared_memory_bytes", 0)
    instances = [{"spec": index, "name": name, "entry": entry, "kernel": record.mangled, "arch": record.arch,
                  "ptx": ptx.name, "cubin": cubin.name, "ptxas_reproduces_cubin": reproduced}
                 for entry, record in zip(entries, records)]
    # one report and one listing for the spec's kernels, kept with its first
    texts = [(f"# {', '.join(r.kernel for r in records)} for {arch}: {label}\n{log}",
              instance_listing(cubin, dict(zip(entries, (r.mangled for r in records)))))]
    texts += [("", "")] * (len(records) - 1)
    return [{"record": record, "log": log_text, "listing": listing, "instance": instance}
            for record, instance, (log_text, listing) in zip(records, instances, texts)]


def _compile_all(stage: Stage, module: ModuleType, workdir: Path) -> list[dict[str, Any]]:
    """Every spec for every architecture (CuTe compiles for the one named: sm_90 and sm_90a differ)."""
    specs = compile_specs(stage, module)
    return [one for arch in dict.fromkeys(stage.arch) for index, spec in enumerate(specs)
            for one in _compile_spec(stage, spec, index, arch, workdir)]


CUTE = PythonBackend(name="cute", language=LANGUAGE, versions=cutlass_dsl_versions, compile_all=_compile_all)


def cute_build_key(stage: Stage, registry: Registry) -> str:
    return python_build_key(stage, registry, CUTE)


def build_cute_stage(stage: Stage, registry: Registry, *, load: bool = True) -> dict[str, Any]:
    """Compile (or reuse) a CuTe DSL stage; the fields of a core.build.BuildResult."""
    return build_python_stage(stage, registry, CUTE, load=load)
