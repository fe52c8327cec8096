"""Every variant the registry keeps still builds within its stage's resource gates.

A variant is the record of a measured build (a valid negative, the build before a promotion):
`tools/quick_check.py --variant LABEL=STAGE:...` and the notebooks rebuild it on demand. Shared
headers move on under it, and a variant that no longer compiles is only found on a GPU call. On
2026-11-24 one had been broken for days: s8's `before_pdl` (KEY_SPLIT_WGS=1) stopped compiling
when KEY_SPLIT_WGS_D64 (default 2) arrived, and s9's `row_sum_mma` broke on a static_assert for
the in-kernel transposer a session earlier. Compiled side by side, one nvcc per CPU core.
"""

from __future__ import annotations

import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pytest

from stagelab.core.build import nvcc_command
from stagelab.core.registry import family_registry
from stagelab.core.resources import evaluate_gates, parse_ptxas

REGISTRY = family_registry("sdpa")
VARIANTS = [(stage_id, name) for stage_id in REGISTRY.stages for name in REGISTRY.get(stage_id).variants]


# Variants measured and recorded although they fail a resource gate (a stage run of them would be
# logged resource_fail, and says so): their comments in stages.yaml give the numbers.
KNOWN_GATE_FAILURES = {
    ("s8_persistent_split", "key_split4_d64"): "four warpgroups at 112 registers spill (24-40 bytes per kernel)",
}


def build_outcome(stage_id: str, name: str, out_dir) -> tuple[str | None, list[str]]:
    """One variant's build: (nvcc's error, or None) and the resource gates it fails."""
    stage = REGISTRY.get(stage_id).variant(name)
    out_dir.mkdir()
    proc = subprocess.run(nvcc_command(stage, REGISTRY, out_dir / "k.o"), capture_output=True, text=True)
    log = proc.stdout + proc.stderr
    if proc.returncode != 0:
        errors = [line for line in log.splitlines() if "error" in line]
        return " | ".join(errors[:3]) or log[-500:], []
    gates = replace(stage.gates, sass_require=(), sass_forbid=())  # SASS opcodes: tests/test_sass.py
    return None, [str(gate) for gate in evaluate_gates(parse_ptxas(log), gates) if not gate.passed]


def test_the_registry_keeps_variants():
    assert len(VARIANTS) >= 40 and {stage_id for stage_id, _ in VARIANTS} >= {"s8_persistent_split", "s9_fp8"}
    assert set(KNOWN_GATE_FAILURES) <= set(VARIANTS)


@pytest.mark.slow
def test_every_variant_builds_within_its_gates(tmp_path, nvcc_available):
    """Every variant compiles; the ones that fail a resource gate are exactly the known ones."""
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        outcomes = list(pool.map(lambda job: build_outcome(*job[1], tmp_path / str(job[0])), enumerate(VARIANTS)))
    broken = [f"{stage_id}:{name}: {error}" for (stage_id, name), (error, _) in zip(VARIANTS, outcomes) if error]
    assert not broken, "variants that no longer compile:\n" + "\n".join(broken)
    over = {label: failed for label, (_, failed) in zip(VARIANTS, outcomes) if failed}
    assert set(over) == set(KNOWN_GATE_FAILURES), f"gate failures {over}, known {sorted(KNOWN_GATE_FAILURES)}"
