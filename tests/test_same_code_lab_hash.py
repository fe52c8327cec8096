"""`stagelab same-code` on this very repository: an earlier commit's run source hashes are those its
own lab computes (record.recorded_hashes), not today's scheme applied to its files. At 4d26062, the
last commit before 219f523 scoped the family's kind packages to their input kinds, s0_baseline's hash
covers all of sdpa's result Python; a lab that cannot answer leaves today's scheme and a note."""

import dataclasses
import subprocess
from pathlib import Path

import pytest

from stagelab.cli.main import main
from stagelab.core.build import source_hash
from stagelab.core.family_sources import FAMILY_PATH_ENV, SELECTED_FAMILY_ENV
from stagelab.core.python_build import files_digest
from stagelab.core.registry import family_registry
from stagelab.core.sources import result_python_files_in, run_hash_of, run_source_hash
from stagelab.record.recorded_hashes import TODAYS_SCHEME, lab_hashes
from stagelab.record.same_code_sides import sides

HERE = Path(__file__).resolve().parent
BEFORE_KIND_SCOPING = "4d26062"  # the parent of 219f523
WITHOUT_RUN_SOURCE_HASH = "a0795a7"  # the parent of 3ac16a4, which wrote core/sources.py
FAMILY_FILES = ["kernels/sdpa", "lib/stagelab/families/sdpa"]


def git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(HERE), *args], capture_output=True, text=True, check=False)


@pytest.fixture
def repo(monkeypatch) -> Path:
    """This repository's work tree, with sdpa's files as HEAD has them (sides() refuses others)."""
    top = git("rev-parse", "--show-toplevel")
    if top.returncode != 0:
        pytest.skip("the tests are not in a git work tree")
    if git("status", "--porcelain", "--", *FAMILY_FILES).stdout.strip():
        pytest.skip(f"{' or '.join(FAMILY_FILES)} differ from HEAD: same-code refuses such a tree")
    monkeypatch.delenv(FAMILY_PATH_ENV, raising=False)
    monkeypatch.delenv(SELECTED_FAMILY_ENV, raising=False)
    return Path(top.stdout.strip())


def need_commit(name: str) -> None:
    if git("cat-file", "-e", f"{name}^{{commit}}").returncode != 0:
        pytest.skip(f"commit {name} is not in this clone's history (a shallow clone?)")


def test_the_commit_before_kind_scoping_gets_its_own_labs_hash(repo):
    need_commit(BEFORE_KIND_SCOPING)
    with sides("sdpa", BEFORE_KIND_SCOPING) as (then, _now):
        assert then.note == "" and then.recorded_hashes is not None
        registry = then.registry
        stage = registry.stages["s0_baseline"]
        # its build hash covered every header of the family (before the include closure, core.includes)
        every_header = files_digest([stage.source, *registry.header_files(), registry.binding])
        old_scheme = run_hash_of(every_header, then.package_dir,
                                 result_python_files_in(then.package_dir, registry))  # every result .py, fp8/ and int8/ too
        todays = run_hash_of(source_hash(stage, registry), then.package_dir, then.kind_python_files(stage.input_kind))
        assert then.run_source_hash(stage) == old_scheme
        assert old_scheme != todays


def test_head_as_the_earlier_commit_gets_todays_hashes(repo):
    with sides("sdpa", "HEAD") as (then, now):
        assert then.note == "" and then.recorded_hashes is not None
        today = family_registry("sdpa")
        todays_on_the_archive = dataclasses.replace(then, recorded_hashes=None)
        for stage_id, stage in then.registry.stages.items():
            expected = run_source_hash(today.stages[stage_id], today)
            assert then.run_source_hash(stage) == expected == now.run_source_hash(now.registry.stages[stage_id])
            assert todays_on_the_archive.run_source_hash(stage) == expected, stage_id


def test_a_folder_without_the_lab_answers_with_a_note(repo, tmp_path):
    answer = lab_hashes("nowhere", repo, tmp_path, "sdpa", "kernels/sdpa", ["s0_baseline"])
    assert answer.hashes is None
    assert answer.note.startswith("the lab at nowhere could not compute its run hashes (") and TODAYS_SCHEME in answer.note


def test_a_lab_without_run_source_hash_leaves_todays_scheme_and_the_cli_says_so(repo, capsys):
    need_commit(WITHOUT_RUN_SOURCE_HASH)
    with sides("sdpa", WITHOUT_RUN_SOURCE_HASH) as (then, _now):
        assert then.recorded_hashes is None
        assert "No module named 'stagelab.core.sources'" in then.note and TODAYS_SCHEME in then.note
        stage = then.registry.stages["s0_baseline"]
        assert then.run_source_hash(stage) == run_hash_of(source_hash(stage, then.registry), then.package_dir,
                                                          then.kind_python_files(stage.input_kind))
    # s19_int8 came later: a stage new at the commit needs no build, and nothing is recorded
    status = main(["same-code", "--from", WITHOUT_RUN_SOURCE_HASH, "--family", "sdpa", "--stages", "s19_int8"])
    out = capsys.readouterr().out
    assert status == 0, out
    assert f"note: the lab at {WITHOUT_RUN_SOURCE_HASH} could not compute its run hashes (" in out
    assert "s19_int8: new" in out and "recorded nothing" in out
