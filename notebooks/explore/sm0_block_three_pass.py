Threads per row: a block of `BLOCK_THREADS` reduces one row. Too few threads leave wide rows
to a handful of warps; too many waste most of the block on narrow rows and pay more for each
block-wide reduction. The sweep is logged with the run (`sweep_p50_us/block_threads/...`).
# %%
if run.explores:
    sizes = {f"BLOCK_THREADS={t}": run.variant(BLOCK_THREADS=t) for t in (128, 256, 512, 1024)}
    problems = [run.params.mission, *[p for p in run.params.shapes if p.rows * p.cols >= 1 << 20]]
    by_size = run.sweep("block_threads", sizes, problems, repetitions=100)
    display(by_size.pivot_table(index="shape", columns="contender", values="gbps"))
    by_size.pivot_table(index="contender", columns="shape", values="gbps").plot(
        marker="o", ylabel="GB/s", title="sm0: bandwidth vs threads per row")
else:
    print(run.exploration_skipped())
