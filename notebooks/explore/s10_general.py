The two launch policies forced on every timed problem (`FORCE_POLICY` 1: the persistent long
policy, 2: the short policy's key split) against the automatic choice (`default`): whether s8's
rule (at least one wave of 128-row work items takes the long policy) still picks the faster one
when the problem is grouped-query, cross-length or strided. Each is a trial run of its own
(`stagelab journal s10_general`).
# %%
from stagelab.explore import show_sweep, try_variants

if run.explores:
    variants = {"long policy": {"FORCE_POLICY": 1}, "short policy": {"FORCE_POLICY": 2}}
    policies = try_variants(run, "policy", variants, repetitions=100,
                            hypothesis="s8's policy rule picks the faster policy on the general problems too")
    show_sweep(policies, value="p50_us", title="s10: time by launch policy")
else:
    print(run.exploration_skipped())
