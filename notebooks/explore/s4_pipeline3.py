Pipeline depth 1 (FA2's single buffer), 2 and 3 with the same code, on the mission shape and
the long acceptance shapes; shared memory grows with the depth. This sweep is the evidence
behind s4's outcome: it is logged with the run (`sweep_p50_us/depth/...`), each depth other than
the default a trial run of its own (`stagelab journal s4_pipeline3`).
# %%
from stagelab.explore import try_variants

if run.explores:
    shapes = [run.params.mission, *[s for s in run.params.shapes if s.seq_len >= 2048]]
    depths = {f"PIPELINE_STAGES={d}": {"PIPELINE_STAGES": d} for d in (1, 2, 3)
              if str(d) != run.stage.defines.get("PIPELINE_STAGES")}
    by_depth = try_variants(run, "depth", depths, shapes=shapes, repetitions=100,
                            hypothesis="a shallower or deeper cp.async pipeline than the default")
    for d in (1, 2, 3):  # built above, so these load from the cache
        print(f"PIPELINE_STAGES={d}", run.variant(PIPELINE_STAGES=d).module.dynamic_shared_memory_bytes(128, 0) // 1024,
              "KB at D=128")
    display(by_depth.pivot_table(index="shape", columns="contender", values="p50_us"))
    by_depth.pivot_table(index="contender", columns="shape", values="tflops").plot(
        marker="o", ylabel="TFLOP/s", title="s4: TFLOP/s vs pipeline depth")
else:
    print(run.exploration_skipped())
