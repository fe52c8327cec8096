"""A `Family` for the common case, so a new family writes only what is its own.

Most kernels a lab takes through stages read a few tensors of one shape and write one: norms,
activations, reductions along the last dim, softmax. `TensorFamily` does the lab's side of such
a family once:

- problems are `{shape: [d0, d1, ...]}` entries of a parameter file (`ShapeProblem`);
- a built stage is called as `module.forward(*inputs, out, *launch_arguments, stream)`, the same
  for a CUDA stage (its torch binding) and a Triton stage (its launcher);
- contenders are plain functions of the inputs (`contender_functions`), timed beside the stage.

What stays the family's own: `make_inputs` (fresh random inputs per seed) and `reference` (the
function in any precision: float64 is the truth, the storage dtype is the low-precision
yardstick the budget compares against). Where the defaults do not fit, a family overrides
`check_inputs` (what a stage's inputs must be), `launch_arguments` (scalars every launch passes,
such as a norm's eps) or `problem_type` (a problem whose floor counts more than tensors of its shape).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import torch

from .errors import ConfigError, InputError
from .family import BuiltKernel, Family, KernelFn

HALF_DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16}


@dataclass(frozen=True, order=True)
class ShapeProblem:
    """One problem: the shape of the family's main tensor (e.g. [rows, cols])."""

    shape: tuple[int, ...]
    flops_per_element: float = 1.0
    tensors_moved: int = 2

    @property
    def tag(self) -> str:
        return "x".join(map(str, self.shape))

    @property
    def elements(self) -> int:
        return math.prod(self.shape)

    def flops(self) -> float:
        return float(self.flops_per_element * self.elements)

    def bytes_moved(self, element_bytes: int) -> float:
        """The floor: each tensor of the problem's shape read or written once."""
        return float(self.tensors_moved * self.elements * element_bytes)


def parse_shape(where: str, entry: Any, rank: int | None) -> tuple[int, ...]:
    if not isinstance(entry, dict) or set(entry) != {"shape"}:
        raise ConfigError(f"{where}: expected {{shape: [d0, d1, ...]}}, got {entry!r}")
    dims = entry["shape"]
    if not isinstance(dims, list) or not dims or (rank is not None and len(dims) != rank):
        raise ConfigError(f"{where}.shape: expected a list of {rank or 'one or more'} sizes, got {dims!r}")
    for index, value in enumerate(dims):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ConfigError(f"{where}.shape[{index}]: expected a positive integer, got {value!r}")
    return tuple(dims)


def describe(value: Any) -> str:
    """What an argument is, for an InputError that says what was passed instead."""
    if not isinstance(value, torch.Tensor):
        return f"a {type(value).__name__}"
    return f"a {str(value.dtype).removeprefix('torch.')} tensor of shape {tuple(value.shape)} on {value.device}"


