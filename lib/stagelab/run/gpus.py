"""`stagelab run --gpus`: the GPUs a batch runs its notebooks on, one notebook per GPU at a time.

A GPU is named the way its notebook's CUDA_VISIBLE_DEVICES names it. `--gpus 0,1` takes
nvidia-smi's indices as given (checked against nvidia-smi's list when it answers; a machine
without nvidia-smi takes them on trust, so the runner can be tested without a GPU). `--gpus all`
is the GPUs this process was given (an inherited CUDA_VISIBLE_DEVICES, as a Slurm job with
`--gres=gpu:N` has), else every GPU nvidia-smi lists, else torch's device count.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..core.envinfo import _run
from ..core.errors import ConfigError

ALL = "all"
VISIBLE_DEVICES = "CUDA_VISIBLE_DEVICES"


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


def _indices(names: dict[str, str]) -> list[str]:
    return [key for key in names if key.isdigit()]


def _torch_indices() -> list[str]:
    import torch

    return [str(i) for i in range(torch.cuda.device_count())]


def _all(names: dict[str, str]) -> list[str]:
    if VISIBLE_DEVICES in os.environ:  # set, even empty: the GPUs this process may use, and no others
        found = [entry.strip() for entry in os.environ[VISIBLE_DEVICES].split(",") if entry.strip()]
    else:
        found = _indices(names) or _torch_indices()
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


def resolve_gpus(spec: str | None) -> list[Gpu] | None:
    """The GPUs `--gpus SPEC` names, with their names where nvidia-smi answers; None without --gpus."""
    if spec is None:
        return None
    names = _nvidia_smi()
    indices = _all(names) if spec.strip() == ALL else parse_gpu_list(spec)
    missing = [index for index in indices if names and index not in names]
    if missing:
        raise ConfigError(f"--gpus {spec!r}: GPU {', '.join(missing)} is not on this machine "
                          f"(nvidia-smi lists {', '.join(_indices(names))})")
    return [Gpu(index, names.get(index, "")) for index in indices]
