"""The loops of a SASS listing and a kernel's main loop, compared with another build's: what a
change did to the code a kernel spends its time in, from the listings alone (tools/sass_loops.py).

Why: ptxas schedules a kernel's main loop as a whole, and code added anywhere in the kernel can
change it. Two ways that cost s17's stream-K trials 5-15% on every head_dim-64 launch (H100,
H200), and both show in the listing before any GPU time:
- a work loop ptxas cannot prove warp-uniform moves the loop's addresses to vector registers, and
  every wgmma descriptor is then rebuilt by R2UR (vector to uniform register) each iteration;
- the loop keeps its length but its instructions move (O's rescale went between the pingpong
  turn's barrier and the Q.K^T issue): the opcode sequence is no longer the default's.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from .sass_schedule import Instruction, functions

_BRANCH_TARGET_RE = re.compile(r"\bBRA\b.*?0x([0-9a-f]+)")
# Hopper's warpgroup MMA in SASS, by operand type: fp16/bf16/tf32, fp8, int8 (s19's Q.K^T), binary.
WGMMA_OPCODES = ("HGMMA", "QGMMA", "IGMMA", "BGMMA")
# A template wrapper's opening in an Itanium-mangled name: NS_<length><Name>I (StreamKTail<...>).
WRAPPER_RE = re.compile(r"NS_(\d+)([A-Z]\w*?)I")


@dataclass(frozen=True)
class Loop:
    """The instructions from a backward branch's target to the branch, in address order, and
    their opcodes (parsed once: a listing's loops hold millions of instructions between them)."""

    instructions: tuple[Instruction, ...]
    opcode_sequence: tuple[str, ...]

    @property
    def start(self) -> int:
        return self.instructions[0].address

    def count(self, opcode_prefix: str | tuple[str, ...]) -> int:
        return sum(op.startswith(opcode_prefix) for op in self.opcode_sequence)

    @property
    def uniform(self) -> int:
        """Instructions of the uniform datapath (UIADD3, ULEA, ULDC, ...): one per warp, not per lane."""
        return self.count("U")

    def barrier_to_wgmma(self) -> int | None:
        """Instructions from the loop's first named-barrier wait (BAR.SYNC: a pingpong turn) to the
        first wgmma after it: how soon a warpgroup issues its GEMMs once it holds the tensor cores.
        None without such a pair."""
        opcodes = self.opcode_sequence
        barrier = next((i for i, op in enumerate(opcodes) if op.startswith("BAR.SYNC")), None)
        if barrier is None:
            return None
        return next((i - barrier for i in range(barrier, len(opcodes)) if opcodes[i].startswith(WGMMA_OPCODES)), None)


@dataclass(frozen=True)
class LoopSummary:
    instructions: int
    r2ur: int  # vector-to-uniform register moves
    uniform: int
    watched: int  # instructions of the watched opcode (MUFU.EX2 by default)
    barrier_to_wgmma: int | None  # Loop.barrier_to_wgmma
    similarity: float | None  # difflib ratio of the opcode sequences against a reference loop


def loops(instructions: list[Instruction]) -> list[Loop]:
    """Every loop closed by a backward branch (BRA to an earlier address of the same function)."""
    index_of = {inst.address: i for i, inst in enumerate(instructions)}
    opcodes = [inst.opcode for inst in instructions]
    found = []
    for i, inst in enumerate(instructions):
        match = _BRANCH_TARGET_RE.search(inst.text) if opcodes[i].startswith("BRA") else None
        if match is None:
            continue
        target = int(match.group(1), 16)
        if target < inst.address and target in index_of:
            first = index_of[target]
            found.append(Loop(tuple(instructions[first:i + 1]), tuple(opcodes[first:i + 1])))
    return found


def main_loop(instructions: list[Instruction], opcode_prefix: str | tuple[str, ...] = WGMMA_OPCODES,
              watched: str = "MUFU.EX2") -> Loop | None:
    """An attention kernel's key-tile loop: of the loops that issue `opcode_prefix` (any wgmma), the one whose
    instructions are most often `opcode_prefix` or `watched` (the GEMMs and the softmax's
    exponentials), the shortest of equals. The loops around it hold the same work and more,
    an epilogue's loop back to the next item less; None where no loop issues `opcode_prefix`."""
    holding = [loop for loop in loops(instructions) if loop.count(opcode_prefix)]
    if not holding:
        return None
    def density(loop: Loop) -> float:
        return (loop.count(opcode_prefix) + loop.count(watched)) / len(loop.instructions)
    return max(holding, key=lambda loop: (density(loop), -len(loop.instructions)))


def summarize_loop(loop: Loop, reference: Loop | None = None, watched: str = "MUFU.EX2") -> LoopSummary:
    similarity = None
    if reference is not None:
        ours, theirs = loop.opcode_sequence, reference.opcode_sequence
        similarity = 1.0 if ours == theirs else difflib.SequenceMatcher(None, theirs, ours, autojunk=False).ratio()
    return LoopSummary(instructions=len(loop.instructions), r2ur=loop.count("R2UR"), uniform=loop.uniform,
                       watched=loop.count(watched), barrier_to_wgmma=loop.barrier_to_wgmma(), similarity=similarity)


@dataclass(frozen=True)
class LoopComparison:
    kernel: str  # the trial's mangled name
    reference: LoopSummary
    trial: LoopSummary


def wrappers(mangled: str) -> set[str]:
    return {name for length, name in WRAPPER_RE.findall(mangled) if int(length) == len(name)}


def match_key(mangled: str, known_wrappers: set[str]) -> str:
    """The name with the template wrappers outside `known_wrappers` taken out (each opening and one
    closing E, so runs of E are collapsed): a trial's kernel under a Config wrapper of its own
    (StreamKTail<QRing<...>>) keys as the default's (QRing<...>)."""
    for name in wrappers(mangled) - known_wrappers:
        mangled = mangled.replace(f"NS_{len(name)}{name}I", "")
    return re.sub(r"E+", "E", mangled)


def compare_listings(reference_listing: str, trial_listing: str, kernel_filter: str = "") -> list[LoopComparison]:
    """Each trial kernel (with `kernel_filter` in its name) that has a main loop, beside the
    default kernel it matches (match_key) and that kernel's main loop."""
    reference = functions(reference_listing)
    known = set().union(*(wrappers(name) for name in reference))
    by_key = {match_key(name, known): insts for name, insts in reference.items()}
    rows = []
    for name, insts in functions(trial_listing).items():
        base = by_key.get(match_key(name, known))
        if kernel_filter not in name or base is None:
            continue
        trial_loop, reference_loop = main_loop(insts), main_loop(base)
        if trial_loop is not None and reference_loop is not None:
            rows.append(LoopComparison(name, summarize_loop(reference_loop), summarize_loop(trial_loop, reference_loop)))
    return rows

