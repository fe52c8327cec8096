s13's causal pairs everywhere (`WS_CAUSAL_ORDER=0`) against s16's choice per launch (`default`: the
longest-first snake where the balance model and L2 allow) on every timed problem; only the launches
the host moves to the snake (Llama-3-8B's 8k prefill) should differ, the rest run the same pairs. A
trial run of its own (`stagelab journal s16_causal_snake`).
# %%
from stagelab.explore import show_sweep, try_variants

if run.explores:
    order = try_variants(run, "causal_order", {"s13's pairs": {"WS_CAUSAL_ORDER": 0}}, repetitions=100,
                         hypothesis="the snake, where the host takes it, is what makes s16 faster than s13")
    show_sweep(order, value="p50_us", title="s16: time by the causal item order")
else:
    print(run.exploration_skipped())
