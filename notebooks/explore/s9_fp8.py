FP8 against its fp16 parent, and the ring at head_dim 128. The parent runs on the standard fp16
inputs, s9 on the same inputs quantized per (batch, head) outside the timed launch (its V
pre-pass counts). The checks above report `err_vs_fp16` beside the FP8 budget: what FP8 costs
a user, quantization included. The sweep is logged with the run (`sweep_p50_us/fp8/...`).
# %%
if run.explores:
    variants = {"s6 (fp16)": run.parent_kernel(), "s9 default": run.kernel,
                "s9 STAGES_D128=2": run.variant(STAGES_D128=2),
                "s9 BLOCK_N_D128=64 STAGES_D128=4": run.variant(BLOCK_N_D128=64, STAGES_D128=4)}
    shapes = [s for s in run.params.timed_shapes() if s.head_dim == 128 and s.seq_len >= 2048]
    if shapes:
        fp8 = run.sweep("fp8", variants, shapes, mode="throughput", repetitions=50)
        display(fp8.pivot_table(index="shape", columns="contender", values="tflops"))
    else:
        print(f"{run.params.name} has no head_dim-128 problem of 2048+ keys: sweep skipped")
    if not checks.empty and "err_vs_fp16" in checks:
        display(checks.groupby(["shape", "dtype"])[["max_abs_err", "budget", "err_vs_fp16"]].max())
else:
    print(run.exploration_skipped())
