"""The ptxas resource report: parse it per kernel and architecture, and gate it.

nvcc prints it with --resource-usage (the same lines as -Xptxas -v):

    ptxas info    : Compiling entry function '_Z9my_kernelPf' for 'sm_90a'
    ptxas info    : Function properties for _Z9my_kernelPf
        0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
    ptxas info    : Used 40 registers, used 1 barriers, 8192 bytes smem, 400 bytes cmem[0]

Only nvcc is needed, no GPU. Static shared memory comes from this report; a
stage that sizes shared memory at launch reports that part itself
(`sdpa_dynamic_shared_memory_bytes`), and the gate judges the sum.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass, replace

from .registry import ResourceGates

_ENTRY_RE = re.compile(r"Compiling entry function '(?P<name>[^']+)' for '(?P<arch>sm_\w+)'")
_PROPS_RE = re.compile(r"Function properties for (?P<name>\S+)")
_FRAME_RE = re.compile(
    r"(?P<stack>\d+) bytes stack frame, (?P<spill_st>\d+) bytes spill stores, (?P<spill_ld>\d+) bytes spill loads"
)
_USED_RE = re.compile(r"Used (?P<regs>\d+) registers")
_BARRIERS_RE = re.compile(r"used (?P<barriers>\d+) barriers")
_SMEM_RE = re.compile(r"(?P<smem>\d+) bytes smem")
_CMEM_RE = re.compile(r"(?P<cmem>\d+) bytes cmem\[0\]")
# ptxas advisories that name their function, e.g. "(C7514) Potential Performance Loss: wgmma.mma_async
# instructions are serialized ... in the function '<mangled>'" or "(C7508) ... setmaxnreg ignored".
_ADVISORY_RE = re.compile(r"\((?P<code>C\d{4})\).*function '(?P<name>[^']+)'")


@dataclass
class KernelResources:
    kernel: str            # demangled where a demangler is available
    mangled: str
    arch: str
    registers: int = 0
    shared_memory_bytes: int = 0      # static, from ptxas
    dynamic_shared_memory_bytes: int = 0
    stack_frame_bytes: int = 0
    spill_store_bytes: int = 0
    spill_load_bytes: int = 0
    barriers: int = 0
    constant_memory_bytes: int = 0
    # ptxas advisory codes about this function (C7514 wgmma serialized, C7508 setmaxnreg ignored, ...)
    advisories: tuple[str, ...] = ()

    @property
    def total_shared_memory_bytes(self) -> int:
        return self.shared_memory_bytes + self.dynamic_shared_memory_bytes

    @property
    def spills(self) -> int:
        return self.spill_store_bytes + self.spill_load_bytes

    @property
    def template_args(self) -> list[str]:
        return parse_mangled(self.mangled)[1]

    @property
    def tag(self) -> str:
        """Short, metric-name-safe and the same on every machine (read from the mangled name):
        sdpa_s0_kernel.fp16.64.sm_90a. A kernel whose template arguments are nested types (a stage's
        composition) would spell past MLflow's key length: its tag keeps the first MAX_TAG_CHARS and
        ends in a digest of the whole mangled name, so two kernels never share one."""
        name, args = parse_mangled(self.mangled)
        tag = ".".join([name, *args, self.arch])
        if len(tag) <= MAX_TAG_CHARS:
            return tag
        digest = hashlib.sha1(self.mangled.encode()).hexdigest()[:TAG_DIGEST_CHARS]
        return f"{tag[:MAX_TAG_CHARS - TAG_DIGEST_CHARS - 1]}.{digest}"

    def as_row(self) -> dict:
        row = asdict(self)
        row.pop("mangled")
        row["advisories"] = ",".join(self.advisories)
        row["total_shared_memory_bytes"] = self.total_shared_memory_bytes
        return row


# A metric key is `<metric>/<opcode>/<tag>` and MLflow takes 250 characters: a tag stays within 160.
MAX_TAG_CHARS = 160
TAG_DIGEST_CHARS = 10

_DTYPE_NAMES = {"__half": "fp16", "__nv_bfloat16": "bf16", "f": "fp32", "d": "fp64"}


def parse_mangled(mangled: str) -> tuple[str, list[str]]:
    """The function name and its template arguments from an Itanium-mangled name.

    Enough of the grammar for kernels templated on types and integer or bool
    constants (`_ZN..14sdpa_s0_kernelI6__halfLi64EEEv11SdpaProblem` gives
    ('sdpa_s0_kernel', ['fp16', '64'])); anything else comes back whole, no args.
    Demanglers differ between machines (c++filt, cu++filt), this does not.
    """
    if not mangled.startswith("_Z"):
        return mangled, []
    pos = 3 if mangled.startswith("_ZN") else 2

    def read_ident(at: int) -> tuple[str, int]:
        m = re.match(r"\d+", mangled[at:])
        if not m:
            return "", at
        length, start = int(m.group()), at + len(m.group())
        return mangled[start:start + length], start + length

    name = ""
    while pos < len(mangled) and mangled[pos].isdigit():
        ident, pos = read_ident(pos)
        if not ident.startswith("_GLOBAL__N"):  # anonymous namespaces
            name = ident
    args: list[str] = []
    if pos < len(mangled) and mangled[pos] == "I":
        pos += 1
        while pos < len(mangled) and mangled[pos] != "E":
            if mangled[pos].isdigit():
                ident, pos = read_ident(pos)
                args.append(_DTYPE_NAMES.get(ident, ident))
            elif mangled[pos] == "L":
                m = re.match(r"L([a-z])(n?\d+)E", mangled[pos:])
                if not m:
                    break
                args.append(m.group(2).replace("n", "-"))
                pos += len(m.group())
            else:
                args.append(_DTYPE_NAMES.get(mangled[pos], mangled[pos]))
                pos += 1
    return name or mangled, args


def demangle(names: list[str]) -> dict[str, str]:
    """Mangled -> readable, through cu++filt or c++filt when either is installed."""
    tool = shutil.which("cu++filt") or shutil.which("c++filt")
    if not tool or not names:
        return {n: n for n in names}
    try:
        out = subprocess.run([tool], input="\n".join(names), capture_output=True, text=True, timeout=30, check=True)
        readable = out.stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        return {n: n for n in names}
    if len(readable) != len(names):
        return {n: n for n in names}
    return dict(zip(names, readable))


def parse_ptxas(log: str) -> list[KernelResources]:
    """One record per (entry function, architecture) that the log compiled."""
    records: list[KernelResources] = []
    by_name: dict[str, KernelResources] = {}
    current: KernelResources | None = None
    advisories: dict[str, list[str]] = {}
    for line in log.splitlines():
        if m := _ADVISORY_RE.search(line):
            advisories.setdefault(m["name"], []).append(m["code"])
            continue
        if m := _ENTRY_RE.search(line):
            current = KernelResources(kernel=m["name"], mangled=m["name"], arch=m["arch"])
            records.append(current)
            by_name[m["name"]] = current
            continue
        if m := _PROPS_RE.search(line):
            # properties refer to the most recent entry of that name (also device functions: ignored)
            current = by_name.get(m["name"])
            continue
        if current is None:
            continue
        if m := _FRAME_RE.search(line):
            current.stack_frame_bytes = int(m["stack"])
            current.spill_store_bytes = int(m["spill_st"])
            current.spill_load_bytes = int(m["spill_ld"])
        if m := _USED_RE.search(line):
            current.registers = int(m["regs"])
            if b := _BARRIERS_RE.search(line):
                current.barriers = int(b["barriers"])
            if s := _SMEM_RE.search(line):
                current.shared_memory_bytes = int(s["smem"])
            if c := _CMEM_RE.search(line):
                current.constant_memory_bytes = int(c["cmem"])
    names = demangle([r.mangled for r in records])
    for record in records:
        record.kernel = names.get(record.mangled, record.mangled)
        record.advisories = tuple(sorted(set(advisories.get(record.mangled, ()))))
    return records


@dataclass(frozen=True)
class GateResult:
    gate: str
    kernel: str
    limit: float
    actual: float
    passed: bool


def sass_gates(tag: str, opcodes: dict[str, int], gates: ResourceGates) -> list[GateResult]:
    required = [GateResult(f"sass_requires_{op}", tag, 1, opcodes.get(op, 0), opcodes.get(op, 0) >= 1)
                for op in gates.sass_require]
    forbidden = [GateResult(f"sass_forbids_{op}", tag, 0, opcodes.get(op, 0), opcodes.get(op, 0) == 0)
                 for op in gates.sass_forbid]
    return required + forbidden


def evaluate_gates(resources: list[KernelResources], gates: ResourceGates,
                   opcodes: dict[str, dict[str, int]] | None = None) -> list[GateResult]:
    """Each gate against each kernel instance; an empty report fails (nothing was compiled).
    `opcodes` ({kernel tag: SASS opcode counts}) is needed when the gates name SASS opcodes."""
    if not resources:
        return [GateResult("kernels_compiled", "-", 1, 0, False)]
    results: list[GateResult] = []
    for r in resources:
        if gates.max_registers is not None:
            results.append(GateResult("max_registers", r.tag, gates.max_registers, r.registers,
                                      r.registers <= gates.max_registers))
        if gates.max_shared_memory_bytes is not None:
            results.append(GateResult("max_shared_memory_bytes", r.tag, gates.max_shared_memory_bytes,
                                      r.total_shared_memory_bytes,
                                      r.total_shared_memory_bytes <= gates.max_shared_memory_bytes))
        if not gates.spills_allowed:
            results.append(GateResult("no_spills", r.tag, 0, r.spills, r.spills == 0))
        if gates.sass_require or gates.sass_forbid:
            helper = parse_mangled(r.mangled)[0] in gates.helper_kernels
            judged = replace(gates, sass_require=()) if helper else gates
            results += sass_gates(r.tag, (opcodes or {}).get(r.tag, {}), judged)
        results += [GateResult(f"ptxas_forbids_{code}", r.tag, 0, r.advisories.count(code), code not in r.advisories)
                    for code in gates.ptxas_forbid]
    return results


def gates_passed(results: list[GateResult]) -> bool:
    return all(g.passed for g in results)
