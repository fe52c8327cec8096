"""A built stage launched in a child process, for the tools that wrap a whole process
(compute-sanitizer, Nsight Compute). The child builds the stage (a cache hit after the run's own
build), launches it on the problems asked for inside an NVTX range, and exits:

    python -m stagelab.measure.launch STAGE --params FILE --problem TAG   # one launch, for ncu
    python -m stagelab.measure.launch STAGE --params FILE --sanitize      # the family's sanitize problems

`--defines JSON` passes the run's knobs, so the child builds the very configuration the run judges.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

# The sanitizers and the profiler are looked up on PATH, then in the CUDA toolkit.
TOOL_FOLDERS = ("bin", "compute-sanitizer", "nsight-compute")
# Two launches per input for the sanitizers: the second sees buffers the first left behind.
SANITIZE_LAUNCHES = 2
PROFILE_LAUNCHES = 1
LIB_DIR = Path(__file__).resolve().parents[1]


def nvtx_range(stage_id: str, problem_tag: str) -> str:
    return f"stagelab/{stage_id}/{problem_tag}"


def find_tool(name: str) -> str | None:
    """The tool's path, or None when neither PATH nor the CUDA toolkit (toolchain.cuda_home) has it."""
    from ..core.toolchain import cuda_home
    from ..core.errors import BuildError

    found = shutil.which(name)
    if found:
        return found
    try:
        home = cuda_home()
    except BuildError:
        return None
    for folder in TOOL_FOLDERS:
        candidate = home / folder / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def child_command(ctx, *mode: str) -> list[str]:
    """`python -m stagelab.measure.launch` for the run's stage, parameter file and knobs."""
    return [sys.executable, "-m", "stagelab.measure.launch", ctx.stage.id, "--params", str(ctx.params.path.resolve()),
            "--defines", json.dumps(ctx.stage.defines, sort_keys=True), *mode]


def child_environment(**extra: str) -> dict[str, str]:
    """This process's environment, with the checkout and the library the child must find."""
    from ..core.paths import repo_root

    path = os.pathsep.join(filter(None, [str(LIB_DIR), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "STAGELAB_ROOT": str(repo_root()), "PYTHONPATH": path, **extra}


def run_under_tool(command: list[str], timeout_s: float, env: dict[str, str]) -> tuple[int | None, str]:
    """Run a tool (and the child it wraps) in a session of its own; stdout and stderr together.
    The return code is None when it ran past `timeout_s` (the whole process tree is then stopped)."""
    import subprocess

    from ..core.stopping import stop_tree

    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env=env, start_new_session=True)
    try:
        output, _ = process.communicate(timeout=timeout_s)
        return process.returncode, output
    except subprocess.TimeoutExpired:
        stop_tree(process.pid)
        output, _ = process.communicate()
        return None, output


def profile_problems(ctx) -> list:
    """The mission problem and the largest (by FLOPs) problem of the family's long parameter file,
    or of the run's own file when the family has none."""
    from ..core.params import load_params
    from ..core.paths import resolve_params_path

    family = ctx.family
    pool = load_params(resolve_params_path(family.long_params)).timed_shapes() if family.long_params \
        else ctx.params.timed_shapes()
    longest = max(pool, key=lambda problem: problem.flops())
    return [ctx.params.mission] + ([longest] if longest != ctx.params.mission else [])


def sanitize_problems(family) -> list:
    return [p for entry in family.sanitize_problems for p in family.parse_problem("sanitize", entry)]


def _launches(ctx, args) -> list[tuple]:
    """(problem, dtype, launches) for the mode asked for."""
    family = ctx.family
    if args.sanitize:
        return [(p, dtype, SANITIZE_LAUNCHES) for p in sanitize_problems(family) for dtype in family.dtypes.values()]
    known = {p.tag: p for p in [*ctx.params.timed_shapes(), *profile_problems(ctx)]}
    if args.problem not in known:
        raise SystemExit(f"unknown problem {args.problem!r}; known: {sorted(known)}")
    return [(known[args.problem], family.torch_dtype(ctx.params.timing.dtype), PROFILE_LAUNCHES)]


def main(argv: list[str] | None = None) -> int:
    import torch

    from ..core.build import build_stage
    from ..core.context import StageContext

    parser = argparse.ArgumentParser(prog="python -m stagelab.measure.launch", description=__doc__)
    parser.add_argument("stage")
    parser.add_argument("--params", required=True)
    parser.add_argument("--defines", default=None, help="the stage's defines as JSON")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--problem", help="tag of one problem to launch once")
    mode.add_argument("--sanitize", action="store_true", help="the family's sanitize problems, every dtype")
    args = parser.parse_args(argv)
    ctx = StageContext.load(args.stage, args.params, json.loads(args.defines) if args.defines else None)
    family = ctx.family
    kernel = family.stage_kernel(build_stage(ctx.stage, ctx.registry).module, ctx.stage.id, ctx.stage.input_kind)
    for problem, dtype, launches in _launches(ctx, args):
        inputs = family.make_inputs(problem, dtype, 0, "cuda")
        out = family.new_output(problem, inputs)
        with torch.cuda.nvtx.range(nvtx_range(ctx.stage.id, problem.tag)):
            for _ in range(launches):
                family.call(kernel.into, problem, inputs, out, kernel.input_kind)
        torch.cuda.synchronize()
        print(f"{ctx.stage.id} {problem.tag} {dtype}: launched {launches}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
