Where the pingpong turn starts and ends: K(n)'s wait inside or before the turn
(`WS_WAIT_K_IN_TURN`), O's rescale inside or before it (`WS_RESCALE_IN_TURN`), against the
parent on the long shapes. The sweep is logged with the run (`sweep_p50_us/turn/...`).
# %%
if run.explores:
    variants = {
        "default": run.variant(),
        "K wait in turn": run.variant(WS_WAIT_K_IN_TURN=1),
        "rescale in turn": run.variant(WS_RESCALE_IN_TURN=1),
        "parent (no pingpong)": run.parent_kernel(),
    }
    shapes = [s for s in run.params.timed_shapes() if s.seq_len >= 2048]
    if shapes:
        turn = run.sweep("turn", variants, shapes, repetitions=100)
        display(turn.pivot_table(index="shape", columns="contender", values="tflops"))
        turn.pivot_table(index="contender", columns="shape", values="tflops").plot(
            kind="bar", ylabel="TFLOP/s", title="s7: TFLOP/s by turn layout")
    else:
        print(f"{run.params.name} has no problem of 2048+ keys: turn sweep skipped")
else:
    print(run.exploration_skipped())
