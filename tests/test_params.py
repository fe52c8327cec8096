from pathlib import Path

import pytest

from stagelab.core.errors import ConfigError
from stagelab.families.sdpa import Shape
from stagelab.core.params import load_params

ROOT = Path(__file__).resolve().parents[1]


def write(tmp_path, text):
    path = tmp_path / "p.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("name", ["smoke", "acceptance", "mission", "long"])
def test_shipped_parameter_files_load(name):
    params = load_params(ROOT / "params" / f"{name}.yaml")
    assert params.shapes and len(params.seeds) >= 2
    assert params.family.name == "sdpa"


def test_mission_is_timed_even_when_not_checked(tmp_path):
    params = load_params(write(tmp_path, "shapes: [{shape: [1, 2, 3, 64]}]\n"
                                         "mission: {shape: [2, 8, 512, 64], causal: true}\n"))
    assert params.mission == Shape(2, 8, 512, 64, True) and params.mission not in params.shapes
    assert params.timed_shapes() == [Shape(1, 2, 3, 64, False), Shape(2, 8, 512, 64, True)]
    same = load_params(write(tmp_path, "shapes: [{shape: [1, 2, 3, 64]}]\nmission: {shape: [1, 2, 3, 64]}\n"))
    assert same.timed_shapes() == [Shape(1, 2, 3, 64, False)]  # not timed twice


def test_mission_defaults_to_the_familys(tmp_path):
    params = load_params(write(tmp_path, "shapes: [{shape: [1, 2, 3, 64]}]\n"))
    assert params.mission == Shape(2, 8, 512, 64, False)


def test_unknown_family_is_named(tmp_path):
    with pytest.raises(ConfigError, match="unknown kernel family 'gemm'"):
        load_params(write(tmp_path, "family: gemm\nshapes: [{shape: [1, 2, 3, 64]}]\n"))


def test_acceptance_has_the_issue_shapes():
    shapes = set(load_params(ROOT / "params" / "acceptance.yaml").shapes)
    expected = {Shape(1, 8, 512, 64, False), Shape(1, 8, 512, 64, True), Shape(2, 8, 2048, 64, False),
                Shape(2, 8, 2048, 64, True), Shape(2, 8, 2048, 128, False), Shape(1, 2, 1, 64, False),
                Shape(1, 3, 77, 128, True), Shape(2, 4, 1000, 64, False)}
    # issue 31's problems, odd lengths, causal and not: grouped-query, cached prefix (one K/V head),
    # cross-length, bshd, and all three at once
    general = {Shape(2, 8, 333, 64, c, kv_heads=2) for c in (False, True)}
    general |= {Shape(1, 4, 200, 128, c, kv_heads=1, kv_seq_len=1031) for c in (False, True)}
    general |= {Shape(2, 4, 1000, 64, False, kv_seq_len=77)}
    general |= {Shape(2, 6, 197, 64, c, layout="bshd") for c in (False, True)}
    general |= {Shape(1, 8, 129, 128, c, kv_heads=2, kv_seq_len=300, layout="bshd") for c in (False, True)}
    # past 2048 keys (s13's turns), a full grid and fewer items than SMs, at both head dims
    long_items = {Shape(1, 7, 4099, 64, False), Shape(2, 5, 3001, 128, True)}
    long_items |= {Shape(1, 8, 1100, 64, c, kv_heads=4, kv_seq_len=2501) for c in (False, True)}
    long_items |= {Shape(1, 8, 1500, 128, c, kv_heads=2, kv_seq_len=4001, layout="bshd") for c in (False, True)}
    # issue 43: the launch plans no problem above takes (`stagelab coverage`)
    plans = {Shape(1, 1, 64, 128, False), Shape(1, 132, 64, 128, True), Shape(1, 132, 64, 128, True, kv_heads=66),
             Shape(8, 12, 128, 128, True), Shape(1, 66, 192, 64, True), Shape(2, 8, 2945, 64, True),
             Shape(1, 4, 4099, 64, True), Shape(4, 16, 576, 64, False), Shape(1, 683, 2945, 64, False)}
    plans |= {Shape(1, 8, 2100, 64, c) for c in (False, True)}
    assert shapes == expected | general | long_items | plans


def test_causal_list_expands():
    params = load_params(write(Path(__import__("tempfile").mkdtemp()),
                               "shapes:\n  - {shape: [1, 2, 3, 64], causal: [false, true]}\n"))
    assert [s.causal for s in params.shapes] == [False, True]


