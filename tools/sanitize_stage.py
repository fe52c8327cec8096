"""Launch one stage on the family's small odd problems, for compute-sanitizer to watch (needs a GPU).

    compute-sanitizer --tool memcheck  python3 tools/sanitize_stage.py s5_wgmma
    compute-sanitizer --tool racecheck python3 tools/sanitize_stage.py s5_wgmma

The same child `stagelab sanitize STAGE` runs under each tool (`python -m stagelab.launch STAGE
--sanitize`): each of the family's dtypes on its sanitize problems (odd lengths, causal and not),
two launches each. `stagelab sanitize` also reads the verdicts; this script only launches.
"""

from __future__ import annotations

import sys

from stagelab.family import load_family
from stagelab.launch import main as launch
from stagelab.registry import find_stage

if __name__ == "__main__":
    stage_id = sys.argv[1]
    params = sys.argv[2] if len(sys.argv) > 2 else load_family(find_stage(stage_id)[0].family).acceptance_params
    sys.exit(launch([stage_id, "--params", params, "--sanitize"]))
