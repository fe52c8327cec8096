"""What a kernel family brings to the lab, and how the lab finds it.

The lab core (registry, params, build, resources, checks, timing, outcome,
tracking, batch, report) knows nothing of attention or softmax. A family is a
folder (stages, headers, binding, stages.yaml: `kernels/<name>/` when built in,
anywhere on STAGELAB_FAMILY_PATH or by entry point, see core.family_sources) plus
one `Family` object (`stagelab.families.<name>`, or the folder's family.py) that says:

- which problems it solves (`parse_problem`: a params-file entry -> problems),
- its storage dtypes and the library contenders it can be timed against,
- how to make inputs, an output buffer and a reference in any precision,
- how a built stage module is called, its launch-time shared memory and launch plans.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

import torch

from .distributions import DEFAULT_DISTRIBUTION
from .errors import ConfigError
from .launch_plans import LaunchPlanHooks
from .launch_variants import LaunchVariantHooks

# A kernel as the checker and the timer see it: writes its result into `out`.
KernelFn = Callable[..., None]

def dtype_named(family: str, dtypes: dict[str, torch.dtype], name: str) -> torch.dtype:
    """A family's torch dtype by its parameter-file name; a clear error for one it lacks."""
    if name not in dtypes:
        raise ConfigError(f"dtype {name!r} is not supported by the {family} family; supported: {list(dtypes)}")
    return dtypes[name]


class BuiltKernel:
    """A built stage module as callers see it; each family adds `into` (a KernelFn) and `__call__`."""

    # The stage's input kind ("" = the family's standard inputs; see Family.input_kinds).
    input_kind: str = ""

    def __init__(self, module: ModuleType, stage_id: str):
        self.module = module
        self.stage_id = stage_id

    @property
    def config(self) -> str:
        """The stage's compile-time configuration, as its own `stage_config()` names it."""
        return self.module.stage_config()


class Problem(Protocol):
    """One benchmark problem (a shape and its flags); hashable, ordered, named by `tag`."""

    @property
    def tag(self) -> str: ...

    def flops(self) -> float: ...

    def bytes_moved(self, element_bytes: int) -> float: ...


class FamilySettings:
    """What a family states rather than computes: its name, dtypes, contenders, parameter files,
    distributions, watched opcodes and the words its notebooks use (Family adds the methods)."""

    name: str = ""
    dtypes: dict[str, torch.dtype] = {}
    contenders: tuple[str, ...] = ()
    default_mission: dict[str, Any] = {}
    # The throughput the results page plots: "TFLOP/s" for compute-bound work, "GB/s" for memory-bound.
    throughput_unit: str = "TFLOP/s"
    # The parameter file a stage notebook opens with, and a knob its parameters cell shows as an example.
    acceptance_params: str = "params/acceptance.yaml"
    knob_example: str = "{}"
    # The quick parameter file `stagelab try` checks and times a trial on (ragged checks, a few timed shapes).
    try_params: str = "params/try.yaml"
    # Small, ragged problems compute-sanitizer watches (params-file entries): partial tiles, causal and not.
    sanitize_problems: tuple[dict[str, Any], ...] = ()
    # The parameter file whose largest problem Nsight Compute profiles beside the mission problem
    # (None: the largest problem of the run's own file).
    long_params: str | None = None
    # Input kinds a stage may declare in its registry entry (`inputs: <kind>`) besides the family's
    # standard inputs (""), e.g. sdpa's "fp8": the lab passes it through, the family decides.
    input_kinds: tuple[str, ...] = ()
    # {sub-package: the input kinds that use it}: other kinds' runs leave its Python out of their source
    # hash (core.sources.kind_python_files); tests/test_kind_packages.py checks the family's imports.
    kind_packages: dict[str, tuple[str, ...]] = {}
    # `module.name`s of the package whose one job is making inputs (make_inputs, what it calls): same-code
    # judges an edit confined to them by the inputs they make (record.same_inputs), not byte for byte.
    input_path: tuple[str, ...] = ()
    # Named input distributions `make_inputs` can draw (a parameter file's `distributions` picks
    # among them); the first is the family's standard inputs.
    distributions: tuple[str, ...] = (DEFAULT_DISTRIBUTION,)
    # What a problem may need beyond the family's plain one (name -> meaning; a problem lists its own in
    # `features`): a stage is given such a problem only where its stages.yaml `supports:` names them all;
    # elsewhere the lab skips it with the reason, before any launch (e.g. sdpa's gqa, cross_length, bshd).
    problem_features: dict[str, str] = {}
    # SASS opcodes recorded as metrics for every kernel instance, gate or not (`sass/<opcode>/<kernel>`,
    # `stagelab resources`); LDG.E.128 counts that form only, LDG every form. The default: global, shared
    # and local loads and stores, block barriers. A family names its own path's (sdpa: HGMMA, UTMALDG).
    watched_opcodes: tuple[str, ...] = ("LDG", "STG", "LDS", "STS", "LDL", "STL", "BAR")
    # The stage notebook's family words (stagelab.notebooks): "compute-sanitizer ... on <these>; ...".
    notebook_sanitize_problems: str = "small problems of odd sizes"
    notebook_profile_focus: str = "DRAM, L2, occupancy, top stalls, bank conflicts"


