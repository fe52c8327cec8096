s11's rule (`SHORT_POLICY_ONE_WAVE=0`: the key split whenever the long items do not fill the SMs)
against s12's (`default`) on every timed problem; only problems with fewer 128-row items than SMs
and more key-split blocks than SMs should move. A trial run of its own (`stagelab journal s12_one_wave`).
# %%
from stagelab.explore import show_sweep, try_variants

if run.explores:
    rule = try_variants(run, "policy_rule", {"s11's rule": {"SHORT_POLICY_ONE_WAVE": 0}}, repetitions=100,
                        hypothesis="the one-wave rule is what makes s12 faster than s11 on few long items")
    show_sweep(rule, value="p50_us", title="s12: time by policy rule")
else:
    print(run.exploration_skipped())
