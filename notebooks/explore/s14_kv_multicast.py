s13's launches (`KV_MULTICAST=0`: each query head reads its K/V tiles alone) against s14's (`default`)
on every timed problem; only grouped-query problems at head_dim 128 whose two warpgroups take turns
should move. A trial run of its own (`stagelab journal s14_kv_multicast`).
# %%
from stagelab.explore import show_sweep, try_variants

if run.explores:
    sharing = try_variants(run, "kv_sharing", {"s13's launches": {"KV_MULTICAST": 0}}, repetitions=100,
                           hypothesis="the multicast K/V tiles are what make s14 faster than s13 on grouped queries")
    show_sweep(sharing, value="p50_us", title="s14: time by K/V sharing")
else:
    print(run.exploration_skipped())
