The short-sequence policy by how a 64-row query tile's keys are shared (one consumer warpgroup with
1, 2 or 4 CTAs per tile, or two warpgroups of one CTA: the key split), and the two policies forced
on every timed shape: where the automatic choice (`default`) stands against each. Each is a trial
run of its own (`stagelab journal s8_persistent_split`).
# %%
from stagelab.explore import show_sweep, try_variants

if run.explores:
    variants = {f"SPLITS={n}": {"SPLITS": n, "FORCE_POLICY": 2, "KEY_SPLIT_WGS": 1} for n in (1, 2, 4)}
    variants["key split"] = {"FORCE_POLICY": 2, "KEY_SPLIT_WGS": 2}
    variants["long policy"] = {"FORCE_POLICY": 1}
    splits = try_variants(run, "policy", variants, repetitions=100,
                          hypothesis="one short-policy layout or the long policy forced on every shape")
    show_sweep(splits, value="p50_us", title="s8: time by policy and key sharing")
else:
    print(run.exploration_skipped())
