"""The metric schema: every MLflow metric key stagelab writes or reads, named once, with its unit.

Writers (the recorder, the batch runner), readers (the batch summary, the
report, the comparison notebook) and the tests build keys only through this
module, so a rename here moves every side at once.

Key forms:
  run-level            `mission_p50_us`
  per problem          `p50_us/2x8x512x64`, and for a timing mode other than the
                       parameter file's first, `p50_us_hot/2x8x512x64`
  per problem, dtype   `max_abs_err/2x8x512x64/float16`
  per input distribution `check_worst_ratio/large`
  per kernel instance  `registers/sdpa_s0_kernel.fp16.64.sm_90a`
  per contender        `speedup_vs_flash/2x8x512x64`, `speedup_vs_parent_geomean`
  per launch variant   the stage's timing keys under it, `variant/quantizing/p50_us/2x8x512x64`
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_UNSAFE = re.compile(r"[^A-Za-z0-9_\-./ ]")


def safe_key(key: str) -> str:
    """MLflow allows letters, digits, _ - . / and spaces; anything else becomes '.'."""
    return _UNSAFE.sub(".", key)


@dataclass(frozen=True)
class Metric:
    name: str
    unit: str
    help: str

    def key(self, *parts: str) -> str:
        return safe_key("/".join([self.name, *parts]))

    def timed(self, shape: str, mode: str, primary_mode: str) -> str:
        """A per-problem timing key; modes other than the primary one carry a suffix."""
        suffix = "" if mode == primary_mode else f"_{mode}"
        return safe_key(f"{self.name}{suffix}/{shape}")


# -- build and notebook ------------------------------------------------------------
BUILD_SECONDS = Metric("build_seconds", "s", "wall time of the build step (cached builds are fast)")
NOTEBOOK_SECONDS = Metric("notebook_seconds", "s", "wall time of the whole stage notebook in a batch")

# -- resources, per kernel instance and their worst case -----------------------------
REGISTERS = Metric("registers", "registers/thread", "ptxas: registers per thread")
SHARED_MEMORY = Metric("shared_memory_bytes", "bytes", "static + launch-time shared memory per block")
STACK_FRAME = Metric("stack_frame_bytes", "bytes", "ptxas: stack frame per thread")
SPILL_STORES = Metric("spill_stores_bytes", "bytes", "ptxas: spill stores per thread")
SPILL_LOADS = Metric("spill_loads_bytes", "bytes", "ptxas: spill loads per thread")
BARRIERS = Metric("barriers", "count", "ptxas: named barriers used")
MAX_REGISTERS = Metric("max_registers", "registers/thread", "most registers of any kernel instance")
MAX_SHARED_MEMORY = Metric("max_shared_memory_bytes", "bytes", "most shared memory of any kernel instance")
TOTAL_SPILLS = Metric("total_spill_bytes", "bytes", "spill stores + loads over all kernel instances")
MAX_STACK_FRAME = Metric("max_stack_frame_bytes", "bytes", "largest stack frame of any kernel instance")
INSTRUCTION_COUNT = Metric("sass", "instructions", "count of one SASS opcode in one kernel instance")
# -- a trial's main loops against the default's (stagelab.core.sass_loops) ----------------
MAIN_LOOP_SIMILARITY_MIN = Metric("main_loop_similarity_min", "ratio", "a trial's kernels' main loops: the "
                                  "lowest similarity of a loop's opcode sequence to the default's (1: the same)")
MAIN_LOOP_R2UR_ADDED = Metric("main_loop_r2ur_added", "instructions", "a trial's kernels' main loops: the most "
                              "R2UR one holds beyond the default's (wgmma descriptors rebuilt each iteration)")

# -- correctness ----------------------------------------------------------------------
CHECKS_TOTAL = Metric("checks_total", "count", "correctness checks run")
CHECKS_FAILED = Metric("checks_failed", "count", "correctness checks failed")
PROBLEMS_SKIPPED = Metric("problems_skipped", "count", "problems of the parameter file the stage does not take "
                          "(stages.yaml `supports:`): skipped before any launch, neither passed nor failed")
MAX_ABS_ERR = Metric("max_abs_err", "output units", "worst |out - ref| over seeds and input distributions, "
                     "per problem and dtype (a `large` distribution's outputs are hundreds)")
ERR_BUDGET_RATIO = Metric("err_budget_ratio", "ratio", "worst error / budget over seeds and input distributions, "
                          "per problem and dtype (< 1 passes)")
MAX_ERR_BUDGET_RATIO = Metric("max_err_budget_ratio", "ratio", "worst error / budget of the run")
CHECK_WORST_RATIO = Metric("check_worst_ratio", "ratio", "worst error / budget over every check of one named "
                           "input distribution: check_worst_ratio/<distribution> (< 1 passes)")
CHAINS_TOTAL = Metric("chains_total", "count", "dependent-launch chains run (stagelab.measure.chain), one per problem")
CHAINS_FAILED = Metric("chains_failed", "count", "chains whose back-to-back links differed from the synchronised chain")
# Launch plans (core.launch_plans): table results/launch_plans.csv|.md, per problem and dtype the plan its
# checks took, then each declared plan no check reached.
TABLE_LAUNCH_PLANS = "launch_plans"
LAUNCH_PLANS_DECLARED = Metric("launch_plans_declared", "count", "launch plans the stage's build declares")
LAUNCH_PLANS_REACHED = Metric("launch_plans_reached", "count", "declared launch plans at least one check took")
LAUNCH_PLANS_UNDECLARED = Metric("launch_plans_undeclared", "count", "plans checks took that the build does not declare")

# -- stress (stagelab.measure.stress): checks and chains again and again under perturbed timing ------------
STRESS_ROUNDS = Metric("stress_rounds", "count", "rounds of checks and chains the stress step ran, over every "
                       "perturbation (build side, delay, load, grid)")
STRESS_FAILED = Metric("stress_failed", "count", "stress rounds in which a check or chain failed, per perturbation: "
                       "stress_failed/<perturbation>, and in all")
STRESS_SECONDS = Metric("stress_seconds", "s", "wall time of the stress step")

# -- protocol (stagelab.measure.protocol): launches of the ring-protocol-checking build (SDPA_PROTOCOL=1) ----
TABLE_PROTOCOL = "protocol"  # results/protocol.csv|.md: per problem and dtype, the launch plan and the report
PROTOCOL_LAUNCHES = Metric("protocol_launches", "count", "launches of the protocol-checking build, each "
                           "followed by a read of its violation record")
PROTOCOL_VIOLATIONS = Metric("protocol_violations", "count", "protocol launches whose record named a violation")

# -- timing, per problem (mode-suffixed), of the stage ------------------------------------
P50_US = Metric("p50_us", "us", "median latency")
P90_US = Metric("p90_us", "us", "90th percentile latency")
P99_US = Metric("p99_us", "us", "99th percentile latency")
IQR_US = Metric("iqr_us", "us", "interquartile range of the latency")
TFLOPS = Metric("tflops", "TFLOP/s", "the problem's FLOPs over the median latency")
GBPS = Metric("gbps", "GB/s", "the problem's byte floor over the median latency")
TIMED_STATS = (P50_US, P90_US, P99_US, IQR_US, TFLOPS, GBPS)
# What the GPU ran at while a contender was timed (stagelab.measure.gpu_clocks; absent without nvidia-smi).
SM_CLOCK_MHZ = Metric("sm_clock_mhz", "MHz", "mean SM clock nvidia-smi sampled while the stage was timed")
MIN_SM_CLOCK_MHZ = Metric("min_sm_clock_mhz", "MHz", "lowest SM clock sampled while the stage was timed")
POWER_W = Metric("power_w", "W", "mean of nvidia-smi's power.draw while the stage was timed (the driver's own "
                 "average over about a second: it lags a short timing)")
POWER_CAPPED_PCT = Metric("power_capped_pct", "%", "share of those samples with the SW power cap lowering the clock")
CLOCK_STATS = (SM_CLOCK_MHZ, MIN_SM_CLOCK_MHZ, POWER_W, POWER_CAPPED_PCT)
MISSION_P50_US = Metric("mission_p50_us", "us", "stage median latency at the mission problem, primary mode")
VARIANT = Metric("variant", "", "a launch variant's timing (Family.launch_variants): variant/<name>/<stage key>")
TIMING_FLOOR_US = Metric("timing_floor_us", "us", "median of an empty kernel by the same recipe, per mode")

# -- compute-sanitizer (memcheck, racecheck, synccheck) at the family's small odd problems -----
SANITIZER_ERRORS = Metric("sanitizer_errors", "count", "errors one compute-sanitizer tool reported, per tool")
SANITIZER_WARNINGS = Metric("sanitizer_warnings", "count", "racecheck hazards reported as warnings, per tool")
SANITIZER_SECONDS = Metric("sanitizer_seconds", "s", "wall time of one compute-sanitizer tool on the stage's child launch")

# -- Nsight Compute, per profiled problem (the mission problem and one long problem) ---------
NCU_DURATION_US = Metric("ncu_duration_us", "us", "ncu: the stage's kernels' GPU time at one launch (clocks locked)")
NCU_TENSOR_UTIL = Metric("ncu_tensor_util_pct", "%", "ncu: tensor pipe (HMMA or GMMA, the one the stage uses) "
                         "cycles active, % of peak sustained")
NCU_TFLOPS = Metric("ncu_tflops", "TFLOP/s", "the problem's FLOPs over the ncu kernel duration")
NCU_DRAM_BYTES = Metric("ncu_dram_bytes", "bytes", "ncu: bytes read and written in DRAM")
NCU_DRAM_PCT = Metric("ncu_dram_throughput_pct", "%", "ncu: DRAM throughput, % of peak sustained")
NCU_ARITHMETIC_INTENSITY = Metric("ncu_flop_per_dram_byte", "FLOP/byte", "the problem's FLOPs over ncu DRAM bytes")
NCU_L2_HIT = Metric("ncu_l2_hit_rate_pct", "%", "ncu: L2 sector hit rate")
NCU_L2_BYTES = Metric("ncu_l2_bytes", "bytes", "ncu: bytes through L2 (hits and misses)")
NCU_L2_PCT = Metric("ncu_l2_throughput_pct", "%", "ncu: L2 throughput, % of peak sustained")
NCU_OCCUPANCY = Metric("ncu_occupancy_pct", "%", "ncu: achieved occupancy (warps active, % of peak sustained)")
NCU_REGISTERS = Metric("ncu_registers_per_thread", "registers/thread", "ncu: registers per thread at launch")
NCU_BANK_CONFLICTS = Metric("ncu_smem_bank_conflicts", "count", "ncu: shared-memory bank conflicts (LSU)")
NCU_STALL = Metric("ncu_stall", "warps per issue", "ncu: warps stalled for one reason per issued instruction, "
                   "for the top three reasons: ncu_stall/<reason>/<problem>")
NCU_PEAK_TFLOPS = Metric("ncu_peak_tflops", "TFLOP/s", "dense fp16 tensor peak: SMs x SM clock under ncu x "
                         "the architecture's FLOP per SM cycle")
NCU_PEAK_DRAM_GBPS = Metric("ncu_peak_dram_gbps", "GB/s", "ncu: DRAM peak bytes per cycle x DRAM clock")

# -- exploration sweeps logged from stage notebooks ---------------------------------------
SWEEP_P50_US = Metric("sweep_p50_us", "us", "median latency of one variant of a notebook sweep")


def speedup(contender: str) -> Metric:
    """Ratio of a contender's median to the stage's (> 1: the stage is faster)."""
    return Metric(f"speedup_vs_{contender}", "ratio", f"p50 of {contender} / p50 of the stage")


def speedup_geomean(contender: str) -> Metric:
    return Metric(f"speedup_vs_{contender}_geomean", "ratio",
                  f"geometric mean over the timed problems of the speedup over {contender}, primary mode")


# Contender labels in speedup keys: `parent` for the parent stage, the library
# contender's own name, and `best` for the fastest library contender per problem.
PARENT = "parent"
BEST_CONTENDER = "best"

# -- tuning (stagelab tune) ------------------------------------------------------------
TUNE_SCORE_US = Metric("tune_geomean_p50_us", "us",
                       "geometric mean over the timed problems of a configuration's p50, primary mode: "
                       "the tune ranks configurations by it (lower is better)")
ELITE_SCORE_US = Metric("elite_geomean_p50_us", "us", "the tune score of the elite of a given rank (1 = best)")
TUNE_CONFIGS = Metric("tune_configurations", "count", "configurations in the tune's search space, by outcome")

# Tags of tune runs, and the run tags a tune reads back to resume. `mlflow.parentRunId`
# is MLflow's own: the UI nests a configuration's run under its tune run through it.
TAG_STAGE = "stage"
TAG_PARAMS_FILE = "params_file"
TAG_STEPS_OVERRIDE = "steps_override"  # `stagelab run --steps`: the optional steps run instead of the file's
TAG_GPU = "gpu"
TAG_OUTCOME = "outcome"
TAG_OUTCOME_REASON = "outcome_reason"
TAG_SOURCE_HASH = "source_hash"
TAG_PARENT_RUN = "mlflow.parentRunId"
TAG_TUNE_ROLE = "tune_role"           # TUNE_ROLE_PARENT on the tune run, TUNE_ROLE_CONFIG on each configuration
TUNE_ROLE_PARENT = "tune"
TUNE_ROLE_CONFIG = "configuration"
TAG_TUNE_CONFIG = "tune_config"       # the configuration's label, BLOCK_N=32,PIPELINE_STAGES=2
TAG_TUNE_SPACE = "tune_space"         # the search space of the latest tune on the run (it may grow)
TAG_PROMOTED = "tune_promoted"        # what the best configuration was promoted to

# Tags of the sanitize and profile steps: their verdict, or why they did not run.
TAG_SANITIZE = "sanitize"             # clean, errors, crashed, timeout, unavailable, skipped
TAG_PROFILE = "profile"               # profiled, failed, timeout, unavailable, skipped
TAG_STRESS = "stress"                 # passed, failed, hang, skipped (stagelab.measure.stress)
TAG_PROTOCOL = "protocol"             # passed, failed, skipped (stagelab.measure.protocol)
TAG_HANG = "hang"                     # what hung and after how long (stagelab.measure.watchdog); absent when none
TAG_TOP_STALLS = "ncu_top_stalls"     # ncu_top_stalls/<problem>: the three largest stall reasons, largest first

# -- batch runs: what the runner writes besides the judged outcome, and who owns a run ---------
TAG_BATCH = "batch"                   # the runs/ folder of the batch that made the run
TAG_NOTEBOOK_ERROR = "notebook_error"  # a notebook that failed after it had decided its outcome
OUTCOME_RUNNING = "running"           # the outcome tag's value until the notebook decides
OUTCOME_ERROR = "error"               # the notebook crashed or timed out before deciding
OUTCOME_KILLED = "killed"             # stopped by a signal, or left RUNNING by an owner that is gone
# The process that created the run (see `owner`), and when it last said it was alive.
TAG_OWNER_HOST = "stagelab.owner.host"
TAG_OWNER_PID = "stagelab.owner.pid"
TAG_OWNER_START = "stagelab.owner.start"
TAG_OWNER_TIMEOUT_S = "stagelab.owner.timeout_s"
TAG_HEARTBEAT = "stagelab.heartbeat"
# Several GPUs and machines (stagelab run --gpus, --shard). The GPU's name is TAG_GPU: the runner
# writes nvidia-smi's name when it binds a notebook to a GPU, the notebook torch's when it starts.
TAG_GPU_INDEX = "gpu_index"           # the GPU the runner bound the notebook to (its CUDA_VISIBLE_DEVICES)
TAG_CPU_THREADS = "cpu_threads"       # OMP_NUM_THREADS the runner gave the notebook (its share of the cores)
TAG_CUDA_VISIBLE_DEVICES = "cuda_visible_devices"  # as the notebook's own process saw it; UNSET when not set
CUDA_VISIBLE_DEVICES_UNSET = "unset"
TAG_SHARD = "shard"                   # k/n of the batch that made the run, when it ran one shard of a sweep
# The tune run's tags per elite rank (1 = best): tune.store.elite_tag (its label), elite_run_tag (its run id).

# -- trials (stagelab try): a variant, a define or a patch measured against the stage's default ----
# A trial is a run in its stage's experiment; these tags tell it from the stage runs (the UI's
# trials link filters on TAG_KIND, the journal on TAG_TRIAL_OF). No `outcome` tag: a trial is not
# a stage run, so the report, the batch summary and --resume never take it for one.
TAG_KIND = "stagelab.kind"
KIND_TRIAL = "trial"
TAG_TRIAL_OF = "stagelab.trial_of"             # the stage id the trial changes
TAG_TRIAL_NAME = "stagelab.trial.name"         # its short label: the variant, the defines or the patch
TAG_TRIAL_DEFINES = "stagelab.trial.defines"   # JSON of the define overrides ({} for a code change)
TAG_TRIAL_PATCH = "stagelab.trial.patch"       # the patch's file name (the patch is an artifact)
TAG_HYPOTHESIS = "stagelab.trial.hypothesis"
TAG_VERDICT = "stagelab.trial.verdict"         # trial.VERDICTS
TAG_VERDICT_REASON = "stagelab.trial.verdict_reason"
TAG_CONCLUSION = "stagelab.trial.conclusion"   # added later: `stagelab try note RUN "..."`
TAG_KEY_NUMBERS = "stagelab.trial.key_numbers"  # one line of the headline numbers, for the journal
TAG_TRIAL_COMMIT = "stagelab.trial.commit"     # the commit measured at (the original one when imported)
TAG_TRIAL_GPU = "stagelab.trial.gpu"
TAG_TRIAL_DATE = "stagelab.trial.date"         # an imported trial's date as its log gave it (the run starts then)
TAG_TRIAL_VARIANT = "stagelab.trial.variant"   # the registry variant it builds, when it is one
TAG_TRIAL_SESSION = "stagelab.trial.session"   # an imported trial's session name in the logs
TAG_TRIAL_LOG_SOURCE = "stagelab.trial.log_source"  # where in the logs an imported trial was written down
TAG_TRIAL_CHECKS = "stagelab.trial.checks"     # an imported trial's correctness evidence, as the log gave it
TAG_TRIAL_FROM_RUN = "stagelab.trial.from_run"  # the stage run whose notebook started the trial
TAG_IMPORTED_FROM = "imported_from"            # the file an imported trial came from (issue 30)
TAG_IMPORT_HASH = "stagelab.trial.import_hash"  # content hash of the imported entry: import is idempotent
TRIAL_DEFAULT_LABEL = "default"                 # the stage's default build in a trial's timing tables
IMPORTED_NUMBER = Metric("imported", "as logged", "a number an imported trial's log gave: "
                         "imported/<metric>/<problem>/<trial|default|clock_mhz>")


def of_default(key: str) -> str:
    """The default build's value of a metric key, on a trial's run: `default/<key>`."""
    return safe_key(f"{TRIAL_DEFAULT_LABEL}/{key}")
