The short-sequence policy by how a 64-row query tile's keys are shared (one consumer warpgroup with
1, 2 or 4 CTAs per tile, or two warpgroups of one CTA: the key split), and the two policies forced
on every timed shape: where the automatic choice (`default`) stands against each. Each is a trial
run of its own (`stagelab journal s8_persistent_split`).
# %%
from stagelab.explore import try_variants

if run.explores:
    variants = {f"SPLITS={n}": {"SPLITS": n, "FORCE_POLICY": 2, "KEY_SPLIT_WGS": 1} for n in (1, 2, 4)}
    variants["key split"] = {"FORCE_POLICY": 2, "KEY_SPLIT_WGS": 2}
    variants["long policy"] = {"FORCE_POLICY": 1}
    splits = try_variants(run, "policy", variants, repetitions=100,
                          hypothesis="one short-policy layout or the long policy forced on every shape")
    display(splits.pivot_table(index="shape", columns="contender", values="p50_us"))
    splits.pivot_table(index="contender", columns="shape", values="p50_us").plot(
        kind="bar", ylabel="p50 µs", title="s8: time by policy and key sharing")
else:
    print(run.exploration_skipped())
