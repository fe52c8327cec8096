"""A Triton stage's compile specs (`backend: triton`): what its file's compile_specs() returns,
checked. The file itself is loaded as every Python stage is (core.python_stage: KNOBS, the
required functions, a module per build).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from . import python_stage
from .errors import BuildError
from .registry import Stage

# One compile_specs() entry: `kernel` (a @triton.jit function) and its `signature` ({argument: type},
# constexprs as "constexpr") are required; `constexprs` gives their values; `name` names the kernel
# instance (letters, digits, underscores), as a template argument names a CUDA one; `options` passes
# further triton.compile options (e.g. maxnreg); `divisible_by_16` lists the arguments compiled as
# multiples of 16 (default: every pointer, as Triton's launcher specializes torch's allocations).
SPEC_KEYS = {"kernel", "signature", "constexprs", "num_warps", "num_stages", "name", "options", "divisible_by_16"}
REQUIRED_SPEC_KEYS = ("kernel", "signature")
LANGUAGE = "Triton"


def _check_spec(where: str, spec: Any) -> dict:
    spec = python_stage.check_spec_keys(where, spec, SPEC_KEYS, REQUIRED_SPEC_KEYS)
    kernel = spec["kernel"]
    if not hasattr(kernel, "arg_names"):
        raise BuildError(f"{where}: 'kernel' is not a @triton.jit function", repr(kernel))
    for field, kind in (("signature", dict), ("constexprs", dict), ("divisible_by_16", list)):
        named = spec.get(field, kind())
        if not isinstance(named, kind):
            raise BuildError(f"{where}: '{field}' must be a {kind.__name__} of argument names", repr(named))
        stray = sorted(set(named) - set(kernel.arg_names))
        if stray:
            raise BuildError(f"{where}: '{field}' names {stray}, not arguments of {kernel.__name__}",
                             f"its arguments: {kernel.arg_names}")
    return spec


def compile_specs(stage: Stage, module: ModuleType) -> list[dict]:
    """The file's compile_specs(), each entry checked."""
    return python_stage.compile_specs(stage, module, _check_spec)
