"""stagelab: a stage-tracked lab for optimizing CUDA kernels.

Each stage is a parameterized notebook that builds its kernel, checks it
against a float64 reference, times it against PyTorch SDPA and its parent
stage, reads the ptxas resource report, decides an outcome and logs all of it
to MLflow. The modules each have one job, in layers (core, measure, judge, record; run and
tune on top; docs/ARCHITECTURE.md); `stagelab.stage.StageRun` strings them together for the
notebooks.
"""

__version__ = "0.1.0"
