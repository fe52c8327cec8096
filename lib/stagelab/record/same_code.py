"""`stagelab same-code --from COMMIT`: which stages a commit's sources and today's compile to the same
code, so that a run of the older source still stands for the stage (record.source_state) without
spending a GPU on it again.

Per stage, both sides are built as a run builds them (core.build, each side with its own
stages.yaml options; record.same_code_sides checks the two out) and compared:
- every kernel's SASS, kernel by kernel, with each instruction's encoding (its scheduling bits);
- the whole device image (`cuobjdump -elf`: constant banks and kernel attributes too);
- the host code of the stage's object (its launcher picks kernels, grids and shared memory), or a
  Python stage's own files;
and, for the whole family, its binding as preprocessed and its result Python files byte for byte, or,
where an edit touched only the family's input path, the inputs they make (record.same_inputs). A stage
whose build key is one at both commits is built once (sides_to_build).
Only anonymous-namespace names and the checkout's path may differ (core.sass_kernels, core.object_code).
A stage the same on every count is recorded in same_code.yaml (record.same_code_file), with each
side's run source hash: the commit's as the commit's own lab computed it, which is what its runs
recorded (record.recorded_hashes), HEAD's as today's lab computes it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone

from ..core.build import BuildResult, build_all, build_key
from ..core.errors import BuildError
from ..core.object_code import binding_source_md5, device_image_md5, host_code_md5
from ..core.python_build import files_digest, helper_files
from ..core.registry import Stage
from ..core.sass_kernels import kernel_differences, kernel_digests, listing_md5
from ..core.toolchain import nvcc_version
from .same_code_file import SameCodeEntry
from .same_code_sides import Side
from .same_inputs import InputsVerdict, same_inputs

SAME, DIFFERENT, UNCHANGED, NEW, FAILED = "same", "different", "unchanged", "new", "failed"
DIFFERENCES_SHOWN = 6
LOG_LINES = 8  # of a failed build's log, in the verdict


@dataclass(frozen=True)
class StageVerdict:
    stage: str
    status: str  # SAME (recorded), DIFFERENT, UNCHANGED (one source hash: nothing to record), NEW, FAILED
    detail: str
    entry: SameCodeEntry | None = None


@dataclass(frozen=True)
class CodeDigests:
    """What one side's build of a stage compiled to."""

    kernels: dict[str, str]  # core.sass_kernels.kernel_digests
    sass_md5: str
    device_image_md5: str
    host_code_md5: str


def code_digests(result: BuildResult, stage: Stage, side: Side) -> CodeDigests:
    if stage.backend == "cuda":
        images = [result.directory / f"{stage.id}.o"]
        host = host_code_md5(images[0])
    else:  # a Python stage's host side is its file and the family folder's .py helpers
        images = sorted(result.directory.glob("*.cubin"))
        host = files_digest([stage.source, *(p for p in helper_files(side.registry) if p.suffix == ".py")])
    listing = result.sass_listing()
    return CodeDigests(kernel_digests(listing), listing_md5(listing), device_image_md5(images), host)


def differences(before: CodeDigests, after: CodeDigests) -> list[str]:
    """Why two builds are not the same code, one line each; empty when they are."""
    lines = kernel_differences(before.kernels, after.kernels)
    if before.device_image_md5 != after.device_image_md5 and not lines:
        lines.append("the device image differs beyond the SASS (constant data or kernel attributes)")
    if before.host_code_md5 != after.host_code_md5:
        lines.append("the host code differs (the launcher: kernels, grids or shared memory chosen)")
    return lines


def family_differences(then: Side, now: Side, stages: list[str], input_kind: str = "",
                       progress: Callable[[str], None] = lambda line: None) -> InputsVerdict:
    """What differs for every stage of one input kind at once: the family's result Python that kind
    uses (unless the edit stayed on its input path and the inputs are the same, record.same_inputs),
    the binding."""
    verdict = same_inputs(then, now, input_kind, progress=progress)
    if verdict.differences:
        return verdict
    if then.registry.binding is None or all(now.registry.stages[s].backend != "cuda" for s in stages):
        return verdict
    if binding_source_md5(then.registry) != binding_source_md5(now.registry):
        return InputsVerdict([f"the binding {now.registry.binding.name} differs (preprocessed, with the headers it includes)"])
    return verdict


def _entry(stage: str, then: Side, now: Side, digests: CodeDigests, nvcc: str, family_python: str) -> SameCodeEntry:
    return SameCodeEntry(
        stage=stage, from_commit=then.commit, from_source_hash=then.run_source_hash(then.registry.stages[stage]),
        to_commit=now.commit, to_source_hash=now.run_source_hash(now.registry.stages[stage]), nvcc=nvcc,
        sass_md5=digests.sass_md5, kernels=len(digests.kernels), device_image_md5=digests.device_image_md5,
        host_code_md5=digests.host_code_md5, checked=datetime.now(timezone.utc).date().isoformat(),
        family_python=family_python)


