The transpose check. With S == D == 64, Q.K and Q.K^T are both defined, so a kernel that
multiplies by K instead of K^T still runs and returns plausible numbers. Compare the stage's
output with attention built on the right product and on the wrong one: it must sit on the
first (error within budget) and far from the second.
# %%
import torch

from stagelab.measure.checks import rounding_atol
from stagelab.families.sdpa import FAMILY as sdpa, Shape, attention, default_scale
from stagelab.families.sdpa import FA3_ATOL_MAGNITUDE

if run.explores:
    shape = Shape(1, 1, 64, 64, False)
    q, k, v = sdpa.make_inputs(shape, torch.float16, seed=7, device="cuda")
    scale = default_scale(64)
    out = run.kernel(q, k, v, causal=False).double()
    right = attention(q, k, v, scale, False, torch.float64)
    k_transposed = k.transpose(-1, -2).contiguous()  # attention on Q.K, the bug's product
    wrong = attention(q, k_transposed, v, scale, False, torch.float64)
    display(Markdown(
        f"max|out - ref(Q.K^T)| = {(out - right).abs().max().item():.2e}; "
        f"max|out - ref(Q.K)| = {(out - wrong).abs().max().item():.2e}; "
        f"rounding atol {rounding_atol(right, torch.float16, FA3_ATOL_MAGNITUDE):.2e}"))
    assert (out - right).abs().max() < (out - wrong).abs().max() / 10, "the kernel multiplies by K, not K^T"
else:
    print(run.exploration_skipped())
