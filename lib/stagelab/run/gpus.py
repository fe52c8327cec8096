"""`stagelab run --gpus`: the GPUs a batch runs its notebooks on, one notebook per GPU at a time.

A GPU is named the way its notebook's CUDA_VISIBLE_DEVICES names it. `--gpus 0,1` takes
nvidia-smi's indices, checked against the GPUs this machine has (nvidia-smi's list, else torch's
device count) before any work: a GPU that is not there is an error naming those that are (or
saying there are none). `--gpus all` is the GPUs this process was given (an inherited
CUDA_VISIBLE_DEVICES, as a Slurm job with `--gres=gpu:N` has), else every GPU nvidia-smi lists,
else torch's device count.

STAGELAB_ASSUME_GPUS=0,1 stands for the machine's list (the runner's own tests: one notebook per
"GPU" side by side on a machine without any, each of them `no_gpu`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..core.envinfo import _run
from ..core.errors import ConfigError

ALL = "all"
VISIBLE_DEVICES = "CUDA_VISIBLE_DEVICES"
ASSUME_GPUS = "STAGELAB_ASSUME_GPUS"


@dataclass(frozen=True)
class Gpu:
    index: str  # the notebook's CUDA_VISIBLE_DEVICES: an nvidia-smi index (or a UUID from an inherited list)
    name: str   # "" when nothing on this machine names it


def _nvidia_smi() -> dict[str, str]:
    """GPU name by nvidia-smi index and by UUID; empty without nvidia-smi or without GPUs."""
    out = _run(["nvidia-smi", "--query-gpu=index,uuid,name", "--format=csv,noheader"])
    names: dict[str, str] = {}
    for line in (out or "").splitlines():
        parts = [part.strip() for part in line.split(",", 2)]
        if len(parts) == 3:
            index, uuid, name = parts
            names[index] = names[uuid] = name
    return names


def machine_gpu_name() -> str:
    """The name of the GPU a notebook without --gpus sees first (CUDA_VISIBLE_DEVICES' first entry, else
    nvidia-smi's GPU 0); "" where nothing names one."""
    names = _nvidia_smi()
    visible = [entry.strip() for entry in os.environ.get(VISIBLE_DEVICES, "0").split(",") if entry.strip()]
    return names.get(visible[0], "") if visible else ""


def _indices(names: dict[str, str]) -> list[str]:
    return [key for key in names if key.isdigit()]


def _torch_indices() -> list[str]:
    import torch

    return [str(i) for i in range(torch.cuda.device_count())]


def _all(names: dict[str, str]) -> list[str]:
    if VISIBLE_DEVICES in os.environ:  # set, even empty: the GPUs this process may use, and no others
        found = [entry.strip() for entry in os.environ[VISIBLE_DEVICES].split(",") if entry.strip()]
    else:
        found = machine_gpus(names)
    if not found:
        raise ConfigError("--gpus all: no GPU here (none in CUDA_VISIBLE_DEVICES, or nvidia-smi and torch see none); "
                          "run without --gpus, or name the GPUs (--gpus 0,1)")
    return found


def parse_gpu_list(spec: str) -> list[str]:
    """`0,1` -> ['0', '1']; anything but distinct non-negative integers is a ConfigError."""
    entries = [entry.strip() for entry in spec.split(",")]
    bad = [entry for entry in entries if not entry.isdigit()]
    if bad:
        raise ConfigError(f"--gpus {spec!r}: expected 'all' or GPU indices like 0,1 (not {bad[0]!r})")
    indices = [str(int(entry)) for entry in entries]
    repeated = sorted({index for index in indices if indices.count(index) > 1})
    if repeated:
        raise ConfigError(f"--gpus {spec!r}: GPU {', '.join(repeated)} listed twice; "
                          "one notebook per GPU means each GPU once")
    return indices


def machine_gpus(names: dict[str, str]) -> list[str]:
    """The indices of this machine's GPUs: STAGELAB_ASSUME_GPUS when set, else nvidia-smi's, else torch's."""
    if ASSUME_GPUS in os.environ:
        return parse_gpu_list(os.environ[ASSUME_GPUS]) if os.environ[ASSUME_GPUS].strip() else []
    return _indices(names) or _torch_indices()


def resolve_gpus(spec: str | None) -> list[Gpu] | None:
    """The GPUs `--gpus SPEC` names, with their names where nvidia-smi answers; None without --gpus."""
    if spec is None:
        return None
    names = _nvidia_smi()
    if spec.strip() == ALL:
        indices = _all(names)
    else:
        indices, present = parse_gpu_list(spec), machine_gpus(names)
        missing = [index for index in indices if index not in present]
        if missing:
            there = (f"it has GPU {', '.join(present)}" if present else "it has no GPU (nvidia-smi and torch see "
                     "none); without --gpus the stages are built and held to their gates (no_gpu rows)")
            raise ConfigError(f"--gpus {spec!r}: GPU {', '.join(missing)} is not on this machine: {there}")
    return [Gpu(index, names.get(index, "")) for index in indices]


# What a stage's notebook costs without a GPU: its nvcc build where the cache has none (the sdpa
# acceptance sweep, 22 stages, took about 24 minutes on a cold cache) and the notebook around it.
NO_GPU_MINUTES_PER_STAGE = 1.1


def no_gpu_notice(stages: int) -> str | None:
    """What a batch will and will not do on a machine where CUDA sees no GPU, said before it starts
    (a batch of no_gpu rows after half an hour of builds is no surprise then); None with a GPU."""
    import torch

    if torch.cuda.is_available():
        return None
    minutes = max(1, round(stages * NO_GPU_MINUTES_PER_STAGE))
    return (f"no CUDA GPU here: each of the {stages} stage(s) will be built and held to its resource gates "
            f"(registers, spills, shared memory, SASS), but not checked or timed: every row will read no_gpu. "
            f"Builds take about a minute a stage when not cached yet, so up to ~{minutes} min; "
            "run on a GPU machine for outcomes and timings")
