Threads per row: a block of `BLOCK_THREADS` normalizes one row. Too few leave an 8192-wide row to
a long serial walk per thread; too many leave most threads idle on narrow rows and pay more for the
block reduction. The sweep is logged with the run (`sweep_p50_us/block_threads/...`).
# %%
if run.explores:
    sizes = {f"BLOCK_THREADS={t}": run.variant(BLOCK_THREADS=t) for t in (128, 256, 512, 1024)}
    problems = [run.params.mission, *[p for p in run.params.shapes if p.elements >= 1 << 20]]
    by_size = run.sweep("block_threads", sizes, problems, repetitions=100)
    display(by_size.pivot_table(index="shape", columns="contender", values="gbps"))
    by_size.pivot_table(index="contender", columns="shape", values="gbps").plot(
        marker="o", ylabel="GB/s", title="rms0: bandwidth vs threads per row")
else:
    print(run.exploration_skipped())
