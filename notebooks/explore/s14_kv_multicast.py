What `KvMulticastTurns` bought: s14 against s13 (s14 without it) per timed problem, with the
launch plan s14 takes there. Only head_dim-128 grouped-query launches that take turns run as
multicast pairs (`kv_multicast=on` in the plan); the rest are s13's launches.
# %%
from stagelab.explore import show_part_gain

if run.explores:
    show_part_gain(run, title="s14 vs s13: K/V multicast")
else:
    print(run.exploration_skipped())
