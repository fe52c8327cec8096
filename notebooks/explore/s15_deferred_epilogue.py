s13's epilogue (`DEFER_EPILOGUE=0`: each item's O stored right after its last P.V) against s15's
(`default`: stored under the next item's first Q.K^T) on every timed problem; the many-short-items
problems (ViT, BERT-base) should move most, long items hardly. A trial run of its own
(`stagelab journal s15_deferred_epilogue`).
# %%
from stagelab.explore import show_sweep, try_variants

if run.explores:
    epilogue = try_variants(run, "epilogue_place", {"s13's epilogue": {"DEFER_EPILOGUE": 0}}, repetitions=100,
                            hypothesis="the epilogue under the next item's first Q.K^T is what makes s15 faster than s13")
    show_sweep(epilogue, value="p50_us", title="s15: time by where the epilogue runs")
else:
    print(run.exploration_skipped())
