from pathlib import Path

import pytest

from stagelab.core.errors import ConfigError
from stagelab.core.registry import load_registry

ROOT = Path(__file__).resolve().parents[1]
HEAD = "family: sdpa\nbinding: binding.cpp\n"


@pytest.fixture
def family(tmp_path):
    (tmp_path / "binding.cpp").write_text("// binding")
    for stem in ("a", "b"):
        (tmp_path / f"{stem}.cu").write_text("// stage")
    return tmp_path


def load(family, text):
    (family / "stages.yaml").write_text(HEAD + text)
    return load_registry(family / "stages.yaml")


def test_shipped_registry_is_valid():
    registry = load_registry(ROOT / "kernels" / "sdpa" / "stages.yaml")
    assert "s0_baseline" in registry.stages
    for stage in registry.stages.values():
        assert stage.source.stem == stage.id and stage.hypothesis
        assert stage.parent is None or stage.parent in registry.stages


def test_defaults_and_overrides(family):
    registry = load(family, "defaults: {min_gain: 0.1, gates: {max_registers: 128}}\n"
                            "stages:\n  - {id: a, hypothesis: h}\n"
                            "  - {id: b, parent: a, min_gain: 0.0, gates: {spills_allowed: true},"
                            " compile_options: {defines: {BLOCK_N: 32}}}\n")
    a, b = registry.get("a"), registry.get("b")
    assert a.min_gain == 0.1 and a.gates.max_registers == 128 and not a.gates.spills_allowed
    assert b.min_gain == 0.0 and b.gates.max_registers == 128 and b.gates.spills_allowed
    assert b.defines == {"BLOCK_N": "32"} and registry.lineage("b") == ["b", "a"]
    assert b.with_defines({"BLOCK_N": 64}).defines == {"BLOCK_N": "64"}


@pytest.mark.parametrize("text, message", [
    ("stages:\n  - {id: a, colour: red}\n", "unknown key(s) ['colour']"),
    ("stages:\n  - {id: a, parent: zzz}\n", "parent 'zzz' is not a stage"),
    ("stages:\n  - {id: c}\n", "source file c.cu does not exist"),
    ("stages:\n  - {id: a}\n  - {id: a}\n", "duplicate stage id"),
    ("stages:\n  - {id: a, parent: b}\n  - {id: b, parent: a}\n", "cycle"),
    ("stages:\n  - {id: a, arch: [hopper]}\n", "is not an architecture"),
    ("stages:\n  - {id: a, min_gain: -1}\n", "min_gain"),
    ("stages:\n  - {id: a, gates: {max_registers: 0}}\n", "max_registers"),
    ("stages:\n  - {id: a, gates: {max_regs: 10}}\n", "unknown key(s) ['max_regs']"),
    ("stages: []\n", "non-empty list"),
    ("extra: 1\nstages:\n  - {id: a}\n", "unknown key(s) ['extra']"),
])
def test_bad_registry_names_the_problem(family, text, message):
    with pytest.raises(ConfigError, match=None) as err:
        load(family, text)
    assert message in str(err.value)


def test_missing_binding(family):
    (family / "binding.cpp").unlink()
    with pytest.raises(ConfigError, match="binding file binding.cpp does not exist"):
        load(family, "stages:\n  - {id: a}\n")


def test_unknown_stage_lookup(family):
    registry = load(family, "stages:\n  - {id: a}\n")
    with pytest.raises(ConfigError, match="unknown stage 'zz'.*known: a"):
        registry.get("zz")


def test_ptxas_forbid_names_advisory_codes(family):
    registry = load(family, "defaults: {gates: {ptxas_forbid: [C7514]}}\nstages:\n  - {id: a}\n")
    assert registry.get("a").gates.ptxas_forbid == ("C7514",)
    with pytest.raises(ConfigError, match="ptxas_forbid: expected a list of ptxas codes"):
        load(family, "stages:\n  - {id: a, gates: {ptxas_forbid: [wgmma_serialized]}}\n")


def _triton_family(folder, text):
    """A family folder with no binding: stages.yaml `text` and Triton stage files t.py and u.py."""
    for stem in ("t", "u"):
        (folder / f"{stem}.py").write_text("# a Triton stage")
    (folder / "stages.yaml").write_text("family: tfam\n" + text)
    return load_registry(folder / "stages.yaml")


