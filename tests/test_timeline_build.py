"""The launch timeline's harness (tools/microbench/sdpa_timeline.cu) builds for an INT8 stage: s19
exports sdpa_int8_forward and its quantizer, which the harness finds by weak symbols and uses to make
the 8-bit operands (its sdpa_forward only refuses). No GPU needed: nvcc alone."""

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_harness_builds_for_the_int8_stage(tmp_path, nvcc_available):
    binary = tmp_path / "sdpa_timeline"
    build = subprocess.run(["nvcc", "-std=c++17", "-O3", "-gencode=arch=compute_90a,code=sm_90a", "-DWS_TIMELINE=1",
                            '-DSTAGE_SOURCE="s19_int8.cu"', "-I", str(ROOT / "kernels/sdpa"), "-o", str(binary),
                            str(ROOT / "tools/microbench/sdpa_timeline.cu")],
                           capture_output=True, text=True, timeout=900)
    assert build.returncode == 0, build.stderr[-3000:]
    symbols = subprocess.run(["nm", "-C", str(binary)], capture_output=True, text=True, check=True).stdout
    assert "sdpa_int8_forward" in symbols and "sdpa_int8_quantize" in symbols
