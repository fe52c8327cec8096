import pytest

from stagelab.judge.outcome import Evidence, decide
from stagelab.measure.timing import geometric_mean
from stagelab.core.registry import ResourceGates
from stagelab.core.resources import KernelResources, evaluate_gates, gates_passed

GOOD = dict(built=True, gates_passed=True, gpu_available=True, checks_passed=True)


@pytest.mark.parametrize("evidence, outcome", [
    (Evidence(built=False), "build_failed"),
    (Evidence(built=True, gates_passed=False, gpu_available=True, checks_passed=True), "resource_fail"),
    (Evidence(built=True, gates_passed=True, gpu_available=False), "no_gpu"),
    (Evidence(built=True, gates_passed=False, gpu_available=False), "resource_fail"),
    (Evidence(built=True, gates_passed=True, gpu_available=True, checks_passed=False), "incorrect"),
    (Evidence(**GOOD), "pass"),
    (Evidence(**GOOD, has_parent=True, speedup_vs_parent=1.20, min_gain=0.05), "pass"),
    (Evidence(**GOOD, has_parent=True, speedup_vs_parent=1.04, min_gain=0.05), "valid_negative"),
    (Evidence(**GOOD, has_parent=True, speedup_vs_parent=0.80, min_gain=0.0), "valid_negative"),
    (Evidence(**GOOD, has_parent=True, speedup_vs_parent=None), "error"),
])
def test_outcome_rules(evidence, outcome):
    assert decide(evidence).outcome == outcome


def test_incorrect_beats_fast():
    fast_but_wrong = Evidence(built=True, gates_passed=True, gpu_available=True, checks_passed=False,
                              has_parent=True, speedup_vs_parent=10.0)
    assert decide(fast_but_wrong).outcome == "incorrect"


def test_geometric_mean():
    assert geometric_mean([2.0, 8.0]) == pytest.approx(4.0)
    assert geometric_mean([]) != geometric_mean([])  # nan


def kernel(**kw):
    return KernelResources(kernel="void k<__half, 64>(SdpaProblem)", mangled="_Z1k", arch="sm_90a", **kw)


def test_gates():
    gates = ResourceGates(max_registers=128, max_shared_memory_bytes=49152, spills_allowed=False)
    ok = kernel(registers=100, shared_memory_bytes=1024, dynamic_shared_memory_bytes=32768)
    assert gates_passed(evaluate_gates([ok], gates))
    too_many_regs = kernel(registers=129)
    spills = kernel(registers=64, spill_store_bytes=8)
    too_much_smem = kernel(registers=64, shared_memory_bytes=1024, dynamic_shared_memory_bytes=49152)
    for bad, gate in ((too_many_regs, "max_registers"), (spills, "no_spills"),
                      (too_much_smem, "max_shared_memory_bytes")):
        failed = [g for g in evaluate_gates([ok, bad], gates) if not g.passed]
        assert [g.gate for g in failed] == [gate]
    assert gates_passed(evaluate_gates([spills], ResourceGates(spills_allowed=True)))
    assert not gates_passed(evaluate_gates([], gates))


@pytest.mark.parametrize("reason, cause", [
    ("ModuleNotFoundError: No module named 'stagelab.recorder'", "lab failure"),  # the lab renamed a module
    ("AttributeError: 'StageRun' object has no attribute 'record'", "lab failure"),
    ("stagelab.core.errors.ConfigError: params/x.yaml: unknown key", "lab failure"),
    ("RuntimeError: CUDA error: an illegal memory access was encountered", "kernel failure"),
    ("torch.AcceleratorError: CUDA error: misaligned address", "kernel failure"),
    ("BuildError: nvcc failed on s5_wgmma.cu (exit 1)", "kernel failure"),
    ("DeadKernelError: Kernel died", "kernel failure"),
    ("notebook timed out after 1800s", "time-out"),
    ("the parent could not be timed, so the gain is unknown", None),  # the judge's own error
    ("", None), (None, None),
])
def test_an_errors_reason_says_whose_failure_it_was(reason, cause):
    from stagelab.judge.error_cause import error_cause

    assert error_cause(reason) == cause
