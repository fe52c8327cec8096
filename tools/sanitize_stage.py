"""Launch one stage on small odd problems, for compute-sanitizer to watch (needs a GPU).

    compute-sanitizer --tool memcheck  python3 tools/sanitize_stage.py s5_wgmma
    compute-sanitizer --tool racecheck python3 tools/sanitize_stage.py s5_wgmma

Each of the family's dtypes, on the family's sanitizer problems (odd lengths, causal and
not), two launches each; prints one line per launch. The sanitizer's own summary says
whether it found anything.
"""

from __future__ import annotations

import sys

import torch

from stagelab.build import build_stage
from stagelab.family import load_family
from stagelab.registry import find_stage

# Small, ragged problems per family: partial query and key tiles, causal and not.
SANITIZE_PROBLEMS = {
    "sdpa": [{"shape": [1, 2, 77, 64], "causal": [False, True]}, {"shape": [1, 1, 333, 128], "causal": [False, True]}],
    "softmax": [{"shape": [5, 77]}, {"shape": [3, 4097]}],
}


def main(stage_id: str) -> int:
    registry, stage = find_stage(stage_id)
    family = load_family(registry.family)
    kernel = family.stage_kernel(build_stage(stage, registry).module, stage_id)
    for entry in SANITIZE_PROBLEMS[family.name]:
        for problem in family.parse_problem("sanitize", entry):
            for dtype in family.dtypes.values():
                inputs = family.make_inputs(problem, dtype, 0, "cuda")
                out = family.new_output(problem, inputs)
                for _ in range(2):
                    family.call(kernel.into, problem, inputs, out)
                torch.cuda.synchronize()
                print(f"{stage_id} {problem.tag} {dtype}: ok", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
