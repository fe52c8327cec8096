"""Build a stage: nvcc compiles its torch-free .cu, then a plain link with the family's binding.

Three steps; the stage's own are cached under build/<stage>/<key>/ where the key hashes the
stage source, the family's headers it and the binding include (core.includes), the binding, the
compile options, the architectures and the tool versions, so an unchanged stage never recompiles:

1. nvcc -c <stage>.cu --resource-usage -> an object file and the ptxas report (~2 s).
   This needs only nvcc, so it runs (and is gated) on machines with no GPU.
2. The family's binding.cpp (torch's headers, 7-63 s: core.binding) compiled to an object once per family,
   torch build and toolchain, and shared by every stage and knob (core.binding; its cache is
   binding_cache_dir()). Cached, this step costs nothing.
3. c++ -shared binding.o <stage>.o + torch's and cudart's libraries -> <stage>_<key>.so (<1 s),
   imported under the unique name <stage>_<key>. The binding needs no CUDA-enabled torch, so
   these steps run everywhere too.

BuildResult.steps says what each step took (and whether the binding was cached). A
`backend: triton` or `backend: cute` stage is a Python file built by core.build_triton or
core.build_cute instead (both through core.python_build), into the same BuildResult.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import platform
import subprocess
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import ModuleType

from .binding import MODULE_INIT_NAME, compile_binding, link_module, load_stage_module
from .build_cute import build_cute_stage
from .build_folder import publish_build
from .build_triton import build_triton_stage
from .errors import BuildError
from .includes import stage_sources
from .paths import build_dir
from .python_build import files_digest, python_source_hash
from .registry import Registry, Stage
from .resources import KernelResources, parse_ptxas
from .sass import object_sass, parse_sass
from .toolchain import gencode_flags, nvcc_binary, nvcc_version

BASE_NVCC_FLAGS = ("-O3", "-std=c++17", "-Xcompiler", "-fPIC", "--resource-usage")
NVCC_TIMEOUT_S = 900
# The backends whose stage is a Python file, by stages.yaml `backend:`; every other stage is cuda.
PYTHON_BUILDERS = {"triton": build_triton_stage, "cute": build_cute_stage}


def nvcc_command(stage: Stage, registry: Registry, output: Path) -> list[str]:
    defines = [f"-D{k}={v}" for k, v in sorted(stage.defines.items())]
    return [str(nvcc_binary()), *BASE_NVCC_FLAGS, *gencode_flags(stage.arch), *stage.nvcc_flags, *defines,
            f"-I{registry.directory}", "-c", str(stage.source), "-o", str(output)]


def _torch_version() -> str:
    import torch

    return torch.__version__


def source_hash(stage: Stage, registry: Registry) -> str:
    """The source alone: the stage file, the family headers it and the binding can include
    (core.includes), and the binding."""
    if stage.backend in PYTHON_BUILDERS:
        return python_source_hash(stage, registry)
    return files_digest(stage_sources(stage, registry))


def build_key(stage: Stage, registry: Registry) -> str:
    """Everything that changes the built module: source, options, archs, tool versions."""
    digest = hashlib.sha256()
    digest.update(source_hash(stage, registry).encode())
    digest.update(json.dumps({
        "defines": sorted(stage.defines.items()),
        "nvcc_flags": list(stage.nvcc_flags),
        "arch": list(stage.arch),
        "nvcc": nvcc_version(),
        "torch": _torch_version(),
        "python": platform.python_version(),
        # modules linked to the shared binding export PyInit_<this>; older builds differ
        "module_init": MODULE_INIT_NAME,
    }).encode())
    return digest.hexdigest()[:16]


@dataclass
class BuildSteps:
    """Seconds spent by each step of a fresh build; the binding's is ~0 when it was cached."""

    nvcc_seconds: float
    binding_seconds: float
    binding_cached: bool
    link_seconds: float

    def describe(self) -> str:
        if not self.binding_cached:
            binding = f"binding compiled {self.binding_seconds:.1f}s"
        elif self.binding_seconds >= 1:  # another process was compiling it
            binding = f"binding cached after waiting {self.binding_seconds:.1f}s"
        else:
            binding = "binding cached"
        return f"nvcc {self.nvcc_seconds:.1f}s, {binding}, link {self.link_seconds:.1f}s"


@dataclass
class BuildResult:
    stage_id: str
    key: str
    source_hash: str
    directory: Path
    ptxas_log: str
    resources: list[KernelResources]
    cached: bool
    seconds: float
    nvcc_command: list[str] = field(default_factory=list)
    module: ModuleType | None = None
    steps: BuildSteps | None = None  # None when the stage itself came from the cache

    @property
    def summary(self) -> str:
        """One line for logs: cached, or built in N s and what each step took."""
        if self.cached:
            return f"cached ({self.seconds:.1f}s, key {self.key})"
        steps = f": {self.steps.describe()}" if self.steps else ""  # a Python stage's build is one step
        return f"built in {self.seconds:.1f}s{steps} (key {self.key})"

    def sass_listing(self) -> str:
        """The object's `cuobjdump -sass` listing (cached beside it)."""
        listing = self.directory / "sass.txt"
        if not listing.is_file():
            listing.write_text(object_sass(self.directory / f"{self.stage_id}.o"))
        return listing.read_text()

    def sass_opcodes(self) -> dict[tuple[str, str], "Counter"]:
        """{(mangled kernel name, arch): opcode counts} from the object's SASS."""
        return parse_sass(self.sass_listing())

    @property
    def module_name(self) -> str:
        return f"{self.stage_id}_{self.key}"


