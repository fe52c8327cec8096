s12's rule (`TURNS_PAST_MAX_SEQ=0`: turns only up to PINGPONG_MAX_SEQ keys) against s13's (`default`)
on every timed problem; only launches of two warpgroups past 2048 keys (head_dim 64 where three
warpgroups do not pay, causal head_dim 128, the few-items launch) should move. A trial run of its
own (`stagelab journal s13_turns`).
# %%
from stagelab.explore import show_sweep, try_variants

if run.explores:
    rule = try_variants(run, "turns_rule", {"s12's rule": {"TURNS_PAST_MAX_SEQ": 0}}, repetitions=100,
                        hypothesis="the turns past 2048 keys are what make s13 faster than s12 on long items")
    show_sweep(rule, value="p50_us", title="s13: time by turns rule")
else:
    print(run.exploration_skipped())
