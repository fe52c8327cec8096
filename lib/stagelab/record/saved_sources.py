"""The sources a stage run keeps with its record: everything its source hash covers (core.sources),
and the stage read as a diff against its parent."""

from __future__ import annotations

import difflib
import shutil
import tempfile
from pathlib import Path

from . import tracking
from ..core.context import StageContext
from ..core.includes import stage_sources
from ..core.sources import family_package_dir, result_python_files


def source_diff(parent: Path, stage: Path) -> str:
    """`diff -u parent.cu stage.cu`: the stage read as a change to its parent."""
    return "".join(difflib.unified_diff(parent.read_text().splitlines(keepends=True),
                                        stage.read_text().splitlines(keepends=True),
                                        fromfile=f"kernels/{parent.parent.name}/{parent.name}",
                                        tofile=f"kernels/{stage.parent.name}/{stage.name}"))


def diff_name(parent_id: str, stage_id: str) -> str:
    """`.txt` last: the MLflow UI previews only extensions it knows as text, and `.diff` is not one."""
    return f"{parent_id}_to_{stage_id}.diff.txt"


def log_family_python(run_id: str, ctx: StageContext) -> None:
    """The family's Python in one upload under source/python/, its package's layout kept (sdpa/ and
    sdpa/fp8/ both hold a contenders.py)."""
    package = family_package_dir(ctx.family)
    with tempfile.TemporaryDirectory(prefix="stagelab-python-") as folder:
        for path in result_python_files(ctx.registry, ctx.family):
            copy = Path(folder) / path.relative_to(package)
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, copy)
        tracking.log_artifacts(run_id, folder, "source/python")


def log_sources(run_id: str, ctx: StageContext, scratch: Path) -> None:
    """The stage, the family's headers its build hash covers (a cuda stage: those it and the binding
    include, core.includes) and the binding under source/, the family's Python under source/python/,
    and the diff against the parent (written in `scratch` on the way)."""
    files = (stage_sources(ctx.stage, ctx.registry) if ctx.stage.backend == "cuda"
             else [ctx.stage.source, *ctx.registry.header_files(), ctx.registry.binding])
    for path in files:
        # a header in a subfolder of the family (sched/...) keeps its folder under source/
        folder = path.parent.relative_to(ctx.registry.directory) if path.parent != ctx.registry.directory else None
        tracking.log_artifact(run_id, path, f"source/{folder.as_posix()}" if folder else "source")
    log_family_python(run_id, ctx)
    if ctx.parent is not None:
        diff = scratch / diff_name(ctx.parent.id, ctx.stage.id)
        diff.write_text(source_diff(ctx.parent.source, ctx.stage.source))
        tracking.log_artifact(run_id, diff, "source")
        diff.unlink()