def _compile_object(stage: Stage, registry: Registry, workdir: Path) -> tuple[Path, str, list[str]]:
    obj = workdir / f"{stage.id}.o"
    cmd = nvcc_command(stage, registry, obj)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=NVCC_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as exc:
        raise BuildError(f"nvcc timed out after {NVCC_TIMEOUT_S}s compiling {stage.source.name}",
                         str(exc.stdout or "")) from exc
    log = f"$ {' '.join(cmd)}\n{proc.stdout}{proc.stderr}"
    if proc.returncode != 0:
        raise BuildError(f"nvcc failed on {stage.source.name} (exit {proc.returncode})", log)
    return obj, log, cmd


def _fresh_build(stage: Stage, registry: Registry, key: str, workdir: Path) -> BuildSteps:
    """nvcc, the family's binding (usually cached), the link: the files and build.json into `workdir`."""
    name = f"{stage.id}_{key}"
    started = time.perf_counter()
    obj, log, cmd = _compile_object(stage, registry, workdir)
    (workdir / "ptxas.log").write_text(log)
    compiled = time.perf_counter()
    binding = compile_binding(registry)
    linked = time.perf_counter()
    (workdir / "link.log").write_text(link_module(binding.path, obj, workdir / f"{name}.so", stage.id))
    steps = BuildSteps(nvcc_seconds=compiled - started, binding_seconds=binding.seconds,
                       binding_cached=binding.cached, link_seconds=time.perf_counter() - linked)
    meta = {"stage": stage.id, "key": key, "source_hash": source_hash(stage, registry),
            "nvcc_command": cmd, "module": f"{name}.so", "binding": str(binding.path), "steps": asdict(steps)}
    (workdir / "build.json").write_text(json.dumps(meta, indent=2))
    return steps


def build_stage(stage: Stage, registry: Registry, *, load: bool = True) -> BuildResult:
    """Compile (or reuse) a stage; raises BuildError carrying the compiler log."""
    if stage.backend in PYTHON_BUILDERS:
        return BuildResult(**PYTHON_BUILDERS[stage.backend](stage, registry, load=load))
    if "#include <torch" in stage.source.read_text():
        raise BuildError(f"{stage.source.name} includes torch headers", "stage sources must stay torch-free")
    started = time.perf_counter()
    key = build_key(stage, registry)
    name = f"{stage.id}_{key}"
    final = build_dir() / stage.id / key
    meta_path = final / "build.json"
    cached = meta_path.is_file()
    steps = None if cached else publish_build(final, key, lambda workdir: _fresh_build(stage, registry, key, workdir))
    meta = json.loads(meta_path.read_text())
    log = (final / "ptxas.log").read_text()
    result = BuildResult(
        stage_id=stage.id, key=key, source_hash=meta["source_hash"], directory=final, ptxas_log=log,
        resources=parse_ptxas(log), cached=cached, seconds=time.perf_counter() - started,
        nvcc_command=meta["nvcc_command"], steps=steps,
    )
    if load:
        from .family import load_family

        result.module = load_stage_module(name, final / meta["module"])
        attach_dynamic_shared_memory(result, load_family(registry.family))
    return result


def build_into_cache(stage: Stage, registry: Registry) -> BuildResult:
    """Compile (or find) a stage and its SASS listing in the cache without loading it: the offline
    part of a build, so that a later load, and the resource step, only read files."""
    result = build_stage(stage, registry, load=False)
    result.sass_opcodes()
    return result


def build_all(builds: Sequence[tuple[Stage, Registry]], jobs: int) -> Iterator[tuple[int, BuildResult | BuildError]]:
    """build_into_cache for each (stage, registry), `jobs` at a time; yields (index, result or the
    BuildError) as each finishes. In this process when jobs is 1; otherwise in spawned processes,
    not forked ones: the caller may hold a CUDA context, and a forked child of a CUDA process is
    not supported by the driver."""
    if jobs <= 1:
        for index, (stage, registry) in enumerate(builds):
            try:
                yield index, build_into_cache(stage, registry)
            except BuildError as exc:
                yield index, exc
        return
    with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {pool.submit(build_into_cache, stage, registry): index for index, (stage, registry) in enumerate(builds)}
        for future in as_completed(futures):
            try:
                yield futures[future], future.result()
            except BuildError as exc:
                yield futures[future], exc


def attach_dynamic_shared_memory(result: BuildResult, family) -> None:
    """Fill each kernel's launch-time shared memory from the stage's own report of it
    (the family knows how its kernel instances are named and how to ask)."""
    for record in result.resources:
        dynamic = family.dynamic_shared_memory(result.module, record.template_args)
        if dynamic is not None:
            record.dynamic_shared_memory_bytes = dynamic
