Ring depth and key tile at head_dim 128: two or three buffers per K and V ring, 64- or
128-key tiles (three 128-key buffers per ring just fit in 227 KiB). The sweep is logged with
the run (`sweep_p50_us/ring/...`) and shows which default the registry should carry; each ring is a
trial run of its own beside the default (`stagelab journal s6_tma_warpspec`).
# %%
from stagelab.explore import show_sweep, try_variants

if run.explores:
    rings = [(2, 128), (3, 128), (2, 64), (4, 64)]
    variants = {f"STAGES={s} BLOCK_N={n}": {"STAGES_D128": s, "BLOCK_N_D128": n} for s, n in rings}
    shapes = [s for s in run.params.timed_shapes() if s.head_dim == 128 and s.seq_len >= 2048]
    if shapes:
        ring = try_variants(run, "ring", variants, shapes=shapes, repetitions=100,
                            hypothesis="another ring depth or key tile at head_dim 128")
        for name, defines in variants.items():  # built above, so these load from the cache
            print(name, run.variant(**defines).module.dynamic_shared_memory_bytes(128, 0) // 1024, "KiB at D=128")
        show_sweep(ring, value="tflops", title="s6: TFLOP/s by ring depth and key tile")
    else:
        print(f"{run.params.name} has no head_dim-128 problem of 2048+ keys: ring sweep skipped")
else:
    print(run.exploration_skipped())
