"""SASS opcode counts and the instruction gates built on them."""

import subprocess

import pytest

from stagelab.core.registry import ResourceGates
from stagelab.core.resources import KernelResources, evaluate_gates
from stagelab.core.sass import parse_sass

SAMPLE = """
Fatbin elf code:
================
arch = sm_90a
code version = [1,8]

        code for sm_90a
                Function : _Z6kernelILi64EEvPf
        .headerflags    @"EF_CUDA_TEXMODE_UNIFIED EF_CUDA_64BIT_ADDRESS EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                         /* 0x00000a00ff017b82 */
        /*0010*/                   HGMMA.64x128x16.F32 R24, gdesc[UR4], RZ, !UPT ;  /* 0x00000000041879f0 */
        /*0020*/              @!P0 BRA 0x90 ;                                      /* 0x0000000000008947 */
        /*0030*/               @P1 STL [R1], R2 ;                                  /* 0x0000000201001387 */
        /*0040*/                   HGMMA.64x128x16.F32 R24, gdesc[UR8], R24 ;     /* 0x00000000081879f0 */
                ..........
                Function : plain
        /*0000*/                   EXIT ;
"""


def test_parse_counts_opcodes_per_function_and_arch():
    counts = parse_sass(SAMPLE)
    kernel = counts[("_Z6kernelILi64EEvPf", "sm_90a")]
    assert kernel["HGMMA"] == 2 and kernel["STL"] == 1 and kernel["BRA"] == 1 and kernel["LDC"] == 1
    assert counts[("plain", "sm_90a")] == {"EXIT": 1}


def test_instruction_gates_require_and_forbid():
    record = KernelResources(kernel="kernel<64>", mangled="_Z6kernelILi64EEvPf", arch="sm_90a", registers=90)
    gates = ResourceGates(sass_require=("HGMMA", "UTMALDG"), sass_forbid=("LDL", "STL"))
    results = {g.gate: g for g in evaluate_gates([record], gates, {record.tag: {"HGMMA": 2, "STL": 1}})}
    assert results["sass_requires_HGMMA"].passed and not results["sass_requires_UTMALDG"].passed
    assert results["sass_forbids_LDL"].passed and not results["sass_forbids_STL"].passed
    assert results["sass_forbids_STL"].actual == 1


@pytest.mark.slow
def test_real_object_has_tensor_core_opcodes(tmp_path, nvcc_available):
    """s3b's mma.sync shows as HMMA in the SASS of a real sm_90a object."""
    from stagelab.core.build import nvcc_command
    from stagelab.core.registry import family_registry
    from stagelab.core.sass import object_sass

    registry = family_registry("sdpa")
    obj = tmp_path / "k.o"
    subprocess.run(nvcc_command(registry.get("s3b_register_softmax"), registry, obj), check=True, capture_output=True)
    counts = parse_sass(object_sass(obj))
    assert counts and all(c["HMMA"] > 0 and c["HGMMA"] == 0 for c in counts.values())
