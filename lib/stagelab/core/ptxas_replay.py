"""ptxas --verbose replayed on a DSL's PTX: the resource report a DSL compiler keeps to itself.

Triton and CuTe DSL run ptxas (or the ptxas library) on their PTX and keep the log; the lab runs a
ptxas of its own on the same PTX with `-v`. Its numbers are those of the kernel the DSL runs only
if the replay builds the same cubin, so each candidate command (a ptxas binary and its flags) is
tried in turn until one reproduces the DSL's cubin byte for byte; the build records whether one did.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from .errors import BuildError

PTXAS_TIMEOUT_S = 600
_PTX_TARGET_RE = re.compile(r"^\s*\.target\s+(sm_\w+)", re.M)
NOT_REPRODUCED = ("stagelab: no ptxas command tried reproduced the {dsl} cubin byte for byte; the numbers "
                  "above may differ from those of the kernel {dsl} runs\n")


def ptx_target(ptx: Path) -> str:
    """The architecture a PTX file targets (its `.target sm_90a`)."""
    found = _PTX_TARGET_RE.search(ptx.read_text())
    if not found:
        raise BuildError(f"{ptx.name} names no .target architecture", ptx.read_text()[:2000])
    return found[1]


def replay(ptx: Path, cubin: bytes, commands: list[list[str]], dsl: str) -> tuple[str, bool]:
    """ptxas -v's report on `ptx` (in its folder) from the first command that reproduces `cubin`,
    and whether one did; else the first command's report, marked as not reproduced."""
    arch, workdir = ptx_target(ptx), ptx.parent
    attempt = workdir / "ptxas-reproduction.cubin"
    logs = []
    for command in commands:
        cmd = [*command, "-v", f"--gpu-name={arch}", ptx.name, "-o", attempt.name]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=PTXAS_TIMEOUT_S, check=False,
                                  cwd=workdir)
        except subprocess.TimeoutExpired as exc:
            raise BuildError(f"ptxas timed out after {PTXAS_TIMEOUT_S}s on {ptx.name}", " ".join(cmd)) from exc
        logs.append(f"$ {' '.join(cmd)}\n{proc.stdout}{proc.stderr}")
        if proc.returncode != 0:
            raise BuildError(f"ptxas failed on {ptx.name} (exit {proc.returncode})", logs[-1])
        reproduced = attempt.read_bytes() == cubin
        attempt.unlink()
        if reproduced:
            return logs[-1], True
    return logs[0] + NOT_REPRODUCED.format(dsl=dsl), False
