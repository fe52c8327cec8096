Registers and spills per head dim (the price of keeping everything in registers), and the
error against the budget next to s2's on the same inputs: moving the softmax into registers
must not cost accuracy.
# %%
import pandas as pd

from stagelab.measure.family_checks import check_all

display(run.results.resources.frame()[["tag", "registers", "total_shared_memory_bytes", "spill_store_bytes", "spill_load_bytes"]])
if run.explores:
    s2 = run.parent_kernel()
    shapes = [s for s in run.params.shapes if s.seq_len >= 512] or list(run.params.shapes)
    rows = []
    for name, kernel in (("s2_wmma", s2), ("s3b_register_softmax", run.kernel)):
        for r in check_all(run.family, kernel.into, shapes, run.params.dtypes, run.params.seeds[:1], "cuda"):
            rows.append({"kernel": name, **r.as_row()})
    ratios = pd.DataFrame(rows)
    display(ratios.pivot_table(index=["shape", "dtype"], columns="kernel", values="err_budget_ratio"))
else:
    print(run.exploration_skipped())
