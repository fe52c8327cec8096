What `InterleavedSoftmaxD128` bought: s17 against s16 (s17 without it) per timed problem,
with the launch plan s17 takes there: head_dim-128 launches should gain, head_dim 64
runs s16's kernels. (Its head_dim-64 trial is a recorded run: `stagelab journal
s17_interleaved_softmax`.)
# %%
from stagelab.explore import show_part_gain

if run.explores:
    show_part_gain(run, title="s17 vs s16: FlashAttention-4's softmax order")
else:
    print(run.exploration_skipped())
