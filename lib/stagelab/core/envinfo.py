"""What machine a number came from: GPU, clocks, driver, CUDA, torch, Triton, git state."""

from __future__ import annotations

import os
import platform
import subprocess
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from .paths import repo_root


def _run(cmd: list[str]) -> str | None:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def git_state() -> dict[str, str]:
    """The commit of the project's own tree, and whether the tree differs from it (edited, staged
    or untracked files).

    $STAGELAB_GIT_COMMIT (and $STAGELAB_GIT_DIRTY) win when set: whoever copied the
    tree to a machine without .git (a lent GPU) knows what was sent. Otherwise git,
    but only when the repository's top level is the project root: a copy of the
    project inside another checkout must not record that checkout's commit.
    """
    if os.environ.get("STAGELAB_GIT_COMMIT"):
        return {"git_commit": os.environ["STAGELAB_GIT_COMMIT"],
                "git_dirty": os.environ.get("STAGELAB_GIT_DIRTY", "unknown")}
    root = repo_root()
    toplevel = _run(["git", "-C", str(root), "rev-parse", "--show-toplevel"])
    if toplevel is None or Path(toplevel).resolve() != root.resolve():
        return {"git_commit": "unknown", "git_dirty": "unknown"}
    commit = _run(["git", "-C", str(root), "rev-parse", "HEAD"]) or "unknown"
    # Untracked files count (`??` lines): a new family file nobody added yet decides results as much
    # as an edited one. Ignored ones (build/, mlruns/) do not: git leaves them out of --porcelain.
    status = _run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=normal"])
    return {"git_commit": commit, "git_dirty": "true" if status else "false"}


def gpu_info() -> dict[str, str]:
    """Empty when no CUDA device is visible; SM clock only when nvidia-smi can read it."""
    import torch

    if not torch.cuda.is_available():
        return {}
    props = torch.cuda.get_device_properties(0)
    info = {
        "gpu": props.name,
        "gpu_sm_count": str(props.multi_processor_count),
        "gpu_l2_bytes": str(props.L2_cache_size),
        "gpu_memory_bytes": str(props.total_memory),
        "gpu_capability": f"{props.major}.{props.minor}",
    }
    info.update(read_clocks())
    return info


def _this_gpu() -> str:
    """The GPU torch calls device 0, as nvidia-smi's -i names it: nvidia-smi ignores
    CUDA_VISIBLE_DEVICES, so a notebook bound to GPU 1 (stagelab run --gpus) must ask for 1."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    return visible or "0"


def read_clocks(prefix: str = "") -> dict[str, str]:
    """Driver and clocks from nvidia-smi, when it answers."""
    info: dict[str, str] = {}
    smi = _run(["nvidia-smi", "--query-gpu=driver_version,clocks.sm,clocks.max.sm,clocks.mem",
                "--format=csv,noheader,nounits", "-i", _this_gpu()])
    if smi:
        parts = [p.strip() for p in smi.splitlines()[0].split(",")]
        if len(parts) == 4:
            info.update({"driver": parts[0], f"{prefix}sm_clock_mhz": parts[1],
                         "sm_clock_max_mhz": parts[2], f"{prefix}mem_clock_mhz": parts[3]})
    return info


def _cudnn_version(torch) -> str:
    """cuDNN's version, or why it has none: torch's first query checks cuDNN against the runtime and the
    devices, and raises where they disagree (a mismatched cuDNN; is_available() true with no device
    counted, as under a test's stand-in GPU); a run's provenance says so rather than losing the run."""
    try:
        return str(torch.backends.cudnn.version()) if torch.backends.cudnn.is_available() else "none"
    except (RuntimeError, ValueError) as err:
        return f"unusable: {' '.join(str(err).split())[:200]}"


def software_versions() -> dict[str, str]:
    import torch

    from .toolchain import nvcc_version

    versions = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_cuda": str(torch.version.cuda),
        "cudnn": _cudnn_version(torch),
    }
    try:
        versions["nvcc"] = nvcc_version()
    except Exception:  # no toolkit: the build step reports that on its own
        versions["nvcc"] = "none"
    # read without importing them (seconds); only `backend: triton` and `backend: cute` stages need them
    for key, package in (("triton", "triton"), ("cutlass_dsl", "nvidia-cutlass-dsl")):
        try:
            versions[key] = version(package)
        except PackageNotFoundError:
            versions[key] = "none"
    try:
        import mlflow

        versions["mlflow"] = mlflow.__version__
    except ImportError:
        pass
    return versions


def gpu_label(info: dict[str, str]) -> str:
    """A file-name-safe GPU name for results pages: 'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3'."""
    name = info.get("gpu", "no-gpu")
    return "-".join(name.lower().replace("_", " ").split())
