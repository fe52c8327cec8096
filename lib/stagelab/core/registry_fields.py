"""One stages.yaml entry, field by field: allowed keys, the build backend, resource gates,
architectures, compile options, min_gain and input kind. Every error names the file, the stage and
the key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .errors import ConfigError
from .yaml_file import check_keys

TOP_KEYS = {"family", "binding", "defaults", "stages"}
STAGE_KEYS = {"id", "title", "parent", "changes", "backend", "compile_options", "arch", "hypothesis", "min_gain",
              "gates", "search_space", "variants", "inputs", "supports"}
DEFAULT_KEYS = {"backend", "compile_options", "arch", "min_gain", "gates"}
# How a stage is built (stages.yaml `backend:`, cuda unless said), and the suffix of its source
# file <stage id><suffix>: nvcc with the family's torch binding, a Triton file (core.build_triton) or a
# CuTe DSL file (core.build_cute).
SOURCE_SUFFIXES = {"cuda": ".cu", "triton": ".py", "cute": ".py"}
DEFAULT_BACKEND = "cuda"
_COMPILE_KEYS = {"defines", "nvcc_flags"}
_GATE_KEYS = {"max_registers", "max_shared_memory_bytes", "spills_allowed", "sass_require", "sass_forbid",
              "ptxas_forbid", "ncu", "helper_kernels"}
# Nsight Compute gates (`ncu: {tensor_util_min: 0.5}`): each a fraction of peak every profiled problem must reach.
NCU_GATE_KEYS = ("tensor_util_min", "dram_throughput_min", "occupancy_min", "l2_hit_rate_min")
_ADVISORY_CODE_RE = re.compile(r"^C\d{4}$")
# An opcode (LDG: every form of it) or one instruction form, the opcode with its modifiers (LDG.E.128).
_OPCODE_RE = re.compile(r"^[A-Z][A-Z0-9_]*(\.[A-Za-z0-9_]+)*$")
_ARCH_RE = re.compile(r"^sm_\d{2,3}a?$")
ID_RE = re.compile(r"^[A-Za-z0-9_]+$")


@dataclass(frozen=True)
class ResourceGates:
    """Limits a stage's ptxas report must meet; None means unchecked."""

    max_registers: int | None = None
    max_shared_memory_bytes: int | None = None
    spills_allowed: bool = False
    # SASS opcodes every kernel instance must contain (e.g. HGMMA) and must not (e.g. LDL, STL); a name with
    # modifiers (LDG.E.128) is that instruction form alone, a bare opcode any of its forms (core.sass.opcode_count).
    sass_require: tuple[str, ...] = ()
    sass_forbid: tuple[str, ...] = ()
    # ptxas advisory codes no kernel instance may draw (e.g. C7514: wgmma serialized).
    ptxas_forbid: tuple[str, ...] = ()
    # Nsight Compute gates, (key in NCU_GATE_KEYS, fraction of peak); judged when the stage is profiled.
    ncu: tuple[tuple[str, float], ...] = ()
    # Kernel function names (unqualified, e.g. transpose_v_kernel) of a stage's helper kernels, such as
    # a layout pre-pass: exempt from sass_require (they do not run the main loop); every other gate holds.
    helper_kernels: tuple[str, ...] = ()


