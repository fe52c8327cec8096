"""The family's torch binding: compiled once, linked to each stage, stage modules side by side."""

import json
import shutil
import sys
import threading
from pathlib import Path

import pytest

from stagelab.core.binding import compile_binding
from stagelab.core.build import build_stage
from stagelab.core.errors import BuildError
from stagelab.core.registry import load_registry

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def softmax(tmp_path, monkeypatch):
    """kernels/softmax's registry, with a build folder of its own (the binding cache stays the
    suite's, tests/conftest.py)."""
    monkeypatch.setenv("STAGELAB_BUILD_DIR", str(tmp_path / "build"))
    return load_registry(ROOT / "kernels" / "softmax" / "stages.yaml")


@pytest.mark.slow
def test_two_stages_share_one_binding_and_load_side_by_side(softmax, nvcc_available):
    first = build_stage(softmax.get("sm0_block_three_pass"), softmax)
    binding = Path(json.loads((first.directory / "build.json").read_text())["binding"])
    compiled_at = binding.stat().st_mtime_ns
    second = build_stage(softmax.get("sm1_warp_online"), softmax)
    assert not first.cached and not second.cached
    # the second stage reused the first's binding object: linked, not compiled
    assert second.steps.binding_cached and "binding cached" in second.summary
    assert json.loads((second.directory / "build.json").read_text())["binding"] == str(binding)
    assert binding.stat().st_mtime_ns == compiled_at
    # both modules live in one process, each calling its own stage's launcher
    assert first.module is not second.module
    assert sys.modules[first.module_name] is first.module and sys.modules[second.module_name] is second.module
    assert first.module.stage_config().startswith("sm0_block_three_pass")
    assert second.module.stage_config().startswith("sm1_warp_online")


@pytest.mark.slow
def test_a_binding_that_fails_to_compile_names_binding_cpp(tmp_path, monkeypatch, nvcc_available):
    family = tmp_path / "softmax"
    shutil.copytree(ROOT / "kernels" / "softmax", family)
    binding = family / "binding.cpp"
    binding.write_text('#include "no_such_header.h"\n' + binding.read_text())
    monkeypatch.setenv("STAGELAB_BUILD_DIR", str(tmp_path / "build"))
    monkeypatch.setenv("STAGELAB_BINDING_CACHE", str(tmp_path / "bindings"))
    registry = load_registry(family / "stages.yaml")
    with pytest.raises(BuildError) as err:
        build_stage(registry.get("sm0_block_three_pass"), registry, load=False)
    assert "compiling the torch binding binding.cpp of softmax failed" in err.value.reason
    assert "no_such_header.h" in err.value.log and "-DTORCH_EXTENSION_NAME=stagelab_binding" in err.value.log
    # nothing half-built is left for the next build to take as cached
    assert not list((tmp_path / "bindings").rglob("binding.o"))


def test_concurrent_builders_compile_the_binding_once(tmp_path, monkeypatch, nvcc_available):
    """Two builders at once (xdist workers, `stagelab build -j`): one compiles, the other waits for
    it and takes the cached object. A fake compiler that takes a second and logs each compile."""
    calls = tmp_path / "calls.log"
    compiler = tmp_path / "fake-c++"
    compiler.write_text(f"""#!/bin/sh
case "$*" in *--version*) echo "fake c++ 1.0"; exit 0;; esac
echo compile >> {calls}
sleep 1
while [ $# -gt 0 ]; do [ "$1" = -o ] && touch "$2"; shift; done
""")
    compiler.chmod(0o755)
    monkeypatch.setenv("CXX", str(compiler))
    monkeypatch.setenv("STAGELAB_BINDING_CACHE", str(tmp_path / "bindings"))
    registry = load_registry(ROOT / "kernels" / "softmax" / "stages.yaml")
    results = []
    threads = [threading.Thread(target=lambda: results.append(compile_binding(registry))) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert calls.read_text().splitlines() == ["compile"]
    assert sorted(r.cached for r in results) == [False, True]
    assert results[0].path == results[1].path and results[0].path.is_file()
    assert compile_binding(registry).cached
