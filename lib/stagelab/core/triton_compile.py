"""Triton's ahead-of-time compile of one compile spec for one architecture, and ptxas's resource
report on it: what core.build_triton files as a kernel instance. Neither needs a GPU.

The report comes from a ptxas --verbose run of our own on Triton's PTX (core.ptxas_replay: Triton
keeps its own run's report to itself), with the flags that reproduce Triton's cubin byte for byte,
tried in turn; the build records whether one did.
"""

from __future__ import annotations

import re
import traceback
from pathlib import Path

from .errors import BuildError
from .ptxas_replay import ptx_target, replay
from .registry import Stage
from .toolchain import cuda_home

WARP_SIZE = 32
# Triton's own ptxas flags (make_cubin in triton/backends/nvidia/compiler.py) by version; the first
# set that reproduces its cubin is the one whose report the lab reads.
PTXAS_FLAG_SETS = (("-lineinfo", "--regAllocOptLevel=2"), ("-lineinfo",))


def capability(arch: str) -> int:
    """sm_90a -> 90: the compute capability Triton targets (it adds the `a` itself from 90 on)."""
    return int(re.match(r"sm_(\d+)", arch)[1])


def _ast_source(spec: dict):
    """Triton's ASTSource; constexprs keyed by argument path ((index,)), or by name where a Triton
    takes only names."""
    from triton.compiler import ASTSource

    kernel, signature, constexprs = spec["kernel"], spec["signature"], spec.get("constexprs") or {}
    divisible = spec.get("divisible_by_16", [a for a, t in signature.items() if str(t).startswith("*")])
    attrs = {(kernel.arg_names.index(a),): [["tt.divisibility", 16]] for a in divisible}
    try:
        return ASTSource(kernel, signature, {(kernel.arg_names.index(k),): v for k, v in constexprs.items()}, attrs)
    except (TypeError, AssertionError, KeyError):
        return ASTSource(kernel, signature, dict(constexprs), attrs)


def aot_compile(stage: Stage, spec: dict, label: str, arch: str):
    """Triton's CompiledKernel of one spec for one architecture; no GPU needed."""
    import triton
    from triton.backends.compiler import GPUTarget

    options = {k: spec[k] for k in ("num_warps", "num_stages") if k in spec} | dict(spec.get("options") or {})
    try:
        return triton.compile(_ast_source(spec), target=GPUTarget("cuda", capability(arch), WARP_SIZE),
                              options=options)
    except Exception as exc:
        raise BuildError(f"Triton could not compile {label} of {stage.source} for {arch}: {type(exc).__name__}",
                         traceback.format_exc()) from exc


def ptxas_binary(cc: int) -> str:
    """The ptxas Triton itself runs for this capability, else the CUDA toolkit's."""
    try:
        from triton.backends.nvidia import compiler as nvidia
    except ImportError:
        nvidia = None
    get_ptxas = getattr(nvidia, "get_ptxas", None)
    if get_ptxas is not None:
        try:
            tool = get_ptxas(cc)
        except TypeError:  # a Triton with one ptxas for every architecture
            tool = get_ptxas()
        if getattr(tool, "path", None):
            return tool.path
    bundled = Path(nvidia.__file__).parent / "bin" / "ptxas" if nvidia else None
    for candidate in (bundled, cuda_home() / "bin" / "ptxas"):
        if candidate is not None and candidate.is_file():
            return str(candidate)
    raise BuildError("no ptxas found for the Triton build", "neither Triton's bundled ptxas nor $CUDA_HOME/bin/ptxas")


def ptxas_report(compiled, ptx: Path) -> tuple[str, bool]:
    """ptxas --verbose's report on the PTX, and whether that run reproduced Triton's cubin."""
    metadata = compiled.metadata
    extra = [] if getattr(metadata, "enable_fp_fusion", True) else ["--fmad=false"]
    extra += (getattr(metadata, "ptx_options", None) or "").split()
    tool = ptxas_binary(capability(ptx_target(ptx)))
    return replay(ptx, compiled.asm["cubin"], [[tool, *flags, *extra] for flags in PTXAS_FLAG_SETS], "Triton")
