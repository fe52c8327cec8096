"""Every variant the registry keeps still builds within its stage's resource gates.

A variant is the record of a measured build (a valid negative, the build before a promotion):
`tools/quick_check.py --variant LABEL=STAGE:...` and the notebooks rebuild it on demand. Shared
headers move on under it, and a variant that no longer compiles is only found on a GPU call. On
2026-11-24 one had been broken for days: s8's `before_pdl` (KEY_SPLIT_WGS=1) stopped compiling
when a head_dim-64 knob (since removed) arrived. Compiled side by side, one nvcc per CPU core.
A variant overrides only knobs its stage still has: knobs removed as recorded negatives live as
patches (docs/results/sdpa/history/patches), their trials in the stage's MLflow record.
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
# logged resource_fail, and says so): none since the pruning of issue 30.
KNOWN_GATE_FAILURES: dict[tuple[str, str], str] = {}


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
    assert {stage_id for stage_id, _ in VARIANTS} >= {"s8_persistent_split", "s9_fp8"}
    assert set(KNOWN_GATE_FAILURES) <= set(VARIANTS)


def test_every_registry_define_is_read_by_its_stage_code():
    """A define no source reads (a knob removed from the code, left in the registry) builds the default
    in silence: every variant of it would be the default under another name."""
    import re

    def code_of(path) -> str:  # comments name knobs that are gone ("... was removed"): not reads
        return re.sub(r"//[^\n]*|/\*.*?\*/", "", path.read_text(), flags=re.S)

    headers = "\n".join(code_of(path) for path in REGISTRY.header_files())
    unread = {}
    for stage_id in REGISTRY.stages:
        stage = REGISTRY.get(stage_id)
        code = code_of(stage.source) + headers
        unread[stage_id] = [name for name in stage.defines if not re.search(rf"\b{name}\b", code)]
    assert not {stage_id: names for stage_id, names in unread.items() if names}


@pytest.mark.slow
@pytest.mark.kernels
def test_every_variant_builds_within_its_gates(tmp_path, nvcc_available):
    """Every variant compiles; the ones that fail a resource gate are exactly the known ones."""
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        outcomes = list(pool.map(lambda job: build_outcome(*job[1], tmp_path / str(job[0])), enumerate(VARIANTS)))
    broken = [f"{stage_id}:{name}: {error}" for (stage_id, name), (error, _) in zip(VARIANTS, outcomes) if error]
    assert not broken, "variants that no longer compile:\n" + "\n".join(broken)
    over = {label: failed for label, (_, failed) in zip(VARIANTS, outcomes) if failed}
    assert set(over) == set(KNOWN_GATE_FAILURES), f"gate failures {over}, known {sorted(KNOWN_GATE_FAILURES)}"
