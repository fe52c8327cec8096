How far is the floor from the ceiling? Latency and TFLOP/s of s0 against sequence length at
D=64, non-causal, next to PyTorch's flash backend. A scalar kernel's TFLOP/s should stay flat
as S grows (it is bound by CUDA-core arithmetic), while the tensor-core library climbs.
# %%
import pandas as pd

from stagelab.explore import time_contender, time_kernel
from stagelab.families.sdpa import Shape

if run.explores:
    rows = []
    for seq_len in (256, 512, 1024, 2048):
        shape = Shape(2, 8, seq_len, 64, False)
        rows.append(time_kernel(run.family, run.kernel, shape, repetitions=100))
        rows.append(time_contender(run.family, "flash", shape, repetitions=100))
    scaling = run.log_sweep("seq_len", pd.DataFrame(rows))
    display(scaling.pivot_table(index="shape", columns="contender", values=["p50_us", "tflops"]))
    scaling.assign(seq_len=scaling["shape"].str.split("x").str[2].astype(int)).pivot_table(
        index="seq_len", columns="contender", values="tflops").plot(marker="o", logy=True, ylabel="TFLOP/s")
else:
    print(run.exploration_skipped())
