Where does one warp per row stop paying? The same number of elements (16 Mi) cut into rows
from 64 to 65536 wide: the parent's block per row, this stage's warp per row and torch.softmax
side by side. Narrow rows favour the warp (no block barrier, many rows per block); very wide
rows leave one warp with a long serial walk. The sweep is logged with the run.
# %%
import pandas as pd

from stagelab.explore import time_contender
from stagelab.families.softmax import Rows

if run.explores:
    elements = 1 << 24
    problems = [Rows(elements // cols, cols) for cols in (64, 256, 1024, 4096, 16384, 65536)]
    kernels = {"sm0 (block per row)": run.parent_kernel(), "sm1 (warp per row)": run.kernel}
    widths = run.sweep("row_width", kernels, problems, repetitions=100)
    library = pd.DataFrame([time_contender(run.family, "torch", p, repetitions=100) for p in problems])
    widths = pd.concat([widths, library], ignore_index=True)
    widths = widths.assign(cols=widths["shape"].str.split("x").str[1].astype(int))
    display(widths.pivot_table(index="cols", columns="contender", values="gbps"))
    widths.pivot_table(index="cols", columns="contender", values="gbps").plot(
        marker="o", logx=True, ylabel="GB/s", title="softmax: bandwidth vs row width (16 Mi elements)")
else:
    print(run.exploration_skipped())
