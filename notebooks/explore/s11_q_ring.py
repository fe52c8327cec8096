What `QRing` (two Q buffers) bought: s11 against s10, which is s11 without it, per timed problem
from this run's timing, with the launch plan s11 takes there. Only long-policy launches of
several items per block should gain; the short policy is s10's.
# %%
from stagelab.explore import show_part_gain

if run.explores:
    show_part_gain(run, title="s11 vs s10: two Q buffers")
else:
    print(run.exploration_skipped())
