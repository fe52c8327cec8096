"""`stagelab same-code --from COMMIT` on a tiny family in a git repository of its own: a comment-only
edit is recorded as the same code, a launcher-only edit and a kernel edit are different and not
recorded; bad commits and a dirty tree are refused before any build."""

import subprocess
import sys

import pytest

from stagelab.cli.main import main
from stagelab.cli.new_family import write_family
from stagelab.core.family_sources import FAMILY_PATH_ENV, FOLDER_MODULE_PREFIX, SELECTED_FAMILY_ENV
from stagelab.core.paths import WORKSPACE_ENV
from stagelab.core.registry import family_registry
from stagelab.core.sass_kernels import kernel_differences, kernel_digests, listing_md5
from stagelab.core.sources import run_source_hash
from stagelab.record.same_code_file import read_entries, same_code_path

HEADER = """#pragma once
// myop_common.cuh: what the stage shares.
__device__ __forceinline__ float myop_gate(float v) { return v / (1.0f + __expf(-v)); }
"""
LAUNCH = "const int64_t blocks = (elements + BLOCK_THREADS - 1) / BLOCK_THREADS;"


def git(repo, *args):
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True,
                          capture_output=True, text=True).stdout.strip()


def commit(repo, message):
    git(repo, "add", "-A", "--", ".", ":(exclude)**/__pycache__/**")  # the bytecode family.py leaves stays untracked
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def family(tmp_path, monkeypatch):
    """The myop family (the cuda skeleton, its stage calling a header's device function), not yet
    committed, in a repository of its own; the record and the builds go to the test's folders."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "README").write_text("before the family\n")
    commit(repo, "start")
    folder = write_family("myop", repo, "cuda")
    (folder / "myop_common.cuh").write_text(HEADER)
    stage = folder / "s0_naive.cu"
    text = stage.read_text().replace("out[i] = static_cast<T>(v / (1.0f + __expf(-v)));",
                                     "out[i] = static_cast<T>(myop_gate(v));")
    stage.write_text('#include "myop_common.cuh"\n' + text)
    monkeypatch.setenv(FAMILY_PATH_ENV, str(repo))
    # family.py is imported once per process: this test's, not an earlier test's myop
    monkeypatch.delitem(sys.modules, FOLDER_MODULE_PREFIX + "myop", raising=False)
    monkeypatch.delenv(SELECTED_FAMILY_ENV, raising=False)
    monkeypatch.setenv(WORKSPACE_ENV, str(tmp_path / "workspace"))
    monkeypatch.setenv("STAGELAB_BUILD_DIR", str(tmp_path / "build"))
    return folder


def same_code(capsys, commit_name, *more):
    status = main(["same-code", "--from", commit_name, "--family", "myop", "--jobs", "1", *more])
    captured = capsys.readouterr()
    return status, captured.out + captured.err


def current_hash():
    registry = family_registry("myop")
    return run_source_hash(registry.get("s0_naive"), registry)


def test_kernel_digests_tell_which_kernel_changed_and_ignore_the_checkouts_namespace_names():
    def listing(namespace, body):
        return (f"\tcode for sm_90a\n\t\tFunction : _ZN47_GLOBAL__N__{namespace}_4_s0_cu_83a6713c1kEv\n"
                f"        /*0000*/   {body} ;   /* 0x00000a00ff017b82 */\n\t\t..........\n")

    before, moved = kernel_digests(listing("6bf413ef", "EXIT")), kernel_digests(listing("27d93a2e", "EXIT"))
    assert before == moved and listing_md5(listing("6bf413ef", "EXIT")) == listing_md5(listing("27d93a2e", "EXIT"))
    changed = kernel_digests(listing("27d93a2e", "NOP"))
    assert kernel_differences(before, changed) == [f"changed: {next(iter(before))}"]
    assert kernel_differences(before, {}) == [f"only before: {next(iter(before))}"]


def test_an_unknown_commit_a_dirty_tree_and_a_family_absent_at_the_commit_are_refused(family, capsys):
    first = commit(family.parent, "myop")
    status, out = same_code(capsys, "no-such-commit")
    assert status == 2 and "unknown commit 'no-such-commit'" in out
    (family / "myop_common.cuh").write_text(HEADER + "// edited, not committed\n")
    status, out = same_code(capsys, first)
    assert status == 2 and "differ from HEAD (myop/myop_common.cuh)" in out and "commit or stash" in out
    git(family.parent, "checkout", "-q", "--", ".")
    status, out = same_code(capsys, "HEAD~1")  # the commit before the family
    assert status == 2 and "myop/stages.yaml does not exist at" in out
    assert not same_code_path("myop").exists()


def test_a_build_failure_on_either_side_is_named_and_the_other_stages_go_on(family, capsys, monkeypatch):
    """build_all stood in for (no nvcc here): s0's build fails at COMMIT, s1's at HEAD."""
    import stagelab.record.same_code as same_code_module
    from stagelab.core.errors import BuildError

    (family / "s1_copy.cu").write_text((family / "s0_naive.cu").read_text())
    with open(family / "stages.yaml", "a") as registry:
        registry.write("  - id: s1_copy\n    parent: s0_naive\n    compile_options:\n      defines: {BLOCK_THREADS: 128}\n")
    base = commit(family.parent, "myop")
    (family / "myop_common.cuh").write_text(HEADER + "// a note\n")
    commit(family.parent, "a comment")
    (family / "__pycache__").mkdir()  # what importing family.py leaves where bytecode is written: not a change
    (family / "__pycache__" / "family.cpython-311.pyc").write_bytes(b"\0")
    failing = {0: "s0_naive.cu(3): error: expected a ;", 3: "s1_copy.cu(9): error: undefined identifier"}

    def fake_build_all(builds, jobs):
        assert [stage.id for stage, _ in builds] == ["s0_naive", "s0_naive", "s1_copy", "s1_copy"] and jobs == 1
        for index, (stage, _registry) in enumerate(builds):
            if index in failing:
                yield index, BuildError(f"nvcc failed on {stage.id}.cu (exit 1)", failing[index])

    monkeypatch.setattr(same_code_module, "build_all", fake_build_all)
    status, out = same_code(capsys, base)
    assert status == 1, out
    assert f"s0_naive: failed: the build at {base[:7]} failed: nvcc failed on s0_naive.cu (exit 1)" in out
    assert "s0_naive.cu(3): error: expected a ;" in out
    assert "s1_copy: failed: the build at HEAD (" in out and "s1_copy.cu(9): error: undefined identifier" in out
    assert "summary: failed: s0_naive, s1_copy" in out and not same_code_path("myop").exists()


@pytest.mark.slow
@pytest.mark.kernels
def test_a_comment_is_the_same_code_a_launcher_or_kernel_edit_is_not(family, capsys):
    base = commit(family.parent, "myop")
    base_hash = current_hash()
    (family / "myop_common.cuh").write_text(HEADER.replace("what the stage shares.", "what the stage shares (a note)."))
    commented = commit(family.parent, "a comment")
    status, out = same_code(capsys, base)
    assert status == 0 and "s0_naive: same: 2 kernels" in out, out  # fp16 and bf16
    [entry] = read_entries(same_code_path("myop"))
    assert (entry.from_commit, entry.from_source_hash, entry.to_commit, entry.to_source_hash) == (
        base, base_hash, commented, current_hash())
    assert base_hash != current_hash() and entry.kernels == 2 and entry.nvcc.startswith("Build cuda_")

    stage = family / "s0_naive.cu"  # the launcher rounds its grid up by one more block: the kernels stay
    stage.write_text(stage.read_text().replace(LAUNCH, LAUNCH.replace(") / BLOCK_THREADS;", ") / BLOCK_THREADS + 1;")))
    commit(family.parent, "a bigger grid")
    status, out = same_code(capsys, commented)
    assert status == 1 and "s0_naive: different: the host code differs" in out and "changed:" not in out, out

    # the kernel computes another thing (in the stage file: a header edit would cost another binding build)
    stage.write_text(stage.read_text().replace("myop_gate(v)", "myop_gate(2.0f * v)"))
    commit(family.parent, "another gate")
    status, out = same_code(capsys, commented, "--stages", "s0_naive")
    assert status == 1 and "s0_naive: different: changed: sm_90a _Z11silu_kernel" in out, out
    assert "recorded nothing" in out and len(read_entries(same_code_path("myop"))) == 1
