Tile shape on wgmma at head_dim 128: one or two consumer warpgroups per block (64 or 128
query rows sharing each K/V tile read) and 48-, 64- or 128-key tiles (48 fits three blocks per
SM), on the mission shape and the long acceptance shapes. Shared memory grows with both; the sweep is logged with the run
(`sweep_p50_us/tiles/...`) and shows which default the registry should carry; each tile shape is a
trial run of its own beside the default (`stagelab journal s5_wgmma`).
# %%
from stagelab.explore import show_sweep, try_variants

if run.explores:
    tiles = [(1, 48), (1, 64), (1, 128), (2, 128)]
    variants = {f"WG={wg} BLOCK_N={n}": {"NUM_WARPGROUPS_D128": wg, "BLOCK_N_D128": n} for wg, n in tiles}
    shapes = [s for s in run.params.timed_shapes() if s.head_dim == 128 and s.seq_len >= 2048]
    if shapes:
        tiles = try_variants(run, "tiles", variants, shapes=shapes, repetitions=100,
                             hypothesis="another warpgroup count or key tile at head_dim 128")
        for name, defines in variants.items():  # built above, so these load from the cache
            print(name, run.variant(**defines).module.dynamic_shared_memory_bytes(128, 0) // 1024, "KiB at D=128")
        show_sweep(tiles, value="tflops", title="s5: TFLOP/s by warpgroups and key tile")
    else:
        print(f"{run.params.name} has no head_dim-128 problem of 2048+ keys: tile sweep skipped")
else:
    print(run.exploration_skipped())
