"""What a run records about itself when it starts: its parameters and where it ran."""

from __future__ import annotations

import os

from ..core import metrics
from ..core.envinfo import git_state, gpu_info, software_versions
from ..core.paths import repo_root
from ..core.context import StageContext
from ..measure.sampling import timing_order


def _relative(path) -> str:
    return str(path.relative_to(repo_root())) if path.is_relative_to(repo_root()) else str(path)


def run_params(ctx: StageContext) -> dict[str, object]:
    p, stage = ctx.params, ctx.stage
    return {
        "stage": stage.id,
        "family": ctx.family.name,
        "params_file": _relative(p.path),
        "dtypes": ",".join(p.dtypes),
        "seeds": ",".join(map(str, p.seeds)),
        "distributions": ",".join(p.distributions),
        "shapes": ";".join(s.tag for s in p.shapes),
        "mission_shape": p.mission.tag,
        "timing_dtype": p.timing.dtype,
        "repetitions": p.timing.repetitions,
        "warmup": p.timing.warmup,
        "timing_modes": ",".join(p.timing.modes),
        # runs without it (before 2026-11-26) timed each contender's repetitions in one block
        "timing_order": timing_order(p.timing.visits),
        # runs without it (before 2026-11-30) took every repetition of every contender
        **({"seconds_per_contender": p.timing.seconds_per_contender} if p.timing.seconds_per_contender else {}),
        "contenders": ",".join(p.timing.contenders),
        "min_gain": stage.min_gain,
        "arch": ",".join(stage.arch),
        **{f"knob.{k}": v for k, v in sorted(stage.defines.items())},
    }


def run_tags(ctx: StageContext) -> dict[str, str]:
    stage = ctx.stage
    git = git_state()
    return {
        metrics.TAG_STAGE: stage.id,
        "family": ctx.family.name,
        "parent": stage.parent or "none",
        "title": stage.title,
        metrics.TAG_OUTCOME: metrics.OUTCOME_RUNNING,
        "mlflow.note.content": f"### {stage.title}\n\n{stage.hypothesis}",
        "mlflow.source.name": f"notebooks/{stage.id}.ipynb",
        "mlflow.source.type": "NOTEBOOK",
        "mlflow.source.git.commit": git["git_commit"],
        **git,
        **software_versions(),
        **(gpu_info() or {"gpu": "none"}),
        # Which GPU this process was given (stagelab run --gpus binds one per notebook): read here,
        # in the notebook's own process, so the record shows what the kernel really ran under.
        metrics.TAG_CUDA_VISIBLE_DEVICES: os.environ.get("CUDA_VISIBLE_DEVICES", metrics.CUDA_VISIBLE_DEVICES_UNSET),
    }