def _verdict(stage: str, then: Side, now: Side, built: dict[str, BuildResult], family_python: str) -> StageVerdict:
    """The stage's verdict from its two builds (by side label)."""
    digests = {side.label: code_digests(built[side.label], side.registry.stages[stage], side)
               for side in (then, now) if side.label in built}
    digests.setdefault(then.label, digests[now.label])  # one build for both (sides_to_build)
    lines = differences(digests[then.label], digests[now.label])
    if lines:
        shown = lines[:DIFFERENCES_SHOWN] + ([f"and {len(lines) - DIFFERENCES_SHOWN} more"]
                                             if len(lines) > DIFFERENCES_SHOWN else [])
        return StageVerdict(stage, DIFFERENT, "; ".join(shown))
    entry = _entry(stage, then, now, digests[now.label], nvcc_version(), family_python)
    return StageVerdict(stage, SAME, f"{entry.kernels} kernels, the device image and the host code the same", entry)


def _checked(stage: str, then: Side, now: Side, built: dict[str, BuildResult], family_python: str) -> StageVerdict:
    """_verdict, a tool failing on the way (cuobjdump, objdump) a FAILED verdict naming it."""
    try:
        return _verdict(stage, then, now, built, family_python)
    except BuildError as exc:
        return StageVerdict(stage, FAILED, f"comparing its builds failed: {failure(exc)}")


def failure(exc: BuildError) -> str:
    """The error and the end of its log, which names the file and line that failed."""
    tail = [line for line in exc.log.strip().splitlines() if line.strip()][-LOG_LINES:]
    return "\n    ".join([exc.reason, *tail])


def without_builds(stage: str, then: Side, now: Side) -> StageVerdict | None:
    """The verdict of a stage that is new or whose sources did not change, or None."""
    if stage not in then.registry.stages:
        return StageVerdict(stage, NEW, f"not a stage at {then.label}: nothing to compare")
    if then.run_source_hash(then.registry.stages[stage]) == now.run_source_hash(now.registry.stages[stage]):
        return StageVerdict(stage, UNCHANGED, f"the same sources at {then.label}: its runs there are current already")
    return None


def sides_to_build(stage: str, then: Side, now: Side) -> tuple[Side, ...]:
    """Both sides, or HEAD's alone where the two builds' keys are one (sources, options, tools: the
    build cache would hand the same module to both, so one build stands for both)."""
    if build_key(then.registry.stages[stage], then.registry) == build_key(now.registry.stages[stage], now.registry):
        return (now,)
    return (then, now)


def compare_stages(then: Side, now: Side, stages: list[str], jobs: int,
                   progress: Callable[[str], None]) -> list[StageVerdict]:
    """Each stage's verdict, building the sides of those that need it (sides_to_build) `jobs` at a
    time; `progress` gets a line per build, per verdict and per file of inputs drawn (minutes each)."""
    verdicts = {s: v for s in stages if (v := without_builds(s, then, now)) is not None}
    to_build = [s for s in stages if s not in verdicts]
    family_python: dict[str, str] = {}  # by stage: how an edit of the family's Python was shown harmless
    for kind in dict.fromkeys(now.registry.stages[s].input_kind for s in to_build):
        of_kind = [s for s in to_build if now.registry.stages[s].input_kind == kind]
        family = family_differences(then, now, of_kind, kind, progress)
        verdicts |= {s: StageVerdict(s, DIFFERENT, "; ".join(family.differences)) for s in of_kind if family.differences}
        family_python |= dict.fromkeys(of_kind, family.note)
        if family.note:
            progress(f"{kind or 'standard'} inputs: {family.note}")
    for verdict in verdicts.values():
        progress(f"{verdict.stage}: {verdict.status}: {verdict.detail}")
    sides_of = {stage: sides_to_build(stage, then, now) for stage in stages if stage not in verdicts}
    builds = [(stage, side) for stage, sides in sides_of.items() for side in sides]
    built: dict[str, dict[str, BuildResult]] = {}
    for index, result in build_all([(side.registry.stages[stage], side.registry) for stage, side in builds], jobs):
        stage, side = builds[index]
        if stage in verdicts:  # its other side failed already
            continue
        if isinstance(result, BuildError):
            verdicts[stage] = StageVerdict(stage, FAILED, f"the build at {side.label} failed: {failure(result)}")
        else:
            progress(f"{stage}: built at {side.label} ({result.summary})")
            built.setdefault(stage, {})[side.label] = result
            if len(built[stage]) == len(sides_of[stage]):
                verdicts[stage] = _checked(stage, then, now, built[stage], family_python[stage])
        if stage in verdicts:
            progress(f"{stage}: {verdicts[stage].status}: {verdicts[stage].detail}")
    return [verdicts[stage] for stage in stages]
