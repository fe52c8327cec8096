"""ptxas parsing, on real `nvcc --resource-usage` output of the stage kernels for sm_90a."""

import re
import subprocess
from dataclasses import replace

import pytest

from stagelab.core.build import nvcc_command
from stagelab.core.registry import family_registry
from stagelab.core.resources import evaluate_gates, parse_mangled, parse_ptxas

REGISTRY = family_registry("sdpa")

SAMPLE = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z6kernelILi64EEvPf' for 'sm_90a'
ptxas info    : Function properties for _Z6kernelILi64EEvPf
    16 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 168 registers, used 1 barriers, 4096 bytes smem, 400 bytes cmem[0]
ptxas info    : Compiling entry function '_Z6kernelILi64EEvPf' for 'sm_80'
ptxas info    : Function properties for _Z6kernelILi64EEvPf
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 40 registers, 384 bytes cmem[0]
"""


def test_parse_sample_per_kernel_and_arch():
    hopper, ampere = parse_ptxas(SAMPLE)
    assert (hopper.arch, hopper.registers, hopper.barriers, hopper.shared_memory_bytes) == ("sm_90a", 168, 1, 4096)
    assert (hopper.stack_frame_bytes, hopper.spill_store_bytes, hopper.spill_load_bytes) == (16, 8, 12)
    assert hopper.constant_memory_bytes == 400 and hopper.spills == 20
    assert (ampere.arch, ampere.registers, ampere.barriers, ampere.spills) == ("sm_80", 40, 0, 0)


# One stage per kernel generation in `make test` (scalar, wgmma, warp-specialized persistent);
# every stage in the sweep, `make test-kernels` (CI runs both): compiling all of them is most of
# the suite's CPU time on a 2-core machine.
EVERY_RUN = {"s0_baseline", "s5_wgmma", "s8_persistent_split"}


@pytest.mark.slow
@pytest.mark.parametrize("stage_id", [
    stage_id if stage_id in EVERY_RUN else pytest.param(stage_id, marks=pytest.mark.kernels)
    for stage_id in REGISTRY.stages])
def test_parse_real_nvcc_output(stage_id, tmp_path, nvcc_available):
    stage = REGISTRY.get(stage_id)
    proc = subprocess.run(nvcc_command(stage, REGISTRY, tmp_path / "k.o"), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    log = proc.stdout + proc.stderr
    records = parse_ptxas(log)
    # one record per entry function ptxas compiled, each with the numbers of its own report lines
    assert len(records) == len(re.findall(r"Compiling entry function", log)) >= 4  # 2 dtypes x 2 head dims
    assert {r.arch for r in records} == set(stage.arch)
    used = [int(n) for n in re.findall(r"Used (\d+) registers", log)]
    assert sorted(r.registers for r in records) == sorted(used)
    assert all(r.registers > 0 for r in records)
    tags = {r.tag for r in records}
    assert any("fp16" in t and ".64." in t for t in tags) and any("bf16" in t and ".128." in t for t in tags)
    # The registered build holds its own register, shared-memory, spill and ptxas gates (a stage
    # run judges the same numbers; a promoted knob once spilled 4 bytes in 4 of s9's 16 kernels and
    # only the GPU run said so). The SASS opcode gates need cuobjdump: tests/test_sass.py.
    resource_gates = replace(stage.gates, sass_require=(), sass_forbid=())
    failed = [g for g in evaluate_gates(records, resource_gates) if not g.passed]
    assert not failed, failed


@pytest.mark.parametrize("mangled, name, args", [
    ("_ZN12_GLOBAL__N_114sdpa_s0_kernelI6__halfLi64EEEv11SdpaProblem", "sdpa_s0_kernel", ["fp16", "64"]),
    ("_ZN56_GLOBAL__N__a3ee8dc7_23_s3b_register_softmax_cu_83a6713c15sdpa_s3b_kernelI13__nv_bfloat16Li128ELb1EEEv11SdpaProblem",
     "sdpa_s3b_kernel", ["bf16", "128", "1"]),
    ("_Z6kernelPf", "kernel", []),
    ("plain_c_name", "plain_c_name", []),
])
def test_parse_mangled(mangled, name, args):
    assert parse_mangled(mangled) == (name, args)


# Real ptxas 13.0 lines (s7_pingpong before its fix): advisories name their function.
ADVISORY_SAMPLE = """\
ptxas info    : (C7517) warpgroup.wait is injected in around line 4090 by compiler to allow use of registers defined by GMMA in function '_Z6kernelILi64EEvPf'
ptxas info    : (C7514) Potential Performance Loss: wgmma.mma_async instructions are serialized due to non wgmma instructions reading accumulator registers of  a wgmma between start and end of the pipeline stage in the function '_Z6kernelILi64EEvPf'
ptxas info    : Compiling entry function '_Z6kernelILi64EEvPf' for 'sm_90a'
ptxas info    : Function properties for _Z6kernelILi64EEvPf
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 168 registers, used 16 barriers
ptxas info    : Compiling entry function '_Z5cleanv' for 'sm_90a'
ptxas info    : Function properties for _Z5cleanv
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers
"""


def test_advisories_attach_to_their_function_and_fail_the_gate():
    from stagelab.core.registry import ResourceGates
    from stagelab.core.resources import evaluate_gates

    serialized, clean = parse_ptxas(ADVISORY_SAMPLE)
    assert serialized.advisories == ("C7514", "C7517") and serialized.registers == 168
    assert clean.advisories == ()
    gates = evaluate_gates([serialized, clean], ResourceGates(ptxas_forbid=("C7514", "C7508")))
    verdict = {(g.gate, g.kernel.split(".")[0]): g.passed for g in gates if g.gate.startswith("ptxas")}
    assert verdict == {("ptxas_forbids_C7514", "kernel"): False, ("ptxas_forbids_C7508", "kernel"): True,
                       ("ptxas_forbids_C7514", "clean"): True, ("ptxas_forbids_C7508", "clean"): True}



def test_a_composed_kernels_tag_fits_a_metric_key():
    """A kernel templated on a stage's composition (nested types) spells a tag past MLflow's key
    length; its tag is cut and ends in a digest, so two such kernels keep apart."""
    from stagelab.core.metrics import INSTRUCTION_COUNT
    from stagelab.core.resources import MAX_TAG_CHARS, KernelResources

    nested = "N15sdpa_persistent17ThreeTurnsByModelINS_22InterleavedSoftmaxD128INS_11CausalSnakeINS_6RecipeEEEEE"
    names = [f"_ZN13sdpa_warpspec15warpspec_kernelI6__halfLi{d}ENS_6ConfigILi2ELi128ELi3ELb1ELb1ELi1ELi24ELi240E"
             f"{nested * 3}EELb0ELb1EEEvNS_6ParamsE" for d in (64, 128)]
    tags = [KernelResources(kernel=n, mangled=n, arch="sm_90a").tag for n in names]
    assert all(len(t) <= MAX_TAG_CHARS for t in tags) and tags[0] != tags[1]
    assert all(len(INSTRUCTION_COUNT.key("HGMMA.64x128x16.F32.BF16", t)) <= 250 for t in tags)
    plain = KernelResources(kernel="k", mangled="_ZN14sdpa_s0_kernelI6__halfLi64EEEv11SdpaProblem", arch="sm_90a")
    assert plain.tag == "sdpa_s0_kernel.fp16.64.sm_90a"  # short tags are as they always were
