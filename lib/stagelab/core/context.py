"""What one stage run is about: the stage, its parent, the parameters, the family, the device.

Every step takes it (the measuring steps, the child process that profiles or sanitizes a
stage, the recorder, the tuner); it reads the registry and the parameter file and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from .errors import ConfigError
from .family import Family
from .params import RunParams, load_params, with_steps
from .paths import resolve_params_path
from .family_sources import family_folders, selected_family
from .knobs import check_defines, check_variant
from .registry import Registry, Stage, family_registry, find_stage
from .supports import require_supports


@dataclass
class StageContext:
    """What a run is about: the stage, its parent, the parameters, the family, the device."""

    registry: Registry
    stage: Stage
    parent: Stage | None
    params: RunParams
    gpu_available: bool

    @property
    def family(self) -> Family:
        return self.params.family

    @property
    def device(self) -> torch.device:
        return torch.device("cuda" if self.gpu_available else "cpu")

    @classmethod
    def load(cls, stage_id: str, params: str | Path, defines: dict | str | None = None,
             steps: str | list[str] | None = None, family: str | None = None) -> "StageContext":
        """Reads the registry and the parameter file; no build, no store, no subprocess.
        `defines`: overrides of the stage's defines, or the name of one of its variants;
        `steps`: the optional steps to run instead of the file's (params.with_steps);
        `family`: the stage's family (None: the selected one, else the parameter file's where it
        holds the stage, else whichever family does)."""
        family = family or selected_family()
        run_params = load_params(resolve_params_path(params, *family_folders(family)))
        registry = family_registry(family or run_params.family.name)
        if registry.family == family or stage_id in registry.stages:
            stage = registry.get(stage_id)
        else:  # not in the parameter file's family: whichever family holds it (or a clear error)
            registry, stage = find_stage(stage_id)
        if isinstance(defines, str):
            check_variant(stage, registry, defines, "defines")
            stage, defines = stage.variant(defines), None
        elif defines:
            check_defines(stage, registry, defines, "defines")
        if steps is not None:
            run_params = with_steps(run_params, steps)
        if run_params.family.name != registry.family:
            raise ConfigError(f"stage {stage_id} is in the {registry.family} family, but "
                              f"{run_params.path} describes {run_params.family.name} problems")
        parent = registry.get(stage.parent) if stage.parent else None
        for declared in (stage, parent):
            if declared is not None:
                require_supports(run_params.family, f"stage {declared.id}", declared.supports)
        return cls(registry, stage.with_defines(defines), parent, run_params, torch.cuda.is_available())
