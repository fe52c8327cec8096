"""The issue schedule ptxas writes into a SASS listing: each instruction's stall count, the
cycles its warp waits before it may issue its next instruction (the control bits of Volta
through Hopper encodings, which `cuobjdump -sass` prints as the second 64-bit word of each
instruction).

What it is for: a softmax is paced by its MUFU.EX2s (4 lanes a clock per sub-partition, so a
warp's MUFU instruction holds the XU 8 clocks), and an exponential issued straight after
another carries an 8-cycle stall in which its warp issues nothing else. Those cycles can be
counted from the listing alone, before any GPU time (tools/sass_stalls.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .sass import FUNCTION_RE

# Bits 105-108 of the 128-bit instruction: bits 41-44 of its second word.
STALL_SHIFT = 41
STALL_MASK = 0xF

_FIRST_WORD_RE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;\s*/\*\s*0x[0-9a-f]{16}\s*\*/")
_SECOND_WORD_RE = re.compile(r"^\s*/\*\s*(0x[0-9a-f]{16})\s*\*/\s*$")
_PREDICATE_RE = re.compile(r"^@!?U?P[T0-9]+\s+")


@dataclass(frozen=True)
class Instruction:
    address: int
    text: str
    stall: int

    @property
    def opcode(self) -> str:
        """The mnemonic with its modifiers (MUFU.EX2, HGMMA.64x128x16.F32), without a predicate."""
        return _PREDICATE_RE.sub("", self.text).split()[0]


@dataclass(frozen=True)
class ScheduleSummary:
    function: str
    instructions: int
    stall_cycles: int  # every instruction's stall count, summed
    watched: int  # instructions of the watched opcode
    back_to_back: int  # watched instructions issued straight after another one
    idle_cycles: int  # the stall cycles of those, beyond the one an issue takes anyway


def functions(listing: str) -> dict[str, list[Instruction]]:
    """Each function's instructions in order, with their stall counts."""
    out: dict[str, list[Instruction]] = {}
    current: list[Instruction] | None = None
    lines = listing.splitlines()
    for index, line in enumerate(lines):
        if match := FUNCTION_RE.match(line):
            current = out.setdefault(match.group(1), [])
            continue
        first = _FIRST_WORD_RE.search(line)
        if current is None or first is None or index + 1 >= len(lines):
            continue
        second = _SECOND_WORD_RE.match(lines[index + 1])
        if second is None:
            raise ValueError(f"SASS line {index + 2}: expected the control word of {first.group(2)!r}")
        stall = (int(second.group(1), 16) >> STALL_SHIFT) & STALL_MASK
        current.append(Instruction(int(first.group(1), 16), first.group(2), stall))
    return out


def summarize(function: str, instructions: list[Instruction], opcode: str = "MUFU.EX2") -> ScheduleSummary:
    """How often `opcode` follows itself, and the issue cycles its warp loses there: the stall
    count of the first of each such pair, less the cycle of an issue."""
    pairs = [first for first, second in zip(instructions, instructions[1:])
             if first.opcode == opcode and second.opcode == opcode]
    return ScheduleSummary(
        function=function, instructions=len(instructions),
        stall_cycles=sum(inst.stall for inst in instructions),
        watched=sum(inst.opcode == opcode for inst in instructions),
        back_to_back=len(pairs), idle_cycles=sum(max(first.stall - 1, 0) for first in pairs))
