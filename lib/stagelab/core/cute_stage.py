"""A CuTe DSL stage's compile specs (`backend: cute`): what its file's compile_specs() returns,
checked. The file itself is loaded as every Python stage is (core.python_stage: KNOBS, the
required functions, a module per build).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from . import python_stage
from .errors import BuildError
from .registry import Stage

# One compile_specs() entry: `function` (a @cute.jit host function, which launches the stage's
# @cute.kernel) and `args` (what cute.compile takes after it: fake tensors from
# cutlass.cute.runtime.make_fake_compact_tensor, make_fake_stream(), Constexpr values) are required;
# `name` names the kernel instance, as a template argument names a CUDA one; `options` passes further
# cute.compile options ("--generate-line-info", "--ptxas-options=..."); `dynamic_shared_memory_bytes`
# is the smem= its launch passes (the compiled object does not tell), added to the gate's sum.
SPEC_KEYS = {"function", "args", "name", "options", "dynamic_shared_memory_bytes"}
REQUIRED_SPEC_KEYS = ("function", "args")
# Options the lab sets itself for the build: the architecture, and the PTX and cubin kept in its folder.
LAB_OPTIONS = ("--gpu-arch", "--keep-ptx", "--keep-cubin", "--dump-dir")
LANGUAGE = "CuTe DSL"


def _check_spec(where: str, spec: Any) -> dict:
    spec = python_stage.check_spec_keys(where, spec, SPEC_KEYS, REQUIRED_SPEC_KEYS)
    function = spec["function"]
    # CuTe marks what it decorates ("jit", "kernel"); any other callable goes on, for cute.compile to judge
    if not callable(function) or getattr(function, "_decorator_kind", "jit") != "jit":
        raise BuildError(f"{where}: 'function' is not a @cute.jit function",
                         f"{function!r}: give the @cute.jit host function that launches the @cute.kernel")
    if not isinstance(spec["args"], (list, tuple)):
        raise BuildError(f"{where}: 'args' must be a list of the arguments cute.compile takes after the function",
                         repr(spec["args"]))
    options = spec.get("options", "")
    if not isinstance(options, str) or any(option in options for option in LAB_OPTIONS):
        raise BuildError(f"{where}: 'options' must be a string of cute.compile options other than {list(LAB_OPTIONS)}",
                         f"{options!r}: the lab sets those for the build")
    smem = spec.get("dynamic_shared_memory_bytes", 0)
    if not isinstance(smem, int) or isinstance(smem, bool) or smem < 0:
        raise BuildError(f"{where}: 'dynamic_shared_memory_bytes' must be a whole number of bytes", repr(smem))
    return spec


def compile_specs(stage: Stage, module: ModuleType) -> list[dict]:
    """The file's compile_specs(), each entry checked."""
    return python_stage.compile_specs(stage, module, _check_spec)
