"""TensorFamily's hooks on the CPU: launch_arguments reaching a stage's forward (a recording fake
module), check_inputs refusing what a stage cannot take before any launch, problem_type stating the
family's own floor."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from stagelab.core.errors import ConfigError, InputError
from stagelab.core.family_kit import ShapeProblem, TensorFamily


class ScaleFamily(TensorFamily):
    """out = x * y * scale: two inputs and one launch argument."""

    name = "scale"
    launch_arguments = (0.5,)


class Recording:
    """A built module whose forward records its arguments instead of launching."""

    def __init__(self):
        self.calls = []

    def forward(self, *arguments):
        self.calls.append(arguments)


@pytest.fixture
def stream(monkeypatch):
    """The current stream as the launch reads it, without a GPU."""
    current = SimpleNamespace(cuda_stream=1234)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: current)
    return current.cuda_stream


def tensors(*shapes, dtype=torch.float16):
    return tuple(torch.zeros(shape, dtype=dtype) for shape in shapes)


def test_launch_arguments_reach_forward_after_out_before_the_stream(stream, monkeypatch):
    family, module = ScaleFamily(), Recording()
    x, y, out = tensors((2, 3), (2, 3), (2, 3))
    problem = family.problem(2, 3)
    family.module_launch(module, problem, (x, y), out)()
    kernel = family.stage_kernel(module, "s0_scale")
    checked = []
    monkeypatch.setattr(family, "check_inputs", lambda *inputs, out: checked.append((*inputs, out)))
    kernel.into(x, y, out)
    family.call(kernel.into, problem, (x, y), out)
    assert [tuple(map(id, c)) for c in checked] == [(id(x), id(y), id(out))] * 2
    assert [tuple(map(id, c[:3])) + c[3:] for c in module.calls] == [(id(x), id(y), id(out), 0.5, stream)] * 3


def test_without_launch_arguments_forward_takes_inputs_out_and_stream(stream):
    module = Recording()
    x, out = tensors((4,), (4,))
    TensorFamily().module_launch(module, None, (x,), out)()
    assert len(module.calls) == 1 and module.calls[0][2:] == (stream,) and module.calls[0][1] is out


def test_into_checks_before_it_launches():
    module = Recording()
    kernel = ScaleFamily().stage_kernel(module, "s0_scale")
    with pytest.raises(InputError, match="input 0 is on cpu; a stage runs on a CUDA device"):
        kernel.into(*tensors((2, 3), (2, 3), (2, 3)))
    with pytest.raises(InputError, match="input 0 is on cpu"):
        kernel(*tensors((2, 3), (2, 3)))
    assert module.calls == []


@pytest.mark.parametrize("inputs, out, message", [
    ((torch.zeros(2, 3), [1.0]), torch.zeros(2, 3), "input 1 must be a torch.Tensor; got a list"),
    ((torch.zeros(2, 3),), None, "out must be a torch.Tensor; got a NoneType"),
    ((torch.zeros(2, 3),), torch.zeros(3, 2), r"out must have input 0's shape.*out a float32 tensor of shape \(3, 2\)"),
    ((torch.zeros(2, 3),), torch.zeros(2, 3).half(), "out must have input 0's shape, dtype"),
    ((torch.zeros(2, 3),), torch.zeros(3, 2).t(), r"last dim contiguous.*strides \(1, 2\)"),
    ((torch.zeros(2, 3), torch.zeros(3)), torch.zeros(2, 3), "input 0 is on cpu"),
])
def test_default_check_inputs_names_what_is_wrong(inputs, out, message):
    with pytest.raises(InputError, match=message):
        TensorFamily().check_inputs(*inputs, out=out)


class RowsAndWeight(ShapeProblem):
    """A floor that counts a [cols] weight besides x and out."""

    def bytes_moved(self, element_bytes: int) -> float:
        rows, cols = self.shape
        return float((2 * rows + 1) * cols * element_bytes)


class WeightedFamily(TensorFamily):
    name = "weighted"
    flops_per_element = 3
    problem_type = RowsAndWeight


def test_problem_type_states_the_floor():
    (problem,) = WeightedFamily().parse_problem("shapes[0]", {"shape": [4, 8]})
    assert type(problem) is RowsAndWeight and problem == WeightedFamily().problem(4, 8)
    assert problem.tag == "4x8" and problem.flops() == 96.0 and problem.bytes_moved(2) == (2 * 4 + 1) * 8 * 2
    (plain,) = TensorFamily().parse_problem("shapes[0]", {"shape": [4, 8]})
    assert type(plain) is ShapeProblem and plain.bytes_moved(2) == 2 * 4 * 8 * 2


@pytest.mark.parametrize("entry, message", [
    ({"shape": [4]}, "shapes.0.shape: expected a list of 2 sizes"),
    ({"shape": [4, True]}, r"shapes.0.shape\[1\]: expected a positive integer"),
    ({"shape": [4, 8], "causal": True}, r"expected \{shape: \[d0, d1, ...\]\}"),
])
def test_bad_shapes_are_named(entry, message):
    with pytest.raises(ConfigError, match=message):
        WeightedFamily().parse_problem("shapes.0", entry)
