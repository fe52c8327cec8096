import pytest
import torch

from stagelab.core.errors import InputError
from stagelab.families.sdpa.kernel import validate_inputs


def t(*shape, dtype=torch.float16):
    return torch.zeros(shape, dtype=dtype)


GOOD = t(1, 2, 5, 64)


@pytest.mark.parametrize("q, k, v, message", [
    (t(1, 2, 5, 64, dtype=torch.float32), GOOD, GOOD, "dtype torch.float32"),
    (t(2, 5, 64), GOOD, GOOD, "4 dims"),
    (t(1, 2, 5, 96), t(1, 2, 5, 96), t(1, 2, 5, 96), "head_dim 96"),
    (GOOD, t(1, 2, 6, 64), GOOD, "share one shape"),
    (GOOD, t(1, 2, 5, 64, dtype=torch.bfloat16), GOOD, "share one dtype"),
    (t(1, 5, 2, 64).transpose(1, 2), GOOD, GOOD, "not contiguous"),
    (t(1, 2, 0, 64), t(1, 2, 0, 64), t(1, 2, 0, 64), ">= 1"),
    ("q", GOOD, GOOD, "torch.Tensor"),
])
def test_rejections_name_the_problem(q, k, v, message):
    with pytest.raises(InputError) as err:
        validate_inputs(q, k, v, require_cuda=False)
    assert message in str(err.value)


def test_cpu_tensors_rejected_for_kernels():
    with pytest.raises(InputError, match="on cpu"):
        validate_inputs(GOOD, GOOD, GOOD)


def test_good_inputs_pass():
    validate_inputs(GOOD, GOOD, GOOD, require_cuda=False)
