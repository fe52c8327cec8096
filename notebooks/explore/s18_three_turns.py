s17's two warpgroups in every head_dim-64 turns launch (`WS_TURNS_WGS_D64=2`) and three in every one
(`=3`) against s18's choice per launch (`default`: three where the busiest-block model gives at least
2%) on every timed problem; only the launches the host moves to three warpgroups should differ from
s17, and three everywhere should lose where the model keeps two (ragged 192-row tiles and rounds). A
trial run of its own (`stagelab journal s18_three_turns`).
# %%
from stagelab.explore import show_sweep, try_variants

if run.explores:
    turns = try_variants(run, "turns_warpgroups", {"two (s17)": {"WS_TURNS_WGS_D64": 2},
                                                   "three everywhere": {"WS_TURNS_WGS_D64": 3}},
                         repetitions=100, hypothesis="three warpgroups where the model takes them are what make s18 faster than s17")
    show_sweep(turns, value="p50_us", title="s18: time by the warpgroups that take turns at head_dim 64")
else:
    print(run.exploration_skipped())
