"""The stage registry (kernels/<family>/stages.yaml): load, validate, look up.

A stage is one source file (stem = stage id: a .cu file, or a Triton .py file for
`backend: triton`) plus what the lab needs to judge it: its backend, its parent,
compile options, target architectures, the hypothesis it tests,
the minimum gain over its parent that counts as a pass, and resource gates.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


from .errors import ConfigError
from .yaml_file import check_keys, read_yaml
from .family_sources import discover_families, family_source, selected_family
from .registry_fields import (DEFAULT_BACKEND, DEFAULT_KEYS, ID_RE, SOURCE_SUFFIXES, STAGE_KEYS, TOP_KEYS,
                              ResourceGates, parse_arch, parse_backend, parse_compile_options, parse_gates,
                              parse_input_kind, parse_min_gain)
from .space import SearchSpace, parse_search_space, parse_variants


@dataclass(frozen=True)
class Stage:
    id: str
    title: str
    parent: str | None
    source: Path
    defines: dict[str, str] = field(default_factory=dict)
    nvcc_flags: tuple[str, ...] = ()
    arch: tuple[str, ...] = ("sm_90a",)
    hypothesis: str = ""
    changes: str = ""
    min_gain: float = 0.0
    gates: ResourceGates = ResourceGates()
    # Candidate values of some defines, for `stagelab tune` (empty: the stage is not tuned).
    search_space: SearchSpace = SearchSpace()
    # Named sets of define overrides (`stagelab tune --promote-as NAME` writes one).
    variants: dict[str, dict[str, str]] = field(default_factory=dict)
    # The inputs the stage takes: "" = the family's standard ones, else one of its input_kinds
    # (stages.yaml `inputs: fp8`); the family checks and times the stage accordingly.
    input_kind: str = ""
    # Problem features beyond the family's plain problem the stage takes (stages.yaml `supports:`, the
    # family's problem_features, e.g. sdpa's [gqa, cross_length, bshd]); none by default: the lab skips
    # a problem that needs another, before any launch.
    supports: tuple[str, ...] = ()
    # How it is built (registry_fields.SOURCE_SUFFIXES): "cuda" (nvcc and the family's binding),
    # "triton" or "cute" (core.build_triton, core.build_cute; their defines set the file's KNOBS).
    backend: str = DEFAULT_BACKEND

    def with_defines(self, overrides: dict[str, Any] | None) -> "Stage":
        """A copy with knob overrides (e.g. a notebook sweeping BLOCK_N)."""
        if not overrides:
            return self
        merged = dict(self.defines)
        merged.update({str(k): str(v) for k, v in overrides.items()})
        return Stage(**{**self.__dict__, "defines": merged})

    def variant(self, name: str) -> "Stage":
        """The stage with a named variant's defines."""
        if name not in self.variants:
            raise ConfigError(f"stage {self.id} has no variant {name!r}; known: {sorted(self.variants) or 'none'}")
        return self.with_defines(self.variants[name])


@dataclass(frozen=True)
class Registry:
    family: str
    directory: Path
    binding: Path | None  # None in a family without cuda stages: only they link a binding
    stages: dict[str, Stage]

    def get(self, stage_id: str) -> Stage:
        if stage_id not in self.stages:
            known = ", ".join(self.stages) or "none"
            raise ConfigError(f"unknown stage {stage_id!r} in {self.directory / 'stages.yaml'}; known: {known}")
        return self.stages[stage_id]

    def lineage(self, stage_id: str) -> list[str]:
        """The stage and its ancestors, nearest first."""
        chain, current = [], stage_id
        while current is not None:
            if current in chain:
                raise ConfigError(f"stage {stage_id}: its parents form a cycle through {current}")
            chain.append(current)
            current = self.get(current).parent
        return chain

    def header_files(self) -> list[Path]:
        """Shared headers, in the family's folder and its subfolders (a family's parts may live in
        folders of their own, kernels/sdpa/sched/): a cuda stage's build hash covers those it can include
        (core.includes), and all of them where that cannot be known."""
        return sorted(p for p in self.directory.rglob("*") if p.suffix in {".h", ".cuh", ".hpp"} and p.is_file()
                      and not any(part.startswith(".") for part in p.relative_to(self.directory).parts))


def family_registry(family: str) -> Registry:
    """The registry (stages.yaml) of a family found by name (core.family_sources)."""
    source = family_source(family)
    registry = load_registry(source.stages_yaml)
    if registry.family != source.name:
        raise ConfigError(f"{source.stages_yaml}: family: {registry.family!r}, but the family is found as "
                          f"{source.name!r} ({source.origin}); the folder and stages.yaml must agree")
    return registry


def all_registries() -> dict[str, Registry]:
    """Every family's registry, by family name. Stage ids are scoped by family: two families may
    share one, and find_stage then asks which."""
    return {name: family_registry(name) for name in discover_families()}


def find_stage(stage_id: str, family: str | None = None) -> tuple[Registry, Stage]:
    """The registry that holds a stage, and the stage: in `family` when given, else in whichever
    family has it (or the one `--family` selected); an id that two families share is an error
    that names them."""
    family = family or selected_family()
    if family:
        registry = family_registry(family)
        return registry, registry.get(stage_id)
    registries = all_registries()
    holders = [registry for registry in registries.values() if stage_id in registry.stages]
    if len(holders) > 1:
        names = " and ".join(r.family for r in holders)
        raise ConfigError(f"stage id {stage_id!r} is in the families {names}; pick one with --family")
    if holders:
        return holders[0], holders[0].stages[stage_id]
    known = ", ".join(s for r in registries.values() for s in r.stages) or "none"
    raise ConfigError(f"unknown stage {stage_id!r}; known: {known}")


