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
    (GOOD, t(1, 2, 6, 64), GOOD, "k and v must share one shape"),
    (GOOD, t(1, 2, 6, 64), t(1, 2, 6, 64), "kv_seq_len != seq_len"),
    (t(1, 4, 5, 64), GOOD, GOOD, "grouped-query attention"),
    (t(1, 3, 5, 64), GOOD, GOOD, "do not divide"),
    (GOOD, t(1, 2, 5, 64, dtype=torch.bfloat16), GOOD, "share one dtype"),
    (t(1, 5, 2, 64).transpose(1, 2), GOOD, GOOD, "share one layout"),
    (*(t(1, 5, 2, 64).transpose(1, 2) for _ in range(3)), "layout bshd"),
    (t(1, 2, 64, 5).transpose(2, 3), GOOD, GOOD, "neither contiguous"),
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


def test_a_stage_declaring_the_features_takes_them():
    """supports (the stage's stages.yaml) lifts exactly the refusals it names."""
    q = t(1, 4, 5, 64).transpose(1, 2).contiguous().transpose(1, 2)  # bshd view
    kv = t(1, 2, 9, 64).transpose(1, 2).contiguous().transpose(1, 2)
    validate_inputs(q, kv, kv, require_cuda=False, supports=("gqa", "cross_length", "bshd"))
    with pytest.raises(InputError, match="cross_length.*supports:` lists gqa, bshd"):
        validate_inputs(q, kv, kv, require_cuda=False, supports=("gqa", "bshd"))
