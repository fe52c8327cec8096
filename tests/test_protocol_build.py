"""The protocol-checking build (kernels/sdpa/instrument/protocol.cuh, issue 46): with SDPA_PROTOCOL=0
(the default) its hooks compile to nothing; with 1 the stage builds with its checks (the first
violation recorded with an atomic) and exports its report. Built as the lab builds, on the CPU."""

import pytest

from stagelab.core.build import build_stage
from stagelab.core.registry import find_stage

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
