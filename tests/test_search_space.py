"""A stage's search_space in stages.yaml: validated at load time, errors naming the stage and the key."""

from pathlib import Path

import pytest

from stagelab.core.errors import ConfigError
from stagelab.core.registry import load_registry
from stagelab.core.space import config_label

ROOT = Path(__file__).resolve().parents[1]
HEAD = "family: sdpa\nbinding: binding.cpp\nstages:\n  - id: a\n    compile_options: {defines: {BLOCK_N: 64, STAGES: 2}}\n"


@pytest.fixture
def family(tmp_path):
    (tmp_path / "binding.cpp").write_text("// binding")
    (tmp_path / "a.cu").write_text("// stage")
    return tmp_path


def load(family, space: str):
    (family / "stages.yaml").write_text(HEAD + space)
    return load_registry(family / "stages.yaml")


def test_configurations_are_the_product_in_declared_order(family):
    stage = load(family, "    search_space: {STAGES: [1, 2], BLOCK_N: [32, 64, 128]}\n").get("a")
    configs = stage.search_space.configurations()
    assert stage.search_space.size == len(configs) == 6
    assert configs[0] == {"STAGES": "1", "BLOCK_N": "32"} and configs[-1] == {"STAGES": "2", "BLOCK_N": "128"}
    assert config_label(configs[1]) == "BLOCK_N=64,STAGES=1"
    assert stage.with_defines(configs[1]).defines == {"BLOCK_N": "64", "STAGES": "1"}
    assert stage.search_space.as_params() == {"space.STAGES": "1,2", "space.BLOCK_N": "32,64,128"}


def test_no_search_space_is_an_empty_one(family):
    assert not load(family, "").get("a").search_space


@pytest.mark.parametrize("space, message", [
    ("    search_space: {BLOCK_N: 64}\n", "stage a: search_space.BLOCK_N: expected a list"),
    ("    search_space: {BLOCK_N: {a: 1}}\n", "stage a: search_space.BLOCK_N: expected a list"),
    ("    search_space: {WARPS: [4, 8]}\n", "stage a: search_space.WARPS: not a define of this stage"),
    ("    search_space: {'BLOCK N': [4]}\n", "stage a: search_space key 'BLOCK N' is not a preprocessor name"),
    ("    search_space: {1: [4]}\n", "stage a: search_space key 1 is not a preprocessor name"),
    ("    search_space: {}\n", "stage a: search_space is empty"),
    ("    search_space: {BLOCK_N: []}\n", "stage a: search_space.BLOCK_N: the list of values is empty"),
    ("    search_space: [BLOCK_N]\n", "stage a: search_space: expected a mapping"),
    ("    search_space: {BLOCK_N: [32, 32]}\n", "stage a: search_space.BLOCK_N: duplicate values"),
    ("    search_space: {BLOCK_N: [[32]]}\n", "stage a: search_space.BLOCK_N: values must be numbers or names"),
    ("    variants: {tuned: {WARPS: 4}}\n", "stage a: variants.tuned: ['WARPS'] are not defines of this stage"),
    ("    variants: {tuned: 32}\n", "stage a: variants.tuned: expected a non-empty mapping"),
    ("    variants: {'a b': {BLOCK_N: 32}}\n", "stage a: variants key 'a b' is not a name"),
    ("    variants: [tuned]\n", "stage a: variants: expected a mapping"),
])
def test_bad_search_space_or_variants_name_stage_and_key(family, space, message):
    with pytest.raises(ConfigError) as err:
        load(family, space)
    assert message in str(err.value)


def test_shipped_spaces_cover_the_tuned_stages():
    registry = load_registry(ROOT / "kernels" / "sdpa" / "stages.yaml")
    for stage_id in ("s3b_register_softmax", "s4_pipeline3"):
        space = registry.get(stage_id).search_space
        assert space.size > 1
        # every configuration overrides only declared defines (the registry checked), and the
        # stage's own defaults are one of them, so a tune can only match or beat them
        defaults = {name: registry.get(stage_id).defines[name] for name, _ in space.axes}
        assert defaults in space.configurations()


def test_variants_are_named_define_overrides(family):
    stage = load(family, "    variants: {tuned: {BLOCK_N: 32}}\n").get("a")
    assert stage.variants == {"tuned": {"BLOCK_N": "32"}}
    assert stage.variant("tuned").defines == {"BLOCK_N": "32", "STAGES": "2"}
    with pytest.raises(ConfigError, match="stage a has no variant 'other'; known: \\['tuned'\\]"):
        stage.variant("other")
