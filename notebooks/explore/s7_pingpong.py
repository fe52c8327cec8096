Where the pingpong turn starts and ends: K(n)'s wait inside or before the turn
(`WS_WAIT_K_IN_TURN`), O's rescale inside or before it (`WS_RESCALE_IN_TURN`), against the
default on the long shapes (the parent beside it is in the timing above). The sweep is logged with
the run (`sweep_p50_us/turn/...`), each layout a trial run of its own (`stagelab journal s7_pingpong`).
# %%
from stagelab.explore import show_sweep, try_variants

if run.explores:
    variants = {"K wait in turn": {"WS_WAIT_K_IN_TURN": 1}, "rescale in turn": {"WS_RESCALE_IN_TURN": 1}}
    shapes = [s for s in run.params.timed_shapes() if s.seq_len >= 2048]
    if shapes:
        turn = try_variants(run, "turn", variants, shapes=shapes, repetitions=100,
                            hypothesis="a wider pingpong turn hides K's wait or O's rescale")
        show_sweep(turn, value="tflops", title="s7: TFLOP/s by turn layout")
    else:
        print(f"{run.params.name} has no problem of 2048+ keys: turn sweep skipped")
else:
    print(run.exploration_skipped())
