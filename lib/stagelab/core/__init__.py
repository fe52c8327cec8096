"""core: what a stage is and how it becomes a kernel, before anything runs on a GPU.

Owns the errors, the repository paths, the metric names and units, the stage registry and its
search spaces, the parameter files, the family protocol, the nvcc build with its cache, the ptxas
resource report and its gates, the SASS reader, the machine's environment and process-tree
stopping. It imports nothing else of stagelab (the family package is found by name).
"""
