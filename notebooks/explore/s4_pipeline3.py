Pipeline depth 1 (FA2's single buffer), 2 and 3 with the same code, on the mission shape and
the long acceptance shapes; shared memory grows with the depth. This sweep is the evidence
behind s4's outcome: it is logged with the run (`sweep_p50_us/depth/...`).
# %%
if run.explores:
    depths = {f"PIPELINE_STAGES={d}": run.variant(PIPELINE_STAGES=d) for d in (1, 2, 3)}
    for name, kernel in depths.items():
        print(name, kernel.module.dynamic_shared_memory_bytes(128, 0) // 1024, "KB at D=128")
    shapes = [run.params.mission, *[s for s in run.params.shapes if s.seq_len >= 2048]]
    by_depth = run.sweep("depth", depths, shapes, repetitions=100)
    display(by_depth.pivot_table(index="shape", columns="contender", values="p50_us"))
    by_depth.pivot_table(index="contender", columns="shape", values="tflops").plot(
        marker="o", ylabel="TFLOP/s", title="s4: TFLOP/s vs pipeline depth")
else:
    print(run.exploration_skipped())
