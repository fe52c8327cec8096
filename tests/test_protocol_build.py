"""The protocol-checking build (kernels/sdpa/instrument/protocol.cuh, issue 46): with SDPA_PROTOCOL=0
(the default) its hooks compile to nothing; with 1 the stage builds with its checks (the first
violation recorded with an atomic) and exports its report. Built as the lab builds, on the CPU."""

import re
from dataclasses import replace

import pytest
from planted_sdpa import make_sdpa_plant_checkout

from stagelab.core.build import build_stage
from stagelab.core.registry import find_stage, load_registry
from stagelab.core.sass_loops import compare_listings
from stagelab.core.sass_schedule import functions

pytestmark = pytest.mark.kernels


@pytest.fixture(scope="module")
def builds():
    registry, stage = find_stage("s6_tma_warpspec")
    default = build_stage(stage, registry)
    checking = build_stage(stage.with_defines({"SDPA_PROTOCOL": "1"}), registry)
    return default, checking


def test_the_default_build_has_no_checks_and_exports_no_report(builds):
    default, _ = builds
    listing = default.sass_listing()
    assert "ATOMG" not in listing and "ATOM." not in listing  # the record's atomicCAS
    assert "LDL" not in listing and "STL" not in listing      # the slots' state arrays
    assert default.module.protocol_report() is None


def test_the_checking_build_records_through_an_atomic_and_exports_its_report(builds):
    _, checking = builds
    assert "ATOM" in checking.sass_listing()
    assert hasattr(checking.module, "protocol_report")


HOOK_CALL = re.compile(r"protocol\.\w+\(.*\);(\s*//.*)?")


def strip_hooks(root) -> int:
    """Every statement calling a protocol hook (`protocol.<hook>(...);`) deleted from the checkout's
    headers (the mainloop's and the epilogue's): the code as it was before the hooks. Returns how many
    were deleted."""
    deleted = 0
    for header in (root / "kernels" / "sdpa").rglob("*.cuh"):
        lines = header.read_text().splitlines(keepends=True)
        kept = [line for line in lines if not HOOK_CALL.fullmatch(line.strip())]
        deleted += len(lines) - len(kept)
        header.write_text("".join(kept))
    return deleted


def test_the_default_build_compiles_the_hooks_away_its_main_loops_unchanged(builds, tmp_path):
    """The default build's SASS is the SASS of the same sources without the hook calls: every kernel,
    and so every main loop (core.sass_loops, as tools/sass_loops.py reads them), unchanged."""
    default, _ = builds
    root = make_sdpa_plant_checkout(tmp_path / "no-hooks", None)
    assert strip_hooks(root) >= 17  # K/V: landed, reads x2, commit, waited x2, released, drained, filled x2,
    # finish; Q: landed, reads, released x2 (O's staging, the key split), drained, filled
    registry = load_registry(root / "kernels" / "sdpa" / "stages.yaml")
    bare = build_stage(registry.get("s6_tma_warpspec"), registry, load=False)
    comparisons = compare_listings(bare.sass_listing(), default.sass_listing())
    assert comparisons and all(row.trial.similarity == 1.0 for row in comparisons)  # the same opcode sequence
    assert all(replace(row.trial, similarity=None) == row.reference for row in comparisons)  # the reference has none
    assert functions(default.sass_listing()).keys() == functions(bare.sass_listing()).keys()
    assert all([i.text for i in insts] == [i.text for i in functions(bare.sass_listing())[name]]
               for name, insts in functions(default.sass_listing()).items())
