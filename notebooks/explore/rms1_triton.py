Where does a row in registers pay? The same 64 Mi elements cut into rows from 512 to 65536 wide
(past BLOCK = 8192 the stage loops and reads x twice, as its parent does): rms0, rms1 and the
library contenders side by side. The sweep is logged with the run.
# %%
import pandas as pd

from stagelab.explore import time_contender

if run.explores:
    elements = 1 << 26
    problems = [run.family.problem(elements // cols, cols) for cols in (512, 2048, 8192, 16384, 65536)]
    kernels = {"rms0 (CUDA, block per row)": run.parent_kernel(), "rms1 (Triton, row in registers)": run.kernel}
    widths = run.sweep("row_width", kernels, problems, repetitions=100)
    for name in run.family.contenders:
        try:
            library = [time_contender(run.family, name, p, repetitions=100) for p in problems]
        except RuntimeError as exc:  # Liger where it is not installed, or a width it refuses
            print(f"{name}: {exc}")
            continue
        widths = pd.concat([widths, pd.DataFrame(library)], ignore_index=True)
    widths = widths.assign(cols=widths["shape"].str.split("x").str[1].astype(int))
    display(widths.pivot_table(index="cols", columns="contender", values="gbps"))
    widths.pivot_table(index="cols", columns="contender", values="gbps").plot(
        marker="o", logx=True, ylabel="GB/s", title="rmsnorm: bandwidth vs row width (64 Mi elements)")
else:
    print(run.exploration_skipped())