def _read_yaml(path: Path) -> dict:
    raw = read_yaml(path, f"stage registry not found: {path}")
    return check_keys(str(path), raw, TOP_KEYS)


def _defaults(path: Path, raw: dict) -> Stage:
    """The file's defaults, as a template Stage every entry starts from."""
    defaults = check_keys(f"{path}: defaults", raw.get("defaults") or {}, DEFAULT_KEYS)
    defines, flags = parse_compile_options(f"{path}: defaults", defaults.get("compile_options") or {})
    backend = parse_backend(f"{path}: defaults", defaults.get("backend", DEFAULT_BACKEND))
    return Stage(id="", title="", parent=None, source=path, defines=defines, nvcc_flags=flags, backend=backend,
                 arch=parse_arch(f"{path}: defaults", defaults.get("arch", ["sm_90a"])),
                 min_gain=parse_min_gain(f"{path}: defaults", defaults.get("min_gain", 0.0)),
                 gates=parse_gates(f"{path}: defaults", defaults.get("gates") or {}, ResourceGates()))


def _stage(path: Path, index: int, entry: Any, base: Stage) -> Stage:
    where = f"{path}: stages[{index}]"
    entry = check_keys(where, entry, STAGE_KEYS)
    stage_id = entry.get("id")
    if not isinstance(stage_id, str) or not ID_RE.match(stage_id):
        raise ConfigError(f"{where}: 'id' must be a name of letters, digits and underscores")
    where = f"{path}: stage {stage_id}"
    backend = parse_backend(where, entry["backend"]) if "backend" in entry else base.backend
    source = path.parent / f"{stage_id}{SOURCE_SUFFIXES[backend]}"
    if not source.is_file():
        raise ConfigError(f"{where}: source file {source.name} does not exist in {path.parent} "
                          f"(a {backend} stage's source is <id>{SOURCE_SUFFIXES[backend]})")
    defines, flags = parse_compile_options(where, entry.get("compile_options") or {})
    defines = {**base.defines, **defines}
    if backend != "cuda" and flags:
        raise ConfigError(f"{where}.compile_options.nvcc_flags: a {backend} stage is not built by nvcc")
    return Stage(
        id=stage_id,
        title=str(entry.get("title") or stage_id),
        parent=entry.get("parent"),
        source=source,
        defines=defines,
        # The defaults' nvcc flags are for the family's cuda stages; a stage of another backend has none.
        nvcc_flags=base.nvcc_flags + flags if backend == "cuda" else (),
        arch=parse_arch(where, entry["arch"]) if "arch" in entry else base.arch,
        hypothesis=str(entry.get("hypothesis") or "").strip(),
        changes=str(entry.get("changes") or "").strip(),
        min_gain=parse_min_gain(where, entry["min_gain"]) if "min_gain" in entry else base.min_gain,
        gates=parse_gates(where, entry.get("gates") or {}, base.gates),
        search_space=parse_search_space(where, entry.get("search_space"), defines),
        variants=parse_variants(where, entry.get("variants"), defines),
        input_kind=parse_input_kind(where, entry.get("inputs")),
        supports=_supports(where, entry.get("supports")),
        backend=backend,
    )


def _supports(where: str, raw: Any) -> tuple[str, ...]:
    """Names only; the family checks they are its problem features (core.supports.require_supports)."""
    names = raw or []
    if not isinstance(names, list) or not all(isinstance(n, str) and ID_RE.match(n) for n in names):
        raise ConfigError(f"{where}.supports: expected a list of problem features like [gqa, bshd], got {raw!r}")
    return tuple(names)


def _binding(path: Path, raw: dict, stages: dict[str, Stage]) -> Path | None:
    """The family's torch binding: needed when a stage is cuda, or when the file names one."""
    if "binding" not in raw and all(s.backend != "cuda" for s in stages.values()):
        return None
    binding = path.parent / raw.get("binding", "binding.cpp")
    if not binding.is_file():
        raise ConfigError(f"{path}: binding file {binding.name} does not exist in {path.parent}")
    return binding


def load_registry(path: Path | str) -> Registry:
    """Read and validate a stages.yaml; every error names the file and the key."""
    path = Path(path)
    raw = _read_yaml(path)
    entries = raw.get("stages")
    if not isinstance(entries, list) or not entries:
        raise ConfigError(f"{path}: 'stages' must be a non-empty list")
    base = _defaults(path, raw)
    stages: dict[str, Stage] = {}
    for index, entry in enumerate(entries):
        stage = _stage(path, index, entry, base)
        if stage.id in stages:
            raise ConfigError(f"{path}: stage {stage.id}: duplicate stage id")
        stages[stage.id] = stage
    for stage in stages.values():
        if stage.parent is not None and stage.parent not in stages:
            raise ConfigError(f"{path}: stage {stage.id}: parent {stage.parent!r} is not a stage in this registry")
    registry = Registry(family=raw.get("family") or path.parent.name, directory=path.parent,
                        binding=_binding(path, raw, stages), stages=stages)
    for stage in stages.values():
        try:
            registry.lineage(stage.id)
        except ConfigError as exc:
            raise ConfigError(f"{path}: {exc}") from exc
    return registry
