"""The planted protocol bugs (tests/fixtures/planted/protocol/, issue 46), on the CPU: each finds its
passage once in today's headers, names a stage with ring-protocol checks and a rule the checking
build reports, and together they plant the four kinds the issue asks for. Caught on a GPU by
tests/test_protocol_plants_gpu.py."""

import re

import pytest
from planted_sdpa import PROTOCOL_PLANTS, ProtocolPlant, load_protocol_plants, make_sdpa_plant_checkout, plant_text

from stagelab.core.paths import repo_root
from stagelab.core.registry import load_registry
from stagelab.measure.protocol import has_protocol_checks

SDPA = repo_root() / "kernels" / "sdpa"
REGISTRY = load_registry(SDPA / "stages.yaml")


def rule_names() -> list[str]:
    header = (SDPA / "instrument" / "protocol.cuh").read_text()
    listed = re.search(r"kProtocolRuleNames\[\] = \{(.*?)\};", header, re.S)[1]
    return re.findall(r'"(\w+)"', listed)[1:]  # after "ok"


@pytest.mark.parametrize("name", sorted(PROTOCOL_PLANTS))
def test_the_plant_edits_one_passage_of_a_checked_stage_and_expects_a_known_rule(name):
    plant = PROTOCOL_PLANTS[name]
    text = (SDPA / plant.header).read_text()
    planted = plant_text(text, plant)
    assert "PLANTED" in planted and planted != text
    assert has_protocol_checks(REGISTRY.get(plant.stage), REGISTRY)
    assert plant.rule in rule_names() and plant.ring in ("K", "V", "Q")
    assert plant.expected == f"rule {plant.rule}, ring {plant.ring}"


def test_the_plants_cover_the_four_kinds_of_ordering_bug():
    kinds = {(plant.rule, plant.ring) for plant in PROTOCOL_PLANTS.values()}
    assert {("release_before_retire", "K"), ("release_before_retire", "V")} <= kinds  # early K, early V release
    assert any(rule == "read_before_full" for rule, _ in kinds)        # a missing full wait
    assert any(rule == "refill_before_release" for rule, _ in kinds)   # a refill before release
    assert any(plant.stage == "s18_three_turns" and plant.ring == "K" for plant in PROTOCOL_PLANTS.values())


def test_a_plant_file_is_read_whole_and_a_checkout_gets_only_its_own_edit(tmp_path):
    folder = tmp_path / "plants"
    folder.mkdir()
    (folder / "sample.yaml").write_text("what: >\n  two\n  lines\nstage: s6_tma_warpspec\nrule: read_before_full\n"
                                        "ring: V\nheader: mainloop/consumer.cuh\npassage: |\n  a\nplanted: |\n  b\n")
    plant = load_protocol_plants(folder)["sample"]
    assert isinstance(plant, ProtocolPlant) and plant.what == "two lines" and plant.passage == "a\n"
    name = sorted(PROTOCOL_PLANTS)[0]
    root = make_sdpa_plant_checkout(tmp_path / "checkout", name)
    edited = [path.name for path in (root / "kernels" / "sdpa").rglob("*.cuh") if "PLANTED" in path.read_text()]
    assert edited == [PROTOCOL_PLANTS[name].header.split("/")[-1]]
