"""The family's torch binding: compiled once, linked to every stage, loaded side by side.

binding.cpp includes torch's headers: sdpa's, softmax's and rmsnorm's torch/extension.h (with it the
skeleton's binding took 63 s on a 2-core machine), new-family's skeleton only the tensor type and
pybind11's caster for it (19 s there, 7 s on the H200 machine). The stages of a family differ only
in the object nvcc makes. So the binding is compiled once per family source, torch
build and toolchain into binding_cache_dir()/<family>/<key>/binding.o, and each stage's module
is a plain link of that object with the stage's (under a second).

Every module so linked exports the same init function, PyInit_stagelab_binding (the name is
fixed when the binding is compiled, as it must be for the object to be shared).
load_stage_module imports one by its file as `<stage>_<key>.stagelab_binding` (the loader
wants the last part, pybind11 caches modules by the whole) and registers it in sys.modules
under `<stage>_<key>`, so a stage and its parent load in one process, each module calling its
own stage's extern "C" launcher.

The flags are those torch.utils.cpp_extension would use for a with_cuda=False extension,
taken from its public helpers (include_paths, library_paths, get_cxx_compiler) and torch._C,
plus libcudart from the CUDA toolkit with an rpath.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import json
import platform
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from .errors import BuildError
from .includes import binding_headers
from .paths import binding_cache_dir
from .registry import Registry
from .toolchain import cuda_home

MODULE_INIT_NAME = "stagelab_binding"
COMPILE_TIMEOUT_S = 900
LINK_TIMEOUT_S = 300


@dataclass(frozen=True)
class BindingObject:
    """The family's compiled binding: `seconds` is what getting it cost this process (the
    compile, or the wait for another process compiling it, or nothing when cached)."""

    path: Path
    key: str
    cached: bool
    seconds: float


def _cxx_standard() -> str:
    """The standard cpp_extension compiles extensions with: C++20 from torch 2.12
    (pytorch/pytorch#176659; 2.13's headers need it), C++17 before."""
    import torch

    major, minor = (int(part) for part in re.match(r"(\d+)\.(\d+)", torch.__version__).groups())
    return "c++20" if (major, minor) >= (2, 12) else "c++17"


def _abi_flags() -> list[str]:
    """The ABI torch was built with. Older torch exported its pybind11 ABI strings
    (torch._C._PYBIND11_*), which cpp_extension then passed on; newer torch leaves that to
    pybind11 and exports none, so none are passed."""
    import torch

    flags = [f'-DPYBIND11_{name}="{value}"' for name in ("COMPILER_TYPE", "STDLIB", "BUILD_ABI")
             if (value := getattr(torch._C, f"_PYBIND11_{name}", None)) is not None]
    abi = getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", None)
    if abi is not None:
        flags.append(f"-D_GLIBCXX_USE_CXX11_ABI={int(abi)}")
    return flags


def compile_flags(registry: Registry) -> list[str]:
    """The compiler's flags for the binding, less the input and output."""
    from torch.utils import cpp_extension

    system_includes = [*cpp_extension.include_paths(), sysconfig.get_path("include", scheme="posix_prefix")]
    return [f"-DTORCH_EXTENSION_NAME={MODULE_INIT_NAME}", "-DTORCH_API_INCLUDE_EXTENSION_H", *_abi_flags(),
            "-fPIC", f"-std={_cxx_standard()}", "-O2",
            f"-I{registry.directory}", f"-I{cuda_home() / 'include'}",
            *(flag for include in system_includes for flag in ("-isystem", include))]


def cxx_compiler() -> str:
    from torch.utils import cpp_extension

    return cpp_extension.get_cxx_compiler()


def _compiler_identity(compiler: str) -> list[str]:
    """The compiler's resolved path and the first line of its --version."""
    try:
        out = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=60, check=False)
    except OSError as exc:
        raise BuildError(f"the C++ compiler {compiler!r} cannot be run", str(exc)) from exc
    return [shutil.which(compiler) or compiler, (out.stdout.splitlines() or ["unknown"])[0]]


