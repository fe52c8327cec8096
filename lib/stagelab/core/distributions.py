"""Named input distributions, the part every family shares: the default one, the generator each
check's inputs come from, and which of a parameter file's distributions apply to a stage."""

from __future__ import annotations

import zlib
from collections.abc import Iterable

import torch

# The input distribution every family has: its standard inputs, what `make_inputs` gave before
# distributions had names (a parameter file without `distributions` checks on it alone).
DEFAULT_DISTRIBUTION = "normal"
_SEED_MASK = 2**63 - 1  # torch.Generator.manual_seed takes a non-negative 64-bit integer


def input_generator(key: tuple, distribution: str = DEFAULT_DISTRIBUTION) -> torch.Generator:
    """A CPU generator for one check's inputs: `key` (seed and problem, ints and bools only, whose
    hash is the same in every process) mixed with the distribution's name, so no two checks share
    data. The default distribution keeps the key alone: its inputs are those of every earlier run.
    The name enters through crc32, not hash(), which Python salts per process for strings."""
    if distribution != DEFAULT_DISTRIBUTION:
        key = (*key, zlib.crc32(distribution.encode()))
    return torch.Generator(device="cpu").manual_seed(hash(key) & _SEED_MASK)


def stage_distributions(family, requested: Iterable[str], input_kind: str = "") -> tuple[str, ...]:
    """Of the requested distributions (each must be the family's: a core.family.Family), those a stage of this input kind
    is checked on, in the requested order."""
    requested = tuple(requested)
    for name in requested:
        family.require_distribution(name)
    applicable = family.distributions_for(input_kind)
    return tuple(name for name in requested if name in applicable)
