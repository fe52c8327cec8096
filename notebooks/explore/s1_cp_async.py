Latency against the K/V tile size: smaller tiles mean more barriers and copies in flight per
key, larger ones more shared memory (fewer resident blocks). Same inputs, same process; the
sweep is logged with the run (`sweep_p50_us/block_n/...`), each tile size a trial run of its own
(`stagelab journal s1_cp_async`) beside the default.
# %%
from stagelab.explore import try_variants

if run.explores:
    tiles = {f"BLOCK_N={t}": {"BLOCK_N": t} for t in (32, 64, 128) if str(t) != run.stage.defines.get("BLOCK_N")}
    shapes = [run.params.mission, *[s for s in run.params.shapes if s.seq_len >= 2048][:2]]
    by_tile = try_variants(run, "block_n", tiles, shapes=shapes, repetitions=100,
                           hypothesis="another K/V tile size trades barriers per key against resident blocks")
    display(by_tile.pivot_table(index="shape", columns="contender", values="p50_us"))
    by_tile.pivot_table(index="contender", columns="shape", values="p50_us").plot(
        marker="o", logy=True, ylabel="p50 (us)", title="s1: latency vs K/V tile size")
else:
    print(run.exploration_skipped())
