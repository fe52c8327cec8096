What `ThreeTurnsByModel` bought: s18 against s17 (s18 without it) per timed problem, with the
launch plan s18 takes there: only the launches the host moves to three warpgroups
(`long.three_turns`) should differ from s17. (Three warpgroups on every head_dim-64 turns
launch is a recorded trial: `stagelab journal s18_three_turns`.)
# %%
from stagelab.explore import show_part_gain

if run.explores:
    show_part_gain(run, title="s18 vs s17: three warpgroups in turns")
else:
    print(run.exploration_skipped())