def binding_key(registry: Registry, flags: list[str], compiler: str) -> str:
    """Everything that changes the object: the binding, the family's headers it includes, the flags
    (the family's folder left out, so a copy of the family shares it), torch, Python, compiler."""
    import torch

    digest = hashlib.sha256()
    for path in [registry.binding, *binding_headers(registry)]:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    digest.update(json.dumps({
        "flags": [flag.replace(str(registry.directory), "<family>") for flag in flags],
        "torch": torch.__version__,
        "python": platform.python_version(),
        "compiler": _compiler_identity(compiler),
    }).encode())
    return digest.hexdigest()[:16]


@contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    """One process at a time (pytest-xdist workers, `stagelab build -j`): the others wait,
    then find the object built."""
    with open(lock_path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _run_compiler(cmd: list[str], what: str, timeout_s: int) -> str:
    """Run the C++ compiler or linker; the log on success, a BuildError naming `what` on failure."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as exc:
        raise BuildError(f"{what} timed out after {timeout_s}s", str(exc.stdout or "")) from exc
    log = f"$ {' '.join(cmd)}\n{proc.stdout}{proc.stderr}"
    if proc.returncode != 0:
        raise BuildError(f"{what} failed (exit {proc.returncode})", log)
    return log


def compile_binding(registry: Registry) -> BindingObject:
    """The family's binding object: from the cache, or compiled once into it."""
    started = time.perf_counter()
    compiler = cxx_compiler()
    flags = compile_flags(registry)
    key = binding_key(registry, flags, compiler)
    final = binding_cache_dir() / registry.family / key
    obj = final / "binding.o"
    if obj.is_file():
        return BindingObject(obj, key, cached=True, seconds=time.perf_counter() - started)
    final.parent.mkdir(parents=True, exist_ok=True)
    with _exclusive(final.parent / f"{key}.lock"):
        if obj.is_file():  # another process compiled it while this one waited
            return BindingObject(obj, key, cached=True, seconds=time.perf_counter() - started)
        # built aside and renamed into place, so a killed compile never leaves a half object
        workdir = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=final.parent))
        try:
            cmd = [compiler, *flags, "-c", str(registry.binding), "-o", str(workdir / "binding.o")]
            log = _run_compiler(cmd, f"compiling the torch binding {registry.binding.name} of {registry.family}",
                                COMPILE_TIMEOUT_S)
            (workdir / "compile.log").write_text(log)
            workdir.rename(final)
        except BaseException:
            shutil.rmtree(workdir, ignore_errors=True)
            raise
    return BindingObject(obj, key, cached=False, seconds=time.perf_counter() - started)


def link_command(objects: list[Path], output: Path) -> list[str]:
    """cpp_extension's link of a with_cuda=False extension, plus libcudart: the binding needs
    only cudart, so torch's CUDA libraries stay out and one build links against any torch."""
    from torch.utils import cpp_extension

    lib64 = cuda_home() / "lib64"
    return [cxx_compiler(), "-shared", *map(str, objects), "-o", str(output),
            *(f"-L{path}" for path in cpp_extension.library_paths()), "-lc10", "-ltorch_cpu", "-ltorch",
            "-ltorch_python", f"-L{lib64}", "-lcudart", f"-Wl,-rpath,{lib64}"]


def link_module(binding: Path, stage_object: Path, output: Path, stage_id: str) -> str:
    """Link the binding and a stage's object into an importable module; the link's log."""
    return _run_compiler(link_command([binding, stage_object], output),
                         f"linking the torch binding with {stage_id}'s object", LINK_TIMEOUT_S)


def load_stage_module(name: str, path: Path) -> ModuleType:
    """Import a linked stage module under its unique `name` (e.g. <stage>_<key>)."""
    import torch  # noqa: F401  (loads libc10/libtorch that the module links against)

    if name in sys.modules:
        return sys.modules[name]
    # The loader calls PyInit_<the spec name's last part>: the fixed one every stage module
    # exports. The part before it keeps the name unique, as it must be: pybind11 caches
    # modules by spec name, and a second stage's import would otherwise return the first's.
    spec = importlib.util.spec_from_file_location(f"{name}.{MODULE_INIT_NAME}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[name] = module
    return module
