"""What a kernel family brings to the lab, and how the lab finds it.

The lab core (registry, params, build, resources, checks, timing, outcome,
tracking, batch, report) knows nothing of attention or softmax. A family is a
folder `kernels/<name>/` (stages, headers, binding, stages.yaml) plus one
`Family` object in `stagelab.families.<name>` that says:

- which problems it solves (`parse_problem`: a params-file entry -> problems),
- its storage dtypes and the library contenders it can be timed against,
- how to make inputs, an output buffer and a reference in any precision,
- how a built stage module is called, and how much launch-time shared
  memory a kernel instance asks for (ptxas reports only static memory).
"""

from __future__ import annotations

import importlib
import zlib
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any, Protocol

import torch

from .errors import ConfigError
from .paths import kernels_root

# A kernel as the checker and the timer see it: writes its result into `out`.
KernelFn = Callable[..., None]

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


class Family:
    """Base class: a family overrides every method that raises NotImplementedError."""

    name: str = ""
    dtypes: dict[str, torch.dtype] = {}
    contenders: tuple[str, ...] = ()
    default_mission: dict[str, Any] = {}
    # The throughput the results page plots: "TFLOP/s" for compute-bound work, "GB/s" for memory-bound.
    throughput_unit: str = "TFLOP/s"
    # The parameter file a stage notebook opens with, and a knob its parameters cell shows as an example.
    acceptance_params: str = "params/acceptance.yaml"
    knob_example: str = "{}"
    # Small, ragged problems compute-sanitizer watches (params-file entries): partial tiles, causal and not.
    sanitize_problems: tuple[dict[str, Any], ...] = ()
    # The parameter file whose largest problem Nsight Compute profiles beside the mission problem
    # (None: the largest problem of the run's own file).
    long_params: str | None = None
    # Input kinds a stage may declare in its registry entry (`inputs: <kind>`) besides the family's
    # standard inputs (""): e.g. sdpa's "fp8", quantized inputs judged by their own budget. The lab
    # passes the kind through (stage_kernel, call, module_launch, check_stage); the family decides.
    input_kinds: tuple[str, ...] = ()
    # Named input distributions `make_inputs` can draw (a parameter file's `distributions` picks
    # among them); the first is the family's standard inputs.
    distributions: tuple[str, ...] = (DEFAULT_DISTRIBUTION,)
    # What a problem may need beyond the family's plain one (name -> meaning; a problem lists its own in
    # `features`): a stage is given such a problem only where its stages.yaml `supports:` names them all;
    # elsewhere the lab skips it with the reason, before any launch (e.g. sdpa's gqa, cross_length, bshd).
    problem_features: dict[str, str] = {}

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
        if name not in self.dtypes:
            raise ConfigError(f"dtype {name!r} is not supported by the {self.name} family; "
                              f"supported: {list(self.dtypes)}")
        return self.dtypes[name]

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
        """The inputs of a launch that depends on the one before it (stagelab.chain): that launch's
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

    def check_stage(self, kernel: Any, problems: list[Problem], dtypes, seeds, device,
                    progress: Callable[[str], None] | None = None,
                    distributions: Iterable[str] = (DEFAULT_DISTRIBUTION,)) -> list:
        """The correctness checks of a stage_kernel (its `input_kind` picks the budget) on each of
        the requested distributions that applies to its kind; by default the lab's float64-reference
        budget (checks.check_all)."""
        from .checks import check_all

        self.require_input_kind(kernel.input_kind)
        return check_all(self, kernel.into, problems, dtypes, seeds, device, progress=progress,
                         distributions=stage_distributions(self, distributions, kernel.input_kind))

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


def require_supports(family: Family, where: str, supports: Iterable[str]) -> None:
    """A clear error for a stages.yaml `supports:` entry that names no problem feature of the family."""
    unknown = [name for name in supports if name not in family.problem_features]
    if unknown:
        raise ConfigError(f"{where}.supports: {unknown} are not problem features of the {family.name} family; "
                          f"known: {list(family.problem_features) or 'none'}")


def declared_supports(family: Family, stage_id: str) -> tuple[str, ...]:
    """The features a stage's stages.yaml entry declares it takes (none for an id not in the registry,
    such as a test's stand-in)."""
    from .registry import family_registry

    stage = family_registry(family.name).stages.get(stage_id)
    supports = stage.supports if stage is not None else ()
    require_supports(family, f"stage {stage_id}", supports)
    return supports


def refusal(family: Family, problem: Problem, supports: Iterable[str]) -> str:
    """Why a stage declaring `supports` cannot take the problem ('' when it can)."""
    supports = tuple(supports)
    missing = [name for name in getattr(problem, "features", ()) if name not in supports]
    return refusal_message(family.problem_features, missing, supports, problem.tag) if missing else ""


def refusal_message(features: dict[str, str], missing: Iterable[str], supports: Iterable[str], what: str) -> str:
    """Why a stage refuses a problem: the features it lacks, and what its stages.yaml declares."""
    needs = "; ".join(f"{name}: {features.get(name, name)}" for name in missing)
    declared = ", ".join(supports) or "none"
    return f"the stage does not take {what}, which needs {needs} (its stages.yaml `supports:` lists {declared})"


def split_supported(family: Family, problems: Iterable[Problem], supports: Iterable[str]
                    ) -> tuple[list[Problem], dict[str, str]]:
    """The problems a stage declaring `supports` takes, and the others by tag with the reason."""
    supports = tuple(supports)
    taken, skipped = [], {}
    for problem in problems:
        reason = refusal(family, problem, supports)
        if reason:
            skipped[problem.tag] = reason
        else:
            taken.append(problem)
    return taken, skipped


def stage_distributions(family: Family, requested: Iterable[str], input_kind: str = "") -> tuple[str, ...]:
    """Of the requested distributions (each must be the family's), those a stage of this input kind
    is checked on, in the requested order."""
    requested = tuple(requested)
    for name in requested:
        family.require_distribution(name)
    applicable = family.distributions_for(input_kind)
    return tuple(name for name in requested if name in applicable)


def load_family(name: str) -> Family:
    """The Family object of `stagelab.families.<name>`; a clear error when there is none."""
    if not name.isidentifier():
        raise ConfigError(f"family {name!r} is not a valid family name")
    try:
        module = importlib.import_module(f"stagelab.families.{name}")
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("stagelab.families"):
            known = ", ".join(known_families()) or "none"
            raise ConfigError(f"unknown kernel family {name!r}; known: {known}") from exc
        raise
    return module.FAMILY


def known_families() -> list[str]:
    """Families with both a kernels/<name>/stages.yaml and a Python family module."""
    import pkgutil

    from . import families

    modules = {m.name for m in pkgutil.iter_modules(families.__path__)}
    root = kernels_root()
    return sorted(n for n in modules if (root / n / "stages.yaml").is_file())
