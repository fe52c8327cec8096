"""Whose failure an `error` outcome is: the lab's, the kernel's, or neither (the judge's own call).

An `error` comes from two places (judge.outcome). The batch runner records a notebook that crashed
or timed out before deciding, its reason the first exception a cell raised (`Name: message`,
run.execute.notebook_error) or `notebook timed out after Ns`; the judge decides `error` itself when
the stage took none of the file's problems or its parent could not be timed (a sentence, no
exception). A Python exception is the lab's failure (s16's `ModuleNotFoundError: No module named
'stagelab.recorder'`: the notebook imported a module the lab had renamed) unless it is the
device's: a CUDA error torch raises at the kernel's launch or sync, a build failure, or the
notebook's process dying under the kernel. A page says which, so a lab bug never reads as a
kernel that failed.
"""

from __future__ import annotations

import re

LAB_FAILURE = "lab failure"
KERNEL_FAILURE = "kernel failure"
TIME_OUT = "time-out"

# What a failing kernel leaves in the reason: torch's CUDA errors (RuntimeError before torch 2.8,
# AcceleratorError since), the driver's names for them, a stage that did not build, the process gone.
_DEVICE = re.compile(r"CUDA error|CUDA out of memory|AcceleratorError|CUDA_ERROR|cudaError|illegal memory access|"
                     r"illegal instruction|misaligned address|unspecified launch failure|BuildError|"
                     r"DeadKernelError|Kernel died", re.IGNORECASE)
# `Name: message` or a bare `Name` at the start: a Python exception, as notebook_error writes it.
_EXCEPTION = re.compile(r"^\s*(?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt)\b")
_TIMED_OUT = re.compile(r"^\s*notebook timed out", re.IGNORECASE)


def error_cause(reason: str | None) -> str | None:
    """LAB_FAILURE, KERNEL_FAILURE or TIME_OUT for an `error` outcome's reason; None for an error
    the judge decided (nothing checked, the parent not timed) or a reason that names no exception."""
    text = reason or ""
    if _DEVICE.search(text):
        return KERNEL_FAILURE
    if _TIMED_OUT.match(text):
        return TIME_OUT
    if _EXCEPTION.match(text):
        return LAB_FAILURE
    return None
