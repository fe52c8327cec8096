"""run: batches of stages, run by workers under supervision.

Owns `stagelab run` (the batch, its GPU workers, their supervision and stopping, shards, resume
and repair of stale runs), the progress display and the team server. It may import every layer
below it: `core`, `measure`, `judge`, `record`.
"""