def parse_gates(where: str, raw: dict, base: ResourceGates) -> ResourceGates:
    raw = check_keys(f"{where}.gates", raw, _GATE_KEYS)
    values = dict(base.__dict__)
    for key in ("max_registers", "max_shared_memory_bytes"):
        if key in raw:
            value = raw[key]
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value <= 0):
                raise ConfigError(f"{where}.gates.{key}: expected a positive integer or null, got {value!r}")
            values[key] = value
    if "spills_allowed" in raw:
        if not isinstance(raw["spills_allowed"], bool):
            raise ConfigError(f"{where}.gates.spills_allowed: expected true or false")
        values["spills_allowed"] = raw["spills_allowed"]
    for key in ("sass_require", "sass_forbid"):
        if key in raw:
            opcodes = raw[key] or []
            if not isinstance(opcodes, list) or not all(isinstance(o, str) and _OPCODE_RE.match(o) for o in opcodes):
                raise ConfigError(f"{where}.gates.{key}: expected a list of SASS opcodes like [HGMMA] "
                                  f"or instruction forms like [LDG.E.128], got {opcodes!r}")
            values[key] = tuple(opcodes)
    if "ptxas_forbid" in raw:
        codes = raw["ptxas_forbid"] or []
        if not isinstance(codes, list) or not all(isinstance(c, str) and _ADVISORY_CODE_RE.match(c) for c in codes):
            raise ConfigError(f"{where}.gates.ptxas_forbid: expected a list of ptxas codes like [C7514], got {codes!r}")
        values["ptxas_forbid"] = tuple(codes)
    if "ncu" in raw:
        values["ncu"] = parse_ncu_gates(where, raw["ncu"])
    if "helper_kernels" in raw:
        names = raw["helper_kernels"] or []
        if not isinstance(names, list) or not all(isinstance(n, str) and ID_RE.match(n) for n in names):
            raise ConfigError(f"{where}.gates.helper_kernels: expected a list of kernel function names, got {names!r}")
        values["helper_kernels"] = tuple(names)
    return ResourceGates(**values)


def parse_ncu_gates(where: str, raw: Any) -> tuple[tuple[str, float], ...]:
    raw = check_keys(f"{where}.gates.ncu", raw or {}, set(NCU_GATE_KEYS))
    for key, value in raw.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
            raise ConfigError(f"{where}.gates.ncu.{key}: expected a fraction of peak in (0, 1], got {value!r}")
    return tuple(sorted((key, float(value)) for key, value in raw.items()))


def parse_backend(where: str, raw: Any) -> str:
    if not isinstance(raw, str) or raw not in SOURCE_SUFFIXES:
        raise ConfigError(f"{where}.backend: expected one of {sorted(SOURCE_SUFFIXES)}, got {raw!r}")
    return raw


def parse_arch(where: str, raw: Any) -> tuple[str, ...]:
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"{where}.arch: expected a non-empty list like [sm_90a]")
    for arch in raw:
        if not isinstance(arch, str) or not _ARCH_RE.match(arch):
            raise ConfigError(f"{where}.arch: {arch!r} is not an architecture like sm_90a")
    return tuple(raw)


def parse_compile_options(where: str, raw: dict) -> tuple[dict[str, str], tuple[str, ...]]:
    raw = check_keys(f"{where}.compile_options", raw, _COMPILE_KEYS)
    defines = raw.get("defines") or {}
    if not isinstance(defines, dict):
        raise ConfigError(f"{where}.compile_options.defines: expected a mapping NAME: value")
    flags = raw.get("nvcc_flags") or []
    if not isinstance(flags, list) or not all(isinstance(f, str) for f in flags):
        raise ConfigError(f"{where}.compile_options.nvcc_flags: expected a list of strings")
    return {str(k): str(v) for k, v in defines.items()}, tuple(flags)


def parse_min_gain(where: str, raw: Any) -> float:
    # Negative: a stage whose gain is generality (new problems) may lose that much on its parent's.
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or raw <= -1:
        raise ConfigError(f"{where}.min_gain: expected a number above -1 (0.05: at least 5% faster than the "
                          "parent; -0.03: at most 3% slower, for a stage that takes new problems)")
    return float(raw)


def parse_input_kind(where: str, raw: Any) -> str:
    if raw is None:
        return ""
    if not isinstance(raw, str) or not ID_RE.match(raw):
        raise ConfigError(f"{where}.inputs: expected the name of one of the family's input kinds (e.g. fp8), "
                          f"got {raw!r}")
    return raw
