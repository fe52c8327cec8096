"""An edit of a family's Python confined to its input path, and making the same inputs, keeps its runs
current through `stagelab same-code` (record.input_path, record.same_inputs); an edit that changes the
inputs, or touches anything else, does not. No GPU: the inputs are drawn on the CPU."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from stagelab.cli.new_family import write_family
from stagelab.core.family_sources import FAMILY_PATH_ENV, FOLDER_MODULE_PREFIX, SELECTED_FAMILY_ENV
from stagelab.core.paths import WORKSPACE_ENV
from stagelab.record.input_path import changed_names, outside_input_path
from stagelab.record.same_code_sides import sides
from stagelab.record.same_inputs import params_files, same_inputs

HERE = Path(__file__).resolve().parent
BEFORE_DRAW_MEMO = "8f1bc1f"  # e104305's grandparent: sdpa's draw() kept no draw then
MODULE = b'''"""A module."""
import torch

SCALE = 2.0


def draw(n, seed):
    """Some inputs."""
    return torch.randn(n, generator=torch.Generator().manual_seed(seed)) * SCALE


class Fam:
    input_path = ("m.draw",)
    name = "fam"

    def make_inputs(self, n, seed):
        return (draw(n, seed),)

    def reference(self, x):
        return x.double()
'''


def edited(old: str, new: str) -> bytes:
    assert old.encode() in MODULE
    return MODULE.replace(old.encode(), new.encode())


def test_docstrings_comments_and_layout_touch_nothing():
    text = edited('"""Some inputs."""', '"""Other words."""\n    # a comment').replace(b"* SCALE", b"*  SCALE")
    assert changed_names(MODULE, text) == set()


def test_each_touched_definition_is_named_methods_by_their_class():
    assert changed_names(MODULE, edited("* SCALE", "* SCALE + 1")) == {"draw"}
    assert changed_names(MODULE, edited("x.double()", "x.float()")) == {"Fam.reference"}
    assert changed_names(MODULE, edited('name = "fam"', 'name = "other"')) == {"Fam"}
    assert changed_names(MODULE, edited("SCALE = 2.0", "SCALE = 3.0")) == {"SCALE"}
    assert changed_names(MODULE, None) >= {"draw", "Fam", "Fam.make_inputs", "SCALE"}


def test_only_the_declared_input_path_and_new_private_names_may_change():
    path = ("m.draw", "m.Fam.make_inputs")
    memo = edited("def draw(n, seed):", "_kept = {}\n\n\ndef draw(n, seed):\n    _kept.clear()")
    assert outside_input_path({"m.py": MODULE}, {"m.py": memo}, path) == []
    # declaring the input path changes no result, so it is no edit of the class
    assert outside_input_path({"m.py": MODULE}, {"m.py": edited('("m.draw",)', '("m.draw", "m.other")')}, path) == []
    public = edited("def draw(n, seed):", "kept = {}\n\n\ndef draw(n, seed):")
    assert outside_input_path({"m.py": MODULE}, {"m.py": public}, path) == [
        "m.py: kept changed, not on the family's input path"]
    both = edited("x.double()", "x.float()").replace(b"SCALE = 2.0", b"SCALE = 3.0")
    assert outside_input_path({"m.py": MODULE}, {"m.py": both}, path) == [
        "m.py: Fam.reference, SCALE changed, not on the family's input path"]
    assert outside_input_path({"m.py": MODULE}, {"m.py": b"def broken(:\n"}, path)[0].startswith("m.py: cannot be parsed")
    assert outside_input_path({"m.py": MODULE}, {"m.py": MODULE, "n.py": b"X = 1\n"}, path) == [
        "n.py: X changed, not on the family's input path"]


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True,
                          capture_output=True, text=True).stdout.strip()


def commit(repo: Path, message: str) -> str:
    git(repo, "add", "-A", "--", ".", ":(exclude)**/__pycache__/**")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def myop(tmp_path, monkeypatch):
    """The skeleton family in a repository of its own, its make_inputs declared its input path."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    folder = write_family("myop", repo, "cuda")
    family_py = folder / "family.py"
    family_py.write_text(family_py.read_text().replace(
        '    name = "myop"\n', '    name = "myop"\n    input_path = ("family.MyopFamily.make_inputs",)\n'))
    params = folder / "params" / "acceptance.yaml"  # small problems: the mission too
    params.write_text(params.read_text().replace("[8192, 8192]", "[64, 64]"))
    monkeypatch.setenv(FAMILY_PATH_ENV, str(repo))
    monkeypatch.delitem(sys.modules, FOLDER_MODULE_PREFIX + "myop", raising=False)
    monkeypatch.delenv(SELECTED_FAMILY_ENV, raising=False)
    monkeypatch.setenv(WORKSPACE_ENV, str(tmp_path / "workspace"))
    return folder


def edit_family(folder: Path, old: str, new: str) -> None:
    path = folder / "family.py"
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new))
    sys.modules.pop(FOLDER_MODULE_PREFIX + "myop", None)


def verdict_since(folder: Path, commit_name: str, progress=lambda line: None):
    with sides("myop", commit_name) as (then, now):
        return same_inputs(then, now, files=[folder / "params" / "acceptance.yaml"], progress=progress)


