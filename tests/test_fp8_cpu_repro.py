"""tools/fp8_cpu_repro.py's model of P.V promotion by column halves (PV_PROMOTE_D128=2)."""

import torch
from tool_module import load_tool

repro = load_tool("fp8_cpu_repro")

ROWS, KEYS, HEAD_DIM = 16, 64, 128  # two k32 steps of keys, head_dim 128's halves of 64 columns


def e4m3_values(g: torch.Generator, shape, scale: float) -> torch.Tensor:
    return (scale * torch.rand(shape, generator=g)).to(repro.E4M3).double()


def test_halves_match_whole_tile_promotion_bit_for_bit():
    """The FP22 model aligns per output element, so splitting the columns must change no bit."""
    g = torch.Generator().manual_seed(0)
    p8 = e4m3_values(g, (ROWS, KEYS), 256.0)  # P8 in [0, 256], FA3's offset
    vt = e4m3_values(g, (HEAD_DIM, KEYS), 448.0)
    o = (1e4 * torch.rand((ROWS, HEAD_DIM), generator=g)).float().double()  # a large running O
    whole = (o.float() + repro.mma(p8, vt, torch.zeros_like(o), "fp22").float()).double()
    halves = repro.promoted_halves(o, p8, vt)
    assert torch.equal(halves, whole)
    # and promotion is not a no-op here: accumulating into O inside FP22 loses bits
    assert not torch.equal(repro.mma(p8, vt, o, "fp22"), whole)


def test_halves_add_each_half_to_its_own_columns():
    g = torch.Generator().manual_seed(1)
    p8 = e4m3_values(g, (ROWS, KEYS), 256.0)
    vt = torch.zeros((HEAD_DIM, KEYS), dtype=torch.float64)
    vt[HEAD_DIM // 2:] = 1.0  # only the second half of the columns gets P's row sums
    out = repro.promoted_halves(torch.zeros((ROWS, HEAD_DIM), dtype=torch.float64), p8, vt)
    assert torch.all(out[:, :HEAD_DIM // 2] == 0)
    fp22_relative = 2.0 ** -(repro.ACC_MANTISSA - 1)  # the model truncates each k32 step's sum to 13 bits
    expected = p8.sum(-1, keepdim=True).expand(-1, HEAD_DIM // 2)
    assert torch.allclose(out[:, HEAD_DIM // 2:], expected, rtol=fp22_relative, atol=0)