class Family(FamilySettings, LaunchPlanHooks, LaunchVariantHooks):
    """Base class: a family overrides every method raising NotImplementedError (LaunchPlanHooks, LaunchVariantHooks)."""

    @property
    def report_params(self) -> tuple[str, ...]:
        """The parameter files (by name) `stagelab report` shows when --params is not given: the
        acceptance file alone unless the family names more (a class attribute overrides this)."""
        return (Path(self.acceptance_params).stem,)

    @property
    def experiment(self) -> str:
        return f"stagelab-{self.name}"

    @property
    def tune_experiment(self) -> str:
        """Tunes log apart: their many configuration runs must not read as a stage's latest run
        in the report, the batch summary or the comparison notebook."""
        return f"{self.experiment}-tune"

    @property
    def library_prefix(self) -> str:
        """Library contenders are labelled <family>_<name> in timing tables (e.g. sdpa_flash)."""
        return f"{self.name}_"

    def contender_label(self, name: str) -> str:
        return self.library_prefix + name

    def torch_dtype(self, name: str) -> torch.dtype:
        return dtype_named(self.name, self.dtypes, name)

    # -- problems ------------------------------------------------------------------
    def parse_problem(self, where: str, entry: Any) -> list[Problem]:
        raise NotImplementedError

    # -- data and reference ----------------------------------------------------------
    def make_inputs(self, problem: Problem, dtype: torch.dtype, seed: int, device: torch.device | str,
                    distribution: str = DEFAULT_DISTRIBUTION) -> tuple[torch.Tensor, ...]:
        """Fresh inputs for one check, drawn from one of `distributions` (input_generator)."""
        raise NotImplementedError

    def require_distribution(self, distribution: str) -> None:
        """A clear error for a distribution this family cannot draw."""
        if distribution not in self.distributions:
            raise ConfigError(f"the {self.name} family has no input distribution {distribution!r}; "
                              f"supported: {list(self.distributions)}")

    def distributions_for(self, input_kind: str = "") -> tuple[str, ...]:
        """The distributions that apply to stages of this input kind (all by default; sdpa keeps
        `outlier`, a test of per-head FP8 scales, for its FP8 stages)."""
        return self.distributions

    def new_output(self, problem: Problem, inputs: tuple[torch.Tensor, ...]) -> torch.Tensor:
        return torch.empty_like(inputs[0])

    def chained_inputs(self, inputs: tuple[torch.Tensor, ...], previous_output: torch.Tensor,
                       input_kind: str = "") -> tuple[torch.Tensor, ...]:
        """The inputs of a launch that depends on the one before it (stagelab.measure.chain): that launch's
        output in place of the first input where it fits (plain inputs of the output's shape and
        dtype), else the same inputs again (the launches then share only what the stage keeps
        between them, such as scratch)."""
        first = inputs[0]
        if input_kind or first.shape != previous_output.shape or first.dtype != previous_output.dtype:
            return inputs
        return (previous_output, *inputs[1:])

    def reference(self, problem: Problem, inputs: tuple[torch.Tensor, ...],
                  compute_dtype: torch.dtype) -> torch.Tensor:
        """The family's function with every operation in compute_dtype (float64: the truth)."""
        raise NotImplementedError

    def atol_magnitude(self, reference: torch.Tensor) -> float:
        """The output magnitude at which the dtype's own rounding sets the absolute tolerance."""
        raise NotImplementedError

    def require_input_kind(self, input_kind: str) -> None:
        """A clear error for an input kind this family does not know."""
        if input_kind and input_kind not in self.input_kinds:
            known = ", ".join(repr(k) for k in self.input_kinds) or "none"
            raise ConfigError(f"the {self.name} family has no input kind {input_kind!r}; known: {known}")

    # -- kernels -------------------------------------------------------------------
    def call(self, kernel: KernelFn, problem: Problem, inputs: tuple[torch.Tensor, ...],
             out: torch.Tensor, input_kind: str = "") -> None:
        """Run a KernelFn (a built stage, or a plain function standing in for one) into `out`;
        `inputs` are the standard inputs, which the family converts for a stage of another kind."""
        raise NotImplementedError

    def stage_kernel(self, module: ModuleType, stage_id: str, input_kind: str = "") -> Any:
        """A built stage module wrapped for callers; its `.into` is a KernelFn."""
        raise NotImplementedError

    def module_launch(self, module: ModuleType, problem: Problem, inputs: tuple[torch.Tensor, ...],
                      out: torch.Tensor, input_kind: str = "") -> Callable[[], None]:
        """A no-argument launch of a built module on the current stream (for timing and graphs);
        any conversion of the standard inputs for the stage's kind happens here, outside the launch."""
        raise NotImplementedError

    def kind_checks(self, input_kind: str) -> Callable[..., list] | None:
        """The correctness checks of a stage of this input kind when the lab's float64-reference
        budget (measure.family_checks.check_all) is not its judge: called as checks(kernel_fn, problems, dtypes,
        seeds, device, progress=..., distributions=..., plan_of=...) (check_each's). None: the lab's budget."""
        return None

    def contender(self, name: str, problem: Problem, inputs: tuple[torch.Tensor, ...]) -> Callable[[], None]:
        """A library implementation to time beside the stage; RuntimeError when unavailable here."""
        raise NotImplementedError

    def kind_contenders(self, input_kind: str) -> tuple[str, ...]:
        """Library contenders timed beside every stage of this input kind, on top of the parameter
        file's (an FP8 stage against the libraries' FP8 attention); `contender` builds them."""
        return ()

    def dynamic_shared_memory(self, module: ModuleType, template_args: list[str]) -> int | None:
        """Launch-time shared memory of one kernel instance, named by its template arguments."""
        return None


def load_family(name: str) -> Family:
    """The Family object of a family found by name (built in, on STAGELAB_FAMILY_PATH or by entry
    point: core.family_sources); a clear error when there is none."""
    from .family_sources import family_source

    if not name.isidentifier():
        raise ConfigError(f"family {name!r} is not a valid family name")
    source = family_source(name)
    family = source.load()
    if not isinstance(family, Family):
        raise ConfigError(f"family {name!r} ({source.origin}) does not give a stagelab Family object "
                          f"(FAMILY = <a Family subclass>() in its module); got {type(family).__name__}")
    if family.name != name:
        raise ConfigError(f"family {name!r} ({source.origin}): its Family object is named {family.name!r}; "
                          "the folder, stages.yaml and Family.name must agree")
    return family


def known_families() -> list[str]:
    """Every family the lab can see, by name."""
    from .family_sources import discover_families

    return list(discover_families())
