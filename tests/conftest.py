import os
import shutil

import pytest
import torch

from stagelab.core.paths import binding_cache_dir

# One compiled torch binding per family for the whole suite (core.binding), also for the tests that
# build into a fresh STAGELAB_BUILD_DIR of their own: each such build then costs its nvcc and a link
# instead of ~40 s more. The checkout's own binding cache: keyed by content, so sharing it with the
# user's builds, earlier runs and the other xdist worker is safe (a lock has one worker compile a
# binding while the other waits). Set here, before any test, so child processes inherit it too.
os.environ.setdefault("STAGELAB_BINDING_CACHE", str(binding_cache_dir()))


# The files whose tests take longest on the 2-core machine (`pytest --durations`), longest first.
LONGEST_FILES = ("test_variants_build.py", "test_resources.py", "test_team_server.py", "test_ui_browser.py",
                 "test_trial.py", "test_batch.py", "test_several_gpus.py", "test_tune.py", "test_build.py")


def _schedule_rank(item) -> tuple[bool, int]:
    name = item.path.name
    return "slow" not in item.keywords, LONGEST_FILES.index(name) if name in LONGEST_FILES else len(LONGEST_FILES)


def pytest_collection_modifyitems(config, items):
    # The slow tests (kernel builds, notebooks, servers) first, the longest files before the rest: under
    # `pytest -n` (Makefile) both workers start on them and the quick ones fill the end, instead of one
    # worker finishing the last nvcc build alone while the other waits. The sort is stable: within a
    # file the tests keep their order.
    items.sort(key=_schedule_rank)
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def tmp_store(tmp_path, monkeypatch):
    """A real, empty SQLite MLflow store for one test."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    import mlflow

    mlflow.set_tracking_uri(uri)
    return uri


@pytest.fixture(scope="session")
def nvcc_available():
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not installed")
    return True


@pytest.fixture
def stagelab_cli(tmp_store):
    """`python -m stagelab ARGS` in a real subprocess on the test's store; returns the CompletedProcess."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]

    def run(*args, timeout=120, **env):
        return subprocess.run([sys.executable, "-m", "stagelab", *args], capture_output=True, text=True, cwd=root,
                              env={**os.environ, "MLFLOW_TRACKING_URI": tmp_store, **env}, timeout=timeout)

    return run