def test_backend_per_stage_and_from_the_defaults(family):
    """The source is <id>.cu for cuda (the default) and <id>.py for triton; defaults set the backend."""
    (family / "t.py").write_text("# a Triton stage")
    registry = load(family, "stages:\n  - {id: a}\n  - {id: t, backend: triton, parent: a}\n")
    assert (registry.get("a").backend, registry.get("a").source.name) == ("cuda", "a.cu")
    assert (registry.get("t").backend, registry.get("t").source.name) == ("triton", "t.py")
    assert registry.get("t").with_defines({"BLOCK": 8}).backend == "triton"
    registry = load(family, "defaults: {backend: triton}\nstages:\n  - {id: t}\n  - {id: a, backend: cuda}\n")
    assert registry.get("t").backend == "triton" and registry.get("a").backend == "cuda"


def test_a_triton_only_family_needs_no_binding(tmp_path):
    registry = _triton_family(tmp_path, "defaults: {backend: triton}\nstages:\n  - {id: t}\n  - {id: u, parent: t}\n")
    assert registry.binding is None and [s.source.name for s in registry.stages.values()] == ["t.py", "u.py"]


@pytest.mark.parametrize("text, message", [
    # a cuda stage links the family's binding, so a family with one needs it
    ("stages:\n  - {id: t, backend: triton}\n  - {id: a}\n", "binding file binding.cpp does not exist"),
    ("binding: b.cpp\nstages:\n  - {id: t, backend: triton}\n", "binding file b.cpp does not exist"),
    ("stages:\n  - {id: c, backend: triton}\n", "source file c.py does not exist"),
    ("stages:\n  - {id: t, backend: rust}\n", "backend: expected one of ['cuda', 'cute', 'triton'], got 'rust'"),
    ("defaults: {backend: [triton]}\nstages:\n  - {id: t}\n", "defaults.backend: expected one of"),
    ("stages:\n  - {id: t, backend: triton, compile_options: {nvcc_flags: [-lineinfo]}}\n",
     "stage t.compile_options.nvcc_flags: a triton stage is not built by nvcc"),
])
def test_bad_backend_names_the_problem(tmp_path, text, message):
    (tmp_path / "a.cu").write_text("// stage")
    with pytest.raises(ConfigError) as err:
        _triton_family(tmp_path, text)
    assert message in str(err.value)


def test_the_defaults_nvcc_flags_stay_with_the_cuda_stages(family):
    (family / "t.py").write_text("# a Triton stage")
    registry = load(family, "defaults: {compile_options: {nvcc_flags: [-lineinfo]}}\n"
                            "stages:\n  - {id: a}\n  - {id: t, backend: triton}\n")
    assert registry.get("a").nvcc_flags == ("-lineinfo",) and registry.get("t").nvcc_flags == ()


def test_a_triton_stage_defines_become_python_values_for_its_knobs():
    from stagelab.core.python_stage import knob_value

    assert knob_value("4") == 4 and knob_value("True") is True and knob_value("0.5") == 0.5
    assert knob_value("fp16") == "fp16" and knob_value("'x'") == "x"


def test_a_header_in_a_subfolder_of_the_family_is_one_of_its_headers(tmp_path):
    """A family's parts may live in folders of their own (kernels/sdpa/sched/): their headers count in
    every stage's source hash, so editing one rebuilds the stages."""
    from stagelab.core.build import source_hash
    from stagelab.core.registry import load_registry

    (tmp_path / "binding.cpp").write_text("// binding")
    (tmp_path / "a.cu").write_text('#include "parts/walk.cuh"\n')
    (tmp_path / "parts").mkdir()
    (tmp_path / "parts" / "walk.cuh").write_text("// walk v1\n")
    (tmp_path / "stages.yaml").write_text("family: sdpa\nbinding: binding.cpp\nstages:\n  - {id: a}\n")
    registry = load_registry(tmp_path / "stages.yaml")
    assert tmp_path / "parts" / "walk.cuh" in registry.header_files()
    before = source_hash(registry.get("a"), registry)
    (tmp_path / "parts" / "walk.cuh").write_text("// walk v2\n")
    assert source_hash(registry.get("a"), registry) != before