class TensorKernel(BuiltKernel):
    """A built stage: `kernel(*inputs)` returns a new output; `.into(*inputs, out)` fills `out`."""

    def __init__(self, module: ModuleType, stage_id: str, family: TensorFamily):
        super().__init__(module, stage_id)
        self.family = family  # whose check_inputs and launch_arguments every call uses

    def into(self, *tensors: torch.Tensor) -> None:
        *inputs, out = tensors
        self.family.check_inputs(*inputs, out=out)
        self.family.call_forward(self.module, inputs, out, torch.cuda.current_stream(out.device).cuda_stream)

    def __call__(self, *inputs: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(inputs[0])
        self.into(*inputs, out)
        return out


class TensorFamily(Family):
    """A family of kernels over tensors of one shape; see the module docstring for what it asks."""

    dtypes = HALF_DTYPES
    throughput_unit = "GB/s"
    # The rank every problem's shape must have (None: any).
    rank: int | None = 2
    # For the page's throughput: work per element, and how many tensors of the shape one launch moves.
    flops_per_element: float = 1.0
    tensors_moved: int = 2
    # Library implementations timed beside the stage: name -> a function of the inputs.
    contender_functions: dict[str, Callable[..., torch.Tensor]] = {}
    # Scalars every launch passes to `forward` after `out`, before the stream (a norm's eps): the
    # stage's function takes them, its inputs do not (contenders bind their own).
    launch_arguments: tuple = ()
    # The problem a `{shape: [...]}` entry names; a subclass states a floor that counts more than
    # `tensors_moved` tensors of the shape (a norm's weight, read once).
    problem_type: type[ShapeProblem] = ShapeProblem

    @property
    def contenders(self) -> tuple[str, ...]:
        return tuple(self.contender_functions)

    def problem(self, *shape: int) -> ShapeProblem:
        """The problem of this shape, as a parameter file's `{shape: [...]}` names it (for notebooks'
        own sweeps and tests, which build problems without a file)."""
        return self.problem_type(tuple(shape), self.flops_per_element, self.tensors_moved)

    def parse_problem(self, where: str, entry: Any) -> list[ShapeProblem]:
        return [self.problem(*parse_shape(where, entry, self.rank))]

    def check_inputs(self, *inputs: Any, out: Any) -> None:
        """InputError naming what is wrong, before a launch: a binding's own checks are only the
        backstop, and a Triton launcher has none (a CPU pointer there is a crash, not an error).
        By default: every argument a tensor, `out` like the first input with its last dim
        contiguous, every tensor on CUDA (last, so the rest can be tested without a GPU)."""
        named = {**{f"input {index}": value for index, value in enumerate(inputs)}, "out": out}
        for name, value in named.items():
            if not isinstance(value, torch.Tensor):
                raise InputError(f"{name} must be a torch.Tensor; got {describe(value)}")
        first = inputs[0]
        if (out.shape, out.dtype, out.device) != (first.shape, first.dtype, first.device) or \
                (out.dim() and out.stride(-1) != 1):
            raise InputError(f"out must have input 0's shape, dtype and device and its last dim contiguous; "
                             f"input 0 is {describe(first)}, out {describe(out)} with strides {out.stride()}")
        for name, value in named.items():
            if value.device.type != "cuda":
                raise InputError(f"{name} is on {value.device}; a stage runs on a CUDA device")

    def atol_magnitude(self, reference: torch.Tensor) -> float:
        """The largest output sets the scale of the dtype's rounding."""
        return float(reference.abs().max().item()) if reference.numel() else 0.0

    def call(self, kernel: KernelFn, problem, inputs, out: torch.Tensor, input_kind: str = "") -> None:
        self.require_input_kind(input_kind)
        kernel(*inputs, out)

    def stage_kernel(self, module: ModuleType, stage_id: str, input_kind: str = "") -> TensorKernel:
        self.require_input_kind(input_kind)
        return TensorKernel(module, stage_id, self)

    def call_forward(self, module: ModuleType, inputs, out: torch.Tensor, stream: int) -> None:
        """One call of a built stage: the one place its `forward` signature is spelled out."""
        module.forward(*inputs, out, *self.launch_arguments, stream)

    def module_launch(self, module: ModuleType, problem, inputs, out: torch.Tensor, input_kind: str = ""):
        self.require_input_kind(input_kind)

        def launch() -> None:  # the stream is read at call time, so graph capture sees its own
            self.call_forward(module, inputs, out, torch.cuda.current_stream().cuda_stream)
        return launch

    def contender(self, name: str, problem, inputs) -> Callable[[], None]:
        if name not in self.contender_functions:
            raise RuntimeError(f"the {self.name} family has no contender {name!r}; known: {list(self.contenders)}")
        function = self.contender_functions[name]

        def run() -> None:
            function(*inputs)
        try:  # a contender that cannot run here says so now, not inside the timed loop
            run()
        except ImportError as exc:
            raise RuntimeError(f"contender {name!r} is not installed here: {exc}") from exc
        torch.cuda.synchronize()
        return run
