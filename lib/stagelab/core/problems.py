"""Every problem of a file at once: a check that finds one records it and the checking goes on, so a
parameter file with three mistakes is one error listing the three (one a line), not three rounds of
fix-and-rerun."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from .errors import ConfigError

T = TypeVar("T")


class Problems:
    """The ConfigErrors a file's checks raised; `raise_any` raises them as one."""

    def __init__(self, what: str):
        self.what = what  # the file, as the combined error's first line names it
        self.messages: list[str] = []

    def check(self, check: Callable[..., T], *args: Any, otherwise: Any = None) -> T:
        """check(*args), or `otherwise` after recording the ConfigError it raised."""
        try:
            return check(*args)
        except ConfigError as exc:  # a combined error (a nested check's raise_any) adds each of its problems
            self.messages.extend(getattr(exc, "problems", None) or [str(exc)])
            return otherwise

    def raise_any(self) -> None:
        """One ConfigError: the only problem as it is, or every problem, one a line."""
        if len(self.messages) == 1:
            raise ConfigError(self.messages[0])
        if self.messages:
            error = ConfigError(f"{self.what}: {len(self.messages)} problems:\n"
                                + "\n".join(f"  {message}" for message in self.messages))
            error.problems = list(self.messages)
            raise error
