What `OneWaveShort` bought: s12 against s11 (s12 without it) per timed problem, with the launch
plan s12 takes there. Only the problems whose key-split blocks exceed one wave, or whose long
items are fewer than the SMs, change policy; the rest run s11's launch.
# %%
from stagelab.explore import show_part_gain

if run.explores:
    show_part_gain(run, title="s12 vs s11: the one-wave rule")
else:
    print(run.exploration_skipped())
