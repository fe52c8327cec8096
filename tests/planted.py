"""The scratch checkout of the test-only softmax stages in tests/fixtures/planted: those stages beside
kernels/softmax's headers and binding, and the repository's parameter files."""

import shutil
from pathlib import Path

from stagelab.core.paths import repo_root

PLANTED = Path(__file__).parent / "fixtures" / "planted"
SOFTMAX_SHARED = ("binding.cpp", "softmax_api.h", "softmax_common.cuh", "sm0_block_three_pass.cu")


def make_planted_checkout(root: Path) -> Path:
    kernels = root / "kernels" / "softmax"
    kernels.mkdir(parents=True)
    for name in SOFTMAX_SHARED:
        shutil.copy(repo_root() / "kernels" / "softmax" / name, kernels / name)
    for path in PLANTED.iterdir():
        shutil.copy(path, kernels / path.name)
    shutil.copytree(repo_root() / "params", root / "params")
    return root
