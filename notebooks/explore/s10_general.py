s10 is s8's composition on the general problem (grouped-query attention, Sq != Sk, BSHD views): on
s8's own problems it should time as s8 does. Its time against s8's per timed problem, from this
run's timing, with the launch plan s10 takes there.
# %%
from stagelab.explore import show_part_gain

if run.explores:
    show_part_gain(run, title="s10 vs s8: the general problem's cost")
else:
    print(run.exploration_skipped())
