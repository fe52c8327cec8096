s16's softmax order (`WS_SOFTMAX_INTERLEAVE=0`) against s17's (`default`: FlashAttention-4's order at
head_dim 128) and against that order at head_dim 64 too (`WS_SOFTMAX_INTERLEAVE=1`) on every timed
problem; head_dim-128 rows should gain about 1%, head_dim 64's short items lose with the third. A
trial run of its own (`stagelab journal s17_interleaved_softmax`).
# %%
from stagelab.explore import show_sweep, try_variants

if run.explores:
    order = try_variants(run, "softmax_order", {"s16's order": {"WS_SOFTMAX_INTERLEAVE": 0},
                                                "at head_dim 64 too": {"WS_SOFTMAX_INTERLEAVE": 1}},
                         repetitions=100, hypothesis="the interleaved order is what makes s17 faster than s16")
    show_sweep(order, value="p50_us", title="s17: time by the softmax order")
else:
    print(run.exploration_skipped())
