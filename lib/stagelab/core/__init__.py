"""core: what a stage is and how it becomes a kernel, before anything runs on a GPU.

Owns the errors, the repository paths, the metric names and units, the stage registry (stages.yaml,
field by field) and its search spaces, the parameter files, the family protocol (with its launch-plan
hooks and the plans a parameter file's problems take: launch_plans, coverage; its launch variants:
launch_variants), the run's
`StageContext`, the CUDA toolchain, the build backends (nvcc, Triton, CuTe DSL) with their cache (and the
headers a CUDA stage's build hash covers: includes), the ptxas
resource report and its gates, the SASS reader (and the digests that compare two checkouts' builds:
sass_kernels, object_code), the git questions about a family's files, the machine's environment, process-tree stopping
and the formatting of numbers for people. It imports nothing else of stagelab (the families are
found by name).
"""