@pytest.mark.slow
def test_the_same_draw_written_otherwise_keeps_the_runs_a_new_draw_or_reference_does_not(myop):
    base = commit(myop.parent, "myop")
    edit_family(myop, "generator = torch.Generator().manual_seed(seed)",
                "generator = torch.Generator()\n        generator.manual_seed(seed)")
    rewritten = commit(myop.parent, "the same draw, written otherwise")
    lines = []
    verdict = verdict_since(myop, base, lines.append)
    assert [line.split(": ", 1)[0] for line in lines] == [f"inputs at {base[:7]}", f"inputs at HEAD ({rewritten[:7]})"], lines
    assert all(line.endswith("acceptance.yaml: 20 draws") for line in lines), lines
    assert verdict.differences == [] and verdict.note.startswith("family.py changed on the input path only"), verdict
    assert "of 1 parameter file(s)" in verdict.note

    edit_family(myop, '"""The myop family: what', '"""The myop family (a docstring edited): what')
    edit_family(myop, '    name = "myop"\n', '    name = "myop"  # a comment\n')
    edit_family(myop, '("family.MyopFamily.make_inputs",)', '("family.MyopFamily.make_inputs", "family.silu")')
    documented = commit(myop.parent, "words only")
    lines = []
    verdict = verdict_since(myop, rewritten, lines.append)
    assert verdict.differences == [] and lines == [], (verdict, lines)  # nothing to draw
    assert verdict.note == "family.py: no definition changed (docstrings, comments, layout or the input-path declaration)"
    edit_family(myop, '("family.MyopFamily.make_inputs", "family.silu")', '("family.MyopFamily.make_inputs",)')

    edit_family(myop, "torch.randn(problem.shape, generator=generator)", "2 * torch.randn(problem.shape, generator=generator)")
    commit(myop.parent, "inputs twice as large")
    verdict = verdict_since(myop, documented)
    assert len(verdict.differences) == 1 and verdict.differences[0].startswith("acceptance.yaml: the inputs differ ("), verdict

    edit_family(myop, "return silu(inputs[0], compute_dtype)", "return silu(inputs[0], compute_dtype) * 1")
    commit(myop.parent, "another reference")
    verdict = verdict_since(myop, documented)
    assert len(verdict.differences) == 1 and "MyopFamily.reference" in verdict.differences[0], verdict


@pytest.mark.slow
def test_sdpa_keeping_its_last_draw_made_the_same_inputs(monkeypatch):
    """e104305 on this repository: draw() keeps its last draw and make_inputs copies it. Its runs
    before and after drew the same inputs (smoke.yaml here; same-code draws every parameter file)."""
    top = subprocess.run(["git", "-C", str(HERE), "rev-parse", "--show-toplevel"], capture_output=True, text=True)
    if top.returncode != 0 or subprocess.run(["git", "-C", str(HERE), "cat-file", "-e", f"{BEFORE_DRAW_MEMO}^{{commit}}"],
                                             capture_output=True).returncode != 0:
        pytest.skip(f"not in a git work tree holding {BEFORE_DRAW_MEMO}")
    if subprocess.run(["git", "-C", str(HERE), "status", "--porcelain", "--", "kernels/sdpa", "lib/stagelab/families/sdpa"],
                      capture_output=True, text=True).stdout.strip():
        pytest.skip("sdpa's files differ from HEAD: same-code refuses such a tree")
    monkeypatch.delenv(FAMILY_PATH_ENV, raising=False)
    monkeypatch.delenv(SELECTED_FAMILY_ENV, raising=False)
    smoke = Path(top.stdout.strip()) / "params" / "smoke.yaml"
    assert smoke in params_files("sdpa") and not any("softmax" in p.name for p in params_files("sdpa"))
    with sides("sdpa", BEFORE_DRAW_MEMO) as (then, now):
        verdict = same_inputs(then, now, files=[smoke])
    assert verdict.differences == [], verdict
    assert "distributions.py, inputs.py changed on the input path only" in verdict.note, verdict.note


def test_a_child_that_fails_or_hangs_is_an_answer_naming_why(monkeypatch, tmp_path):
    from types import SimpleNamespace

    from stagelab.record import same_inputs as module
    side = SimpleNamespace(family=SimpleNamespace(name="myop"), label="abc1234", commit="abc", archive=None)
    env = {**os.environ, "PYTHONPATH": str(module.LAB_PACKAGE.parent)}
    lines = []
    monkeypatch.setattr(module, "SCRIPT", "import sys; print('a.yaml: 3 draws', file=sys.stderr, flush=True); "
                                          "sys.exit('the lab broke')")
    assert module._ask(side, env, tmp_path, [], lines.append) == {"failed": "exit 1: the lab broke"}
    assert lines == ["inputs at abc1234: a.yaml: 3 draws"]
    monkeypatch.setattr(module, "SCRIPT", "print('not json')")
    assert module._ask(side, env, tmp_path, [], lines.append) == {"failed": "its answer was not JSON: not json"}
    monkeypatch.setattr(module, "SCRIPT", "import time; time.sleep(60)")
    monkeypatch.setattr(module, "PROBE_TIMEOUT_S", 1)
    assert module._ask(side, env, tmp_path, [], lines.append) == {"failed": "no answer in 1 s"}
