What the pingpong turns bought: s7 against s6 (s7 without them) per timed problem, from this
run's timing. The turns pay where both warpgroups' softmaxes would otherwise coincide: long rows
of many key tiles. Where a turn puts K(n)'s wait and O's rescale was a knob until the composed
parts (a437531): its trials are s17's runs of 2026-11-26, its patch
`docs/results/sdpa/history/patches/WS_WAIT_K_IN_TURN.diff` (that folder's README says how to apply it).
# %%
from stagelab.explore import show_part_gain

if run.explores:
    show_part_gain(run, title="s7 vs s6: pingpong turns")
else:
    print(run.exploration_skipped())
