"""The library contenders themselves checked on a parameter file's problems (GPU): each of torch
SDPA's backends and FlashAttention-4 against the float64 reference, with the checks' budget
(stagelab.measure.checks: 2 x the plain low-precision error + atol). A stage run times the contenders but
never checks them; on grouped-query attention, Sq != Sk (causal bottom-right) and strided bshd inputs
a contender that silently computed another problem (torch's top-left `is_causal`) would make every
ratio against it meaningless. A backend that refuses a problem is listed as unavailable with why.

    python3 tools/check_contenders.py [--params params/models.yaml] [--contenders flash cudnn ...]
                                      [--dtypes float16 bfloat16] [--out DIR]

Writes contenders_check.json (and prints one line per contender and problem) into --out or $OUT.
Exit status 1 when any contender that ran is over its budget.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch

from stagelab.measure.checks import error_budget, judge_launches
from stagelab.families.sdpa.contenders import contender_output
from stagelab.families.sdpa.reference import default_scale
from stagelab.core.params import load_params
from stagelab.core.paths import resolve_params_path

DEFAULT_CONTENDERS = ("flash", "efficient", "cudnn", "math", "fa4")


def check_one(family, name: str, problem, inputs, ref, budget) -> dict:
    """One contender on one problem: its verdict, or why it could not run."""
    q, k, v = inputs
    try:
        runs = [contender_output(name, q, k, v, default_scale(problem.head_dim), problem.causal) for _ in range(2)]
        torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001 -- a backend refusing a problem is a finding, not a crash
        torch.cuda.synchronize()
        return {"status": "unavailable", "reason": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"}
    verdict = judge_launches(runs[0], runs[1], ref, budget.bound)
    return {"status": "pass" if not verdict.reasons else "FAIL", "max_abs_err": verdict.max_err,
            "budget": budget.bound, "ratio": verdict.max_err / budget.bound if budget.bound else float("nan"),
            "reason": "; ".join(verdict.reasons) or "ok"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--params", default="params/models.yaml")
    parser.add_argument("--contenders", nargs="+", default=list(DEFAULT_CONTENDERS))
    parser.add_argument("--dtypes", nargs="+", default=["float16", "bfloat16"])
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    args = parser.parse_args(argv)
    params = load_params(resolve_params_path(args.params))
    family = params.family
    rows, failed = [], False
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}", flush=True)
    for problem in params.timed_shapes():
        for dtype_name in args.dtypes:
            dtype = family.torch_dtype(dtype_name)
            inputs = family.make_inputs(problem, dtype, 0, "cuda")
            ref = family.reference(problem, inputs, torch.float64)
            budget = error_budget(ref, family.reference(problem, inputs, dtype), dtype, family.atol_magnitude(ref))
            for name in args.contenders:
                row = {"problem": problem.tag, "dtype": dtype_name, "contender": name,
                       **check_one(family, name, problem, inputs, ref, budget)}
                failed |= row["status"] == "FAIL"
                rows.append(row)
                print(f"{row['problem']:58s} {dtype_name:9s} {name:9s} {row['status']:11s} "
                      f"{row.get('ratio', float('nan')):.3g} {row['reason'][:160]}", flush=True)
            del inputs, ref
            torch.cuda.empty_cache()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "contenders_check.json").write_text(json.dumps(
        {"torch": torch.__version__, "device": torch.cuda.get_device_name(), "rows": rows}, indent=2))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
