What `DeferredEpilogue` bought: s15 against s13 (s15 without it) per timed problem, with the
launch plan s15 takes there (`epilogue=deferred` on two-warpgroup long launches).
# %%
from stagelab.explore import show_part_gain

if run.explores:
    show_part_gain(run, title="s15 vs s13: the deferred epilogue")
else:
    print(run.exploration_skipped())
