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
        self.log = log
