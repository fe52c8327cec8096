"""Run tag keys that more than one module writes or reads, named once (metric keys: `metrics`).

The outcome tags are what every reader (batch summary, report, resume) filters on;
the owner tags say who holds a RUNNING run, so a run whose owner died can be found
and closed (see `owner` and `repair`).
"""

STAGE = "stage"
PARAMS_FILE = "params_file"
BATCH = "batch"
OUTCOME = "outcome"
OUTCOME_REASON = "outcome_reason"
NOTEBOOK_ERROR = "notebook_error"
SOURCE_HASH = "source_hash"

# Outcome values the batch runner writes itself (the judged ones live in `outcome.OUTCOMES`).
RUNNING = "running"
ERROR = "error"
KILLED = "killed"

# Who owns a run: the process that created it, and when it last said it was alive.
OWNER_HOST = "stagelab.owner.host"
OWNER_PID = "stagelab.owner.pid"
OWNER_START = "stagelab.owner.start"
OWNER_TIMEOUT_S = "stagelab.owner.timeout_s"
HEARTBEAT = "stagelab.heartbeat"
