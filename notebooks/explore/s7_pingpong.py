Pingpong against its parent on the long shapes, per head dim: the gain should be largest at
head_dim 128, where a tile's softmax is as long as its GEMMs. The same comparison with 64-key
tiles shows whether shorter turns help the alternation.
# %%
if run.gpu_available:
    variants = {"BLOCK_N=128": run.variant(), "BLOCK_N=64": run.variant(BLOCK_N_D128=64, BLOCK_N_D64=64)}
    shapes = [s for s in run.params.timed_shapes() if s.seq_len >= 2048]
    if shapes:
        tiles = run.sweep("tiles", variants, shapes, repetitions=100)
        display(tiles.pivot_table(index="shape", columns="contender", values="tflops"))
        tiles.pivot_table(index="contender", columns="shape", values="tflops").plot(
            kind="bar", ylabel="TFLOP/s", title="s7: TFLOP/s by key tile")
    else:
        print(f"{run.params.name} has no problem of 2048+ keys: tile sweep skipped")
else:
    print("no CUDA device: exploration skipped")
