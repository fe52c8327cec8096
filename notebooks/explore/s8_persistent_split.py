The short-sequence policy by split count (1, 2, 4 CTAs per 64-row query tile) and the two
policies forced on every timed shape: where the automatic choice (0) stands against each.
# %%
if run.explores:
    variants = {f"SPLITS={n}": run.variant(SPLITS=n, FORCE_POLICY=2) for n in (1, 2, 4)}
    variants["long policy"] = run.variant(FORCE_POLICY=1)
    variants["auto"] = run.variant()
    shapes = run.params.timed_shapes()
    splits = run.sweep("policy", variants, shapes, repetitions=100)
    display(splits.pivot_table(index="shape", columns="contender", values="p50_us"))
    splits.pivot_table(index="contender", columns="shape", values="p50_us").plot(
        kind="bar", ylabel="p50 µs", title="s8: time by policy and split count")
else:
    print(run.exploration_skipped())
