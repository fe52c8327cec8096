What `TurnsPastMaxSeq` bought: s13 against s12 (s13 without it) per timed problem, with the launch
plan s13 takes there. Only two-warpgroup launches past 2048 keys (and the few-items launch) take
turns where s12 did not.
# %%
from stagelab.explore import show_part_gain

if run.explores:
    show_part_gain(run, title="s13 vs s12: turns past 2048 keys")
else:
    print(run.exploration_skipped())