@pytest.mark.parametrize("text, message", [
    ("shapes: [{shape: [1, 2, 3, 64]}]\nbogus: 1\n", "unknown key(s) ['bogus']"),
    ("shapes: [{shape: [1, 0, 3, 64]}]\n", "shape.heads: expected a positive integer"),
    ("shapes: [{shape: [1, 2, -3, 64]}]\n", "shape.seq_len: expected a positive integer"),
    ("shapes: [{shape: [1, 2, 3, 96]}]\n", "head_dim: 96 is not supported"),
    ("shapes: [{shape: [1, 2, 3, 64]}]\ndtypes: [float32]\n", "'float32' is not supported"),
    ("shapes: [{shape: [1, 2, 3]}]\n", "expected [batch, heads, seq_len, head_dim]"),
    ("shapes: [{shape: [1, 2, 3, 64], causal: maybe}]\n", "causal: expected true, false"),
    ("shapes: [{shape: [1, 2, 3, 64], extra: 1}]\n", "unknown key(s) ['extra']"),
    ("shapes: [{shape: [1, 2, 3, 64]}]\nseeds: [0]\n", "two or more"),
    ("shapes: [{shape: [1, 2, 3, 64]}]\ntiming: {repetitions: 10}\n", "at least 100"),
    ("shapes: [{shape: [1, 2, 3, 64]}]\ntiming: {modes: [warm]}\n", "'warm' is not supported"),
    ("shapes: []\n", "non-empty list"),
    ("shapes: [{shape: [1, 2, 3, 64]\n", "not valid YAML"),
])
def test_bad_files_name_the_problem(tmp_path, text, message):
    with pytest.raises(ConfigError) as err:
        load_params(write(tmp_path, text))
    assert message in str(err.value)
    assert str(tmp_path / "p.yaml") in str(err.value)


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_params(tmp_path / "nope.yaml")


def test_flops_halved_for_causal():
    assert Shape(2, 8, 512, 64, True).flops() * 2 == Shape(2, 8, 512, 64, False).flops() == 4 * 2 * 8 * 512 * 512 * 64


def test_optional_steps_are_opt_in_and_validated(tmp_path):
    from stagelab.core.errors import ConfigError
    from stagelab.core.params import load_params

    base = "shapes:\n  - {shape: [1, 2, 64, 64]}\nmission: {shape: [1, 2, 64, 64]}\n"
    plain = tmp_path / "plain.yaml"
    plain.write_text(base)
    assert load_params(plain).steps == ()
    both = tmp_path / "both.yaml"
    both.write_text(base + "steps: [sanitize, profile, explore]\n")
    assert load_params(both).steps == ("sanitize", "profile", "explore")
    bad = tmp_path / "bad.yaml"
    bad.write_text(base + "steps: [fuzz]\n")
    with pytest.raises(ConfigError, match="steps: 'fuzz' is not supported"):
        load_params(bad)


SEVERAL_MISTAKES = """\
dtypes: [float16, float8]
seeds: [0]
shapes:
  - {shape: [1, 8, 512]}
  - {shape: [1, 8, 512, 64], causal: maybe}
timing: {repetitions: 10}
timeout_s: -1
colour: blue
"""


def test_a_file_with_several_mistakes_lists_them_all_one_a_line(tmp_path, capsys):
    """Before, only the first was reported: fix, rerun, meet the next."""
    from stagelab.cli import main

    path = write(tmp_path, SEVERAL_MISTAKES)
    with pytest.raises(ConfigError) as raised:
        load_params(path)
    lines = str(raised.value).splitlines()
    assert lines[0] == f"{path}: 7 problems:"
    expected = ["unknown key(s) ['colour']", "seeds:", "timeout_s:", "dtypes: 'float8'", "shapes[0].shape:",
                "shapes[1].causal:", "timing.repetitions: 10 is too few"]
    assert len(lines) == 1 + len(expected)
    for line, said in zip(lines[1:], expected):
        assert line.startswith(f"  {path}: ") and said in line, line
    assert main(["run", "--params", str(path)]) == 2
    assert capsys.readouterr().err.count(f"  {path}: ") == 7


def test_one_mistake_is_one_line_and_an_unknown_family_still_reports_the_rest(tmp_path):
    with pytest.raises(ConfigError, match=r"^[^\n]*seeds: expected a list[^\n]*$"):
        load_params(write(tmp_path, "shapes: [{shape: [1, 2, 3, 64]}]\nseeds: [1]\n"))
    with pytest.raises(ConfigError) as raised:
        load_params(write(tmp_path, "family: gemm\nseeds: [1]\n"))
    assert "2 problems" in str(raised.value) and "unknown kernel family 'gemm'" in str(raised.value)


@pytest.mark.parametrize("text, where", [("dtypes: [float16\nseeds: [0, 1]\n", "line 2, column 6"),
                                         ("seeds: [0, 1]\n  dtypes: [float16]\n", "line 2, column 3")])
def test_a_yaml_syntax_error_is_one_line_with_file_line_and_column(tmp_path, text, where):
    with pytest.raises(ConfigError) as raised:
        load_params(write(tmp_path, text))
    message = str(raised.value)
    assert "\n" not in message and message.startswith(f"{tmp_path / 'p.yaml'}, {where}: not valid YAML: "), message


def test_a_registry_with_a_yaml_syntax_error_says_where_in_one_line(tmp_path):
    from stagelab.core.registry import load_registry

    registry = tmp_path / "stages.yaml"
    registry.write_text("family: x\nstages:\n  - id: s0\n    title: [unclosed\n")
    with pytest.raises(ConfigError, match=rf"^{registry}, line 5, column 1: not valid YAML: [^\n]*$"):
        load_registry(registry)
