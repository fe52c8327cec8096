"""Errors that name the problem. Every user-facing failure is one of these."""


class StagelabError(Exception):
    """Base class: anything stagelab raises on purpose."""


class ConfigError(StagelabError):
    """A registry or parameter file is malformed; the message names file and key."""


class InputError(StagelabError, ValueError):
    """Tensors handed to a kernel wrapper that the kernels do not support."""


class BuildError(StagelabError):
    """A stage failed to compile or link; `log` carries the full compiler output."""

    def __init__(self, message: str, log: str):
        super().__init__(f"{message}\n--- compiler log ---\n{log}")
        self.reason = message
        self.log = log

    def __reduce__(self):
        # rebuilt from both parts, so it survives the trip back from a build worker process
        return BuildError, (self.reason, self.log)


class StoreError(StagelabError):
    """The MLflow store cannot be used (server unreachable, SQLite file damaged); the message
    names the store and what to do."""


class NoRunsError(StagelabError, FileNotFoundError):
    """A page asked of a store that holds no run for it (no experiment, no finished GPU run of
    those parameter files); the message says which and what to run."""


class RunnerStopped(StagelabError):
    """SIGINT or SIGTERM reached the batch runner. The runner fills in the stages whose runs it
    recorded as killed (one per running notebook) and the stages that never ran, so the one-line
    message says both."""

    def __init__(self, signum: int):
        super().__init__()
        self.signum = signum
        self.killed: list[str] = []
        self.not_run: list[str] = []

    @property
    def signal_name(self) -> str:
        import signal

        return signal.Signals(self.signum).name

    def __str__(self) -> str:
        killed = f"; {', '.join(self.killed)} recorded as killed" if self.killed else ""
        not_run = f"; not run: {', '.join(self.not_run)}" if self.not_run else "; every stage had run"
        return f"stopped by {self.signal_name}{killed}{not_run}"


class KernelHang(StagelabError):
    """A launch not done within its watchdog's bound (stagelab.measure.watchdog). The CUDA context is then
    lost for good: nothing more may be launched or synchronised in this process, so the stage is
    judged `incorrect` (reason `hang`), recorded, and the process exits."""

    def __init__(self, what: str, waited_s: float, deadline_s: float):
        super().__init__(f"{what} not done after {waited_s:.1f} s (bound {deadline_s:.1f} s)")
        self.what = what
        self.waited_s = waited_s
        self.deadline_s = deadline_s

    def __reduce__(self):
        return KernelHang, (self.what, self.waited_s, self.deadline_s)


class KernelCrash(StagelabError, RuntimeError):
    """Work waited on by the watchdog (stagelab.measure.watchdog) failed on the GPU instead of
    completing: CUDA reported the error (an illegal address, an unspecified launch failure) when its
    event was queried. The message keeps CUDA's first line and drops torch's debugging advice; the
    CUDA context is lost, as after a hang."""

    def __init__(self, what: str, waited_s: float, cuda_error: str):
        super().__init__(f"{what} crashed on the GPU {waited_s:.1f} s after it was waited on: {cuda_error} "
                         "(the CUDA context is lost)")
        self.what = what
        self.waited_s = waited_s
        self.cuda_error = cuda_error

    def __reduce__(self):
        return KernelCrash, (self.what, self.waited_s, self.cuda_error)
