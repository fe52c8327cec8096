"""A Triton stage through the lab's commands without a GPU: `stagelab resources` prints its
registers and gates, and `stagelab try` builds its trials in worker processes, reads their
resources, SASS and main loops against the default's, and records them (verdict no_gpu). The stage
is a Triton softmax in a copy of the softmax family's folder, beside its CUDA stages."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from stagelab.core import metrics as m
from stagelab.core.trial_spec import TrialSpec
from stagelab.record import tracking

pytest.importorskip("triton")
pytestmark = pytest.mark.slow  # each test builds kernels
ROOT = Path(__file__).resolve().parents[1]
STAGE = "smt_triton_rows"

STAGE_FILE = '''
import triton
import triton.language as tl

KNOBS = {"BLOCK": 1024, "num_warps": 4}


@triton.jit
def _softmax_rows(x_ptr, out_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    # a finite start, so lanes that only ever see masked (-inf) elements keep exp(m - m_new) = 1
    m = tl.full([BLOCK], -1e30, tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * cols + offs, mask=offs < cols, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        s = s * tl.exp(m - m_new) + tl.exp(x - m_new)
        m = m_new
    row_max = tl.max(m, 0)
    total = tl.sum(s * tl.exp(m - row_max), 0)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * cols + offs, mask=offs < cols, other=float("-inf")).to(tl.float32)
        y = tl.exp(x - row_max) / total
        tl.store(out_ptr + row * cols + offs, y.to(out_ptr.dtype.element_ty), mask=offs < cols)


def compile_specs():
    return [dict(kernel=_softmax_rows, signature={"x_ptr": f"*{t}", "out_ptr": f"*{t}", "cols": "i32",
                                                  "BLOCK": "constexpr"},
                 constexprs={"BLOCK": KNOBS["BLOCK"]}, num_warps=KNOBS["num_warps"], name=t) for t in ("fp16", "bf16")]


def stage_config():
    return f"BLOCK={KNOBS['BLOCK']}, num_warps={KNOBS['num_warps']}"


def forward(x, out, stream):  # Triton launches on torch's current stream, the one the family passes
    _softmax_rows[(x.shape[0],)](x, out, x.shape[1], BLOCK=KNOBS["BLOCK"], num_warps=KNOBS["num_warps"])
'''

ENTRY = f"""
  - id: {STAGE}
    title: "smt: a Triton row softmax"
    parent: sm1_warp_online
    backend: triton
    changes: one program per row, online max and sum over BLOCK-wide chunks, in Triton
    compile_options:
      defines: {{BLOCK: 1024}}
    hypothesis: the lab takes a Triton stage beside the CUDA ones
"""


@pytest.fixture
def root(tmp_path, monkeypatch):
    """A project root whose softmax family holds one more stage, a Triton file."""
    shutil.copytree(ROOT / "kernels" / "softmax", tmp_path / "kernels" / "softmax")
    shutil.copytree(ROOT / "params", tmp_path / "params")
    (tmp_path / "kernels" / "softmax" / f"{STAGE}.py").write_text(STAGE_FILE)
    with open(tmp_path / "kernels" / "softmax" / "stages.yaml", "a") as registry:
        registry.write(ENTRY)
    monkeypatch.setenv("STAGELAB_ROOT", str(tmp_path))
    monkeypatch.setenv("STAGELAB_BUILD_DIR", str(tmp_path / "build"))
    return tmp_path


def test_stagelab_resources_prints_a_triton_stage_registers_and_gates(root):
    proc = subprocess.run([sys.executable, "-m", "stagelab", "resources", STAGE], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "lib")}, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "_softmax_rows.fp16.sm_90a" in proc.stdout and "_softmax_rows.bf16.sm_90a" in proc.stdout
    assert "gates: all pass" in proc.stdout  # the family's defaults: registers, shared memory, no spills, no LDL/STL


def test_stagelab_try_builds_and_records_a_triton_trial_without_a_gpu(root, tmp_store):
    from stagelab.record.journal import trials_filter
    from stagelab.run.trial import run_trials

    session = run_trials(STAGE, [TrialSpec.of(defines={"BLOCK": "256"})], hypothesis="narrower chunks", jobs=2,
                         progress=lambda line: None)
    [trial] = session.trials
    assert trial.verdict.verdict == "no_gpu" and trial.measured.build.module.KNOBS["BLOCK"] == 256
    assert session.default.build.module.KNOBS["BLOCK"] == 1024
    assert trial.measured.resources.passed and trial.measured.main_loops is not None
    client = tracking.client()
    experiment = client.get_experiment_by_name("stagelab-softmax")
    [run] = client.search_runs([experiment.experiment_id], trials_filter(STAGE))
    assert run.data.metrics[m.MAX_REGISTERS.key()] > 0 and run.data.tags[m.TAG_VERDICT] == "no_gpu"
