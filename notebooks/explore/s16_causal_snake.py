What `CausalSnake` bought: s16 against s13 (s16 without it) per timed problem, with the launch
plan s16 takes there: only the causal launches the host moves to the snake (`sched=snake`,
Llama-3-8B's 8k prefill) should differ; the rest run s13's pairs.
# %%
from stagelab.explore import show_part_gain

if run.explores:
    show_part_gain(run, title="s16 vs s13: the causal snake")
else:
    print(run.exploration_skipped())
