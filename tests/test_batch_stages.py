"""The device call's prebuild: the stages its batches name (tools/batch_stages.py) and the parents
their runs time them beside (`stagelab build --with-parents`), so no notebook builds inside its batch's time."""

from pathlib import Path

import pytest
from tool_module import load_tool

from stagelab.cli.stages import with_parents
from stagelab.core.errors import ConfigError
from stagelab.core.registry import find_stage


@pytest.fixture(scope="module")
def tool():
    return load_tool("batch_stages")


def test_the_stages_of_every_batch_each_once_in_order(tool):
    batches = "--stages s18_three_turns s19_int8 --params params/long.yaml;--stages s19_int8 s9_fp8 --gpus all"
    assert tool.batch_stages(batches) == ["s18_three_turns", "s19_int8", "s9_fp8"]


def test_the_abbreviations_stagelab_run_takes_name_stages_too(tool):
    from stagelab.cli.main import build_parser

    # the 32nd session's call spelled `--stage`, which `stagelab run` took, and the prebuild built
    # every stage (3 minutes of device time)
    for spelling in ("--stage", "--stag"):
        assert build_parser().parse_args(["run", spelling, "s19_int8"]).stages == ["s19_int8"]
    batches = "--stage s19_int8 --params params/long.yaml;--stages=s9_fp8 --steps check"
    assert tool.batch_stages(batches) == ["s19_int8", "s9_fp8"]
    assert tool.batch_stages("--steps check --params params/long.yaml") is None


def test_a_batch_that_names_no_stage_means_every_stage(tool):
    assert tool.batch_stages("--stages s19_int8;--params params/long.yaml") is None
    assert tool.batch_stages("--stages --params params/long.yaml") is None
    assert tool.batch_stages(" ; ") is None


def test_parents_come_before_the_stages_that_name_them():
    stages = ["s18_three_turns", "s19_int8", "s0_baseline"]
    built = with_parents(stages)
    parent_of = {s: find_stage(s)[1].parent for s in stages}
    assert parent_of["s0_baseline"] is None
    assert set(built) == set(stages) | {p for p in parent_of.values() if p}
    assert len(built) == len(set(built))
    for stage, parent in parent_of.items():
        if parent:
            assert built.index(parent) < built.index(stage)


def test_an_unknown_stage_is_refused_by_name():
    with pytest.raises(ConfigError, match="s99_nothing"):
        with_parents(["s99_nothing"])


def test_build_with_parents_builds_the_parent_too(stagelab_cli, nvcc_available):
    """The CLI flag on the example family (a Triton stage whose parent is CUDA: seconds, no GPU)."""
    pytest.importorskip("triton")
    examples = Path(__file__).resolve().parents[1] / "examples" / "families"
    done = stagelab_cli("build", "--family", "silu", "s1_triton", "--with-parents", timeout=600,
                        STAGELAB_FAMILY_PATH=str(examples))
    assert done.returncode == 0, done.stdout + done.stderr
    built = {line.split(":")[0] for line in done.stdout.splitlines() if ": built in " in line or ": cached (" in line}
    assert built == {"s0_naive", "s1_triton"}


def test_a_batch_runs_the_protocol_step_by_its_steps_or_its_parameter_file(tool):
    """device_run.sh prebuilds the protocol step's builds where a batch will make them (acceptance.yaml
    has the step; its notebook built them inside the batch's time: 130-140 s a stage on the H200)."""
    assert tool.runs_step("--stages s18_three_turns --params params/long.yaml;--stages s19_int8", "protocol")
    assert tool.runs_step("--stages s19_int8 --params=params/acceptance.yaml", "protocol")
    assert not tool.runs_step("--stages s19_int8 --params params/long.yaml", "protocol")
    assert not tool.runs_step("--stages s19_int8 --params params/acceptance.yaml --steps sanitize explore", "protocol")
    assert not tool.runs_step("--stages s19_int8 --steps --params params/acceptance.yaml", "protocol")  # none
    assert tool.runs_step("--stages s19_int8 --params params/long.yaml --steps profile protocol --gpus 0", "protocol")
    assert tool.runs_step("--stages s19_int8 --params params/long.yaml --steps=protocol", "protocol")
    assert not tool.runs_step(" ; ", "protocol")


def test_the_protocol_builds_are_the_protocol_steps_own(nvcc_available):
    """`stagelab build --protocol`: the SDPA_PROTOCOL=1 build of each stage whose sources test it (the
    stage with the defines the protocol step builds it with), none for a stage without the checks."""
    from stagelab.cli.stages import protocol_builds
    from stagelab.core.build import build_key
    from stagelab.measure.protocol import PROTOCOL_KNOB, has_protocol_checks

    builds = [find_stage(s)[::-1] for s in ("s0_baseline", "s18_three_turns", "s19_int8")]
    assert [has_protocol_checks(stage, registry) for stage, registry in builds] == [False, True, True]
    made = protocol_builds(builds)
    assert [label for label, _ in made] == [f"s18_three_turns ({PROTOCOL_KNOB}=1)", f"s19_int8 ({PROTOCOL_KNOB}=1)"]
    for (_, (stage, registry)), (plain, _) in zip(made, builds[1:]):
        assert stage.defines == {**plain.defines, PROTOCOL_KNOB: "1"}  # with_defines keeps values as text
        assert build_key(stage, registry) != build_key(plain, registry)


def test_the_protocol_builds_are_the_named_stages_not_their_parents():
    """A device call for s19 built s18's protocol variant too (153 s, the longest build of its prebuild)
    though only s19's notebook runs the protocol step."""
    from stagelab.cli.stages import planned_builds

    labels = [label for label, _ in planned_builds(["s19_int8"], parents=True, protocol=True, defines={})]
    assert labels == ["s18_three_turns", "s19_int8", "s19_int8 (SDPA_PROTOCOL=1)"]
    assert [label for label, _ in planned_builds(["s19_int8"], parents=False, protocol=False, defines={})] == ["s19_int8"]


def explore_variant_specs() -> list[list[str]]:
    """tools/explore_variants.txt's specs, each as `stagelab build`'s arguments."""
    text = (Path(__file__).resolve().parents[1] / "tools" / "explore_variants.txt").read_text()
    return [line.split() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_the_exploration_variants_file_names_stages_and_their_knobs_and_every_exploring_stage():
    """BUILD_VARIANTS_FILE's specs parse as `stagelab build` takes them, name real knobs of real stages
    (a renamed knob would fail the prebuild's build, not the notebook), and cover every stage whose
    exploration cell builds variants (try_variants)."""
    from stagelab.cli.main import build_parser
    from stagelab.core.knobs import check_defines
    from stagelab.core.trial_spec import parse_defines

    covered = set()
    for spec in explore_variant_specs():
        args = build_parser().parse_args(["build", *spec])
        assert len(args.stages) == 1 and args.define, spec
        registry, stage = find_stage(args.stages[0], "sdpa")
        check_defines(stage, registry, parse_defines(args.define), "tools/explore_variants.txt")
        covered.add(stage.id)
    explore = Path(__file__).resolve().parents[1] / "notebooks" / "explore"
    exploring = {cell.stem for cell in explore.glob("*.py") if "try_variants(" in cell.read_text()}
    assert exploring and exploring == covered
