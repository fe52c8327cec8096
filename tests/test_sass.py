"""SASS opcode counts and the instruction gates built on them."""

import subprocess

import pytest

from stagelab.core.errors import ConfigError
from stagelab.core.registry import ResourceGates
from stagelab.core.registry_fields import parse_gates
from stagelab.core.resources import KernelResources, evaluate_gates
from stagelab.core.sass import opcode_count, parse_sass, parse_sass_forms

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
        /*0050*/                   LDG.E.128 R4, desc[UR4][R2.64] ;               /* 0x0000000402047981 */
        /*0060*/               @P0 LDG.E.128 R8, desc[UR4][R2.64+0x10] ;          /* 0x0000100402080981 */
        /*0070*/                   LDG.E.U16 R12, desc[UR4][R6.64] ;              /* 0x00000004060c7981 */
        /*0080*/                   LDG.E.128.CONSTANT R16, desc[UR4][R2.64] ;     /* 0x0000000402107981 */
                ..........
                Function : plain
        /*0000*/                   EXIT ;
"""


def test_parse_counts_opcodes_per_function_and_arch():
    counts = parse_sass(SAMPLE)
    kernel = counts[("_Z6kernelILi64EEvPf", "sm_90a")]
    assert kernel["HGMMA"] == 2 and kernel["STL"] == 1 and kernel["BRA"] == 1 and kernel["LDC"] == 1
    assert kernel["LDG"] == 4 and "LDG.E.128" not in kernel
    assert counts[("plain", "sm_90a")] == {"EXIT": 1}


def test_instruction_gates_require_and_forbid():
    record = KernelResources(kernel="kernel<64>", mangled="_Z6kernelILi64EEvPf", arch="sm_90a", registers=90)
    gates = ResourceGates(sass_require=("HGMMA", "UTMALDG"), sass_forbid=("LDL", "STL"))
    results = {g.gate: g for g in evaluate_gates([record], gates, {record.tag: {"HGMMA": 2, "STL": 1}})}
    assert results["sass_requires_HGMMA"].passed and not results["sass_requires_UTMALDG"].passed
    assert results["sass_forbids_LDL"].passed and not results["sass_forbids_STL"].passed
    assert results["sass_forbids_STL"].actual == 1


def test_an_opcode_with_modifiers_counts_that_form_alone():
    """LDG.E.128 is the 16-byte load and nothing else (not LDG.E.U16, not LDG.E.128.CONSTANT);
    a bare LDG still counts every load, predicated ones included."""
    forms = parse_sass_forms(SAMPLE)[("_Z6kernelILi64EEvPf", "sm_90a")]
    assert forms["HGMMA.64x128x16.F32"] == 2 and forms["STL"] == 1
    assert opcode_count(forms, "LDG.E.128") == 2 and opcode_count(forms, "LDG.E.128.CONSTANT") == 1
    assert opcode_count(forms, "LDG") == 4 and opcode_count(forms, "LDG.E") == 0
    assert opcode_count(forms, "HGMMA") == 2 and opcode_count(forms, "LDS") == 0


def test_gates_name_instruction_forms():
    gates = parse_gates("stages.yaml: stage x", {"sass_require": ["LDG.E.128", "HGMMA.64x128x16.F32"],
                                                 "sass_forbid": ["LDG.E.U16"]}, ResourceGates())
    assert gates.sass_require == ("LDG.E.128", "HGMMA.64x128x16.F32") and gates.sass_forbid == ("LDG.E.U16",)
    forms = parse_sass_forms(SAMPLE)[("_Z6kernelILi64EEvPf", "sm_90a")]
    record = KernelResources(kernel="kernel<64>", mangled="_Z6kernelILi64EEvPf", arch="sm_90a", registers=90)
    counts = {record.tag: {op: opcode_count(forms, op) for op in (*gates.sass_require, *gates.sass_forbid)}}
    results = {g.gate: g for g in evaluate_gates([record], gates, counts)}
    assert results["sass_requires_LDG.E.128"].passed and results["sass_requires_LDG.E.128"].actual == 2
    assert not results["sass_forbids_LDG.E.U16"].passed
    with pytest.raises(ConfigError, match="instruction forms like"):
        parse_gates("stages.yaml: stage x", {"sass_require": ["LDG..128"]}, ResourceGates())


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


def test_the_family_chooses_the_watched_opcodes(tmp_path):
    """Each family's watched opcodes are counted for every kernel, a gate's on top; the lab's default
    is a short list any kernel has, with nothing of attention in it."""
    from stagelab.core.build import BuildResult
    from stagelab.core.family import Family, load_family
    from stagelab.core.registry import Stage
    from stagelab.measure.steps import resource_report

    (tmp_path / "sass.txt").write_text(SAMPLE)
    record = KernelResources(kernel="kernel<64>", mangled="_Z6kernelILi64EEvPf", arch="sm_90a", registers=90)
    result = BuildResult("x", "key", "hash", tmp_path, "", [record], cached=True, seconds=0.0)
    stage = Stage(id="x", title="x", parent=None, source=tmp_path / "x.cu",
                  gates=ResourceGates(sass_forbid=("LDG.E.U16",)))

    def counted(watched):
        report = resource_report(stage, result, watched)
        assert [g.gate for g in report.gates if not g.passed] == ["sass_forbids_LDG.E.U16"]
        return report.instructions[0]

    sdpa = counted(load_family("sdpa").watched_opcodes)
    assert sdpa == {"kernel": record.tag, "HGMMA": 2, "HMMA": 0, "UTMALDG": 0, "LDGSTS": 0, "LDL": 0, "STL": 1,
                    "SYNCS": 0, "USETMAXREG": 0, "LDG.E.U16": 1}
    softmax = counted(load_family("softmax").watched_opcodes)
    assert softmax["LDG"] == 4 and softmax["LDG.E.128"] == 2 and "HGMMA" not in softmax
    assert not {"HGMMA", "HMMA", "UTMALDG"} & set(Family.watched_opcodes)
    assert set(counted(Family.watched_opcodes)) == {"kernel", *Family.watched_opcodes, "LDG.E.U16"}
