Ring depth and key tile at head_dim 128: two or three buffers per K and V ring, 64- or
128-key tiles (three 128-key buffers per ring just fit in 227 KiB). The sweep is logged with
the run (`sweep_p50_us/ring/...`) and shows which default the registry should carry.
# %%
if run.explores:
    rings = [(2, 128), (3, 128), (2, 64), (4, 64)]
    variants = {f"STAGES={s} BLOCK_N={n}": run.variant(STAGES_D128=s, BLOCK_N_D128=n) for s, n in rings}
    for name, kernel in variants.items():
        print(name, kernel.module.dynamic_shared_memory_bytes(128, 0) // 1024, "KiB at D=128")
    shapes = [s for s in run.params.timed_shapes() if s.head_dim == 128 and s.seq_len >= 2048]
    if shapes:
        ring = run.sweep("ring", variants, shapes, repetitions=100)
        display(ring.pivot_table(index="shape", columns="contender", values="tflops"))
        ring.pivot_table(index="contender", columns="shape", values="tflops").plot(
            kind="bar", ylabel="TFLOP/s", title="s6: TFLOP/s by ring depth and key tile")
    else:
        print(f"{run.params.name} has no head_dim-128 problem of 2048+ keys: ring sweep skipped")
else:
    print(run.exploration_skipped())
