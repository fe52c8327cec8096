"""`stagelab run --shard k/n`: the k-th of n pieces of a sweep, so that a job scheduler (a Slurm
array, Kubernetes jobs) can run the pieces on many machines against one team server.

Every piece computes the same sweep (same --params and --stages) and keeps the pairs at
positions k-1, k-1+n, k-1+2n, ...: dealt like cards, so each piece gets early (cheap) and late
(expensive) stages alike. The pieces are disjoint, together they are the sweep, and each keeps
the sweep's order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence, TypeVar

from ..core.errors import ConfigError

T = TypeVar("T")
_FORM = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


@dataclass(frozen=True)
class Shard:
    k: int  # 1-based, as Slurm's and Kubernetes' array indices are shifted to
    n: int

    @classmethod
    def parse(cls, text: str) -> "Shard":
        match = _FORM.match(text)
        if match is None:
            raise ConfigError(f"--shard {text!r}: expected k/n with whole numbers, e.g. 1/4")
        k, n = int(match.group(1)), int(match.group(2))
        if n < 1:
            raise ConfigError(f"--shard {text!r}: n is the number of pieces, at least 1")
        if not 1 <= k <= n:
            raise ConfigError(f"--shard {text!r}: k counts from 1 to n, so 1/{n} to {n}/{n}")
        return cls(k, n)

    def pick(self, sweep: Sequence[T]) -> list[T]:
        return [item for position, item in enumerate(sweep) if position % self.n == self.k - 1]

    def __str__(self) -> str:
        return f"{self.k}/{self.n}"
