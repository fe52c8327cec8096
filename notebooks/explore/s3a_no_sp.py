Shared memory saved against time: the parent s2 and s3a, both tile sizes s3a allows, on the
mission shape and the long acceptance shapes. This sweep is the evidence behind s3a's outcome:
it is logged with the run (`sweep_p50_us/tile/...` and `tables/sweep_tile.csv`).
# %%
import pandas as pd

if run.explores:
    variants = {"s2 BLOCK_N=64": run.parent_kernel(), "s3a BLOCK_N=64": run.variant(BLOCK_N=64),
                "s3a BLOCK_N=128": run.variant(BLOCK_N=128)}
    smem = pd.DataFrame([{"variant": name, "D": d, "dynamic smem (KB)": k.module.dynamic_shared_memory_bytes(d, 0) / 1024}
                         for name, k in variants.items() for d in (64, 128)])
    display(smem.pivot_table(index="variant", columns="D", values="dynamic smem (KB)"))
    shapes = [run.params.mission, *[s for s in run.params.shapes if s.seq_len >= 2048]]
    times = run.sweep("tile", variants, shapes, repetitions=100)
    display(times.pivot_table(index="shape", columns="contender", values="p50_us"))
else:
    print(run.exploration_skipped())
