One Q buffer (`Q_STAGES=1`, s10's schedule in s11's build) against two (`default`) on every timed
problem: the stage's hypothesis per shape, with the work items per SM beside it, since the gain
should follow how many item boundaries each SM crosses. A trial run of its own
(`stagelab journal s11_q_ring`).
# %%
from stagelab.explore import show_sweep, try_variants

if run.explores:
    one_buffer = try_variants(run, "q_stages", {"one Q buffer": {"Q_STAGES": 1}}, repetitions=100,
                              hypothesis="the second Q buffer is what makes s11 faster than s10")
    show_sweep(one_buffer, value="p50_us", title="s11: time with one and two Q buffers")
else:
    print(run.exploration_skipped())
