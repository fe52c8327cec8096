"""A cuda stage's build source hash covers the family headers its translation unit can include
(core.includes), not every header of the family: an edit to a header only one stage includes
leaves the others' hashes. Real files in a temporary family; on sdpa, checked against `nvcc -M`."""

import os
import subprocess
from pathlib import Path

import pytest

from stagelab.core.binding import binding_key
from stagelab.core.build import nvcc_command, source_hash
from stagelab.core.errors import BuildError
from stagelab.core.includes import binding_headers, include_closure, stage_headers, stage_sources, strip_comments
from stagelab.core.registry import family_registry, load_registry
from stagelab.core.toolchain import nvcc_binary

STAGES_YAML = "family: sdpa\nbinding: binding.cpp\nstages:\n"


def write(folder: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)


def family(tmp_path: Path, files: dict[str, str], stages: str = "  - {id: s0}\n", binding: str = "// binding\n"):
    """A family folder `fam` under tmp_path with these files, a binding and stages.yaml; its registry."""
    folder = tmp_path / "fam"
    write(folder, {"binding.cpp": binding, "stages.yaml": STAGES_YAML + stages, **files})
    return load_registry(folder / "stages.yaml")


def names(paths, registry) -> set[str]:
    return {p.relative_to(registry.directory).as_posix() for p in paths}


CHAIN = {"s0.cu": '#include "a.cuh"\n#include <cstdint>\n', "a.cuh": '#pragma once\n#include "sub/b.cuh"\n',
         "sub/b.cuh": '#include "../c.cuh"\n', "c.cuh": "// c v1\n", "d.cuh": "// d v1\n"}


def test_the_closure_follows_includes_through_folders_and_leaves_unrelated_headers_out(tmp_path):
    registry = family(tmp_path, CHAIN)
    stage = registry.get("s0")
    assert names(stage_headers(stage, registry), registry) == {"a.cuh", "sub/b.cuh", "c.cuh"}
    assert names(registry.header_files(), registry) == {"a.cuh", "sub/b.cuh", "c.cuh", "d.cuh"}
    assert stage_sources(stage, registry) == [stage.source, *sorted(stage_headers(stage, registry)), registry.binding]
    before = source_hash(stage, registry)
    (registry.directory / "d.cuh").write_text("// d v2\n")
    assert source_hash(stage, registry) == before
    (registry.directory / "c.cuh").write_text("// c v2\n")
    assert source_hash(stage, registry) != before


def test_the_hash_does_not_depend_on_where_the_family_lives(tmp_path):
    one = family(tmp_path / "one", CHAIN)
    two = family(tmp_path / "elsewhere" / "two", CHAIN)
    assert source_hash(one.get("s0"), one) == source_hash(two.get("s0"), two)


@pytest.mark.parametrize("include", ["#include KERNEL_HEADER", '#include "missing.cuh"', '#include_next "c.cuh"'])
def test_an_unknowable_include_falls_back_to_every_header(tmp_path, include):
    registry = family(tmp_path, {**CHAIN, "s0.cu": f'#define KERNEL_HEADER "a.cuh"\n{include}\n'})
    stage = registry.get("s0")
    assert stage_headers(stage, registry) == registry.header_files()
    before = source_hash(stage, registry)
    (registry.directory / "d.cuh").write_text("// d v2\n")
    assert source_hash(stage, registry) != before


def test_an_include_that_resolves_outside_the_family_is_not_hashed(tmp_path):
    outside = tmp_path / "vendor" / "lib.cuh"
    write(tmp_path, {"vendor/lib.cuh": "// lib v1\n", "climbs.cuh": "// climbs v1\n"})
    registry = family(tmp_path, {**CHAIN, "s0.cu": f'#include "{outside}"\n#include "../climbs.cuh"\n#include "c.cuh"\n'})
    stage = registry.get("s0")
    assert names(stage_headers(stage, registry), registry) == {"c.cuh"}  # no fallback either
    before = source_hash(stage, registry)
    outside.write_text("// lib v2\n")
    (tmp_path / "climbs.cuh").write_text("// climbs v2\n")
    assert source_hash(stage, registry) == before


def test_a_header_the_binding_includes_counts_for_every_stage(tmp_path):
    stages = "  - {id: s0}\n  - {id: s1}\n"
    registry = family(tmp_path, {**CHAIN, "s1.cu": "// no includes\n", "api.h": "// api v1\n"}, stages,
                      binding='#include <torch/extension.h>\n#include "api.h"\n')
    assert names(binding_headers(registry), registry) == {"api.h"}
    assert names(stage_headers(registry.get("s1"), registry), registry) == {"api.h"}
    assert "api.h" in names(stage_headers(registry.get("s0"), registry), registry)
    before = {s: source_hash(registry.get(s), registry) for s in ("s0", "s1")}
    (registry.directory / "api.h").write_text("// api v2\n")
    assert all(source_hash(registry.get(s), registry) != before[s] for s in before)


def test_the_bindings_key_covers_its_own_headers_only(tmp_path):
    pytest.importorskip("torch")
    registry = family(tmp_path, {**CHAIN, "api.h": "// api v1\n"}, binding='#include "api.h"\n')
    before = binding_key(registry, [], "c++")
    (registry.directory / "c.cuh").write_text("// c v2\n")
    assert binding_key(registry, [], "c++") == before
    (registry.directory / "api.h").write_text("// api v2\n")
    assert binding_key(registry, [], "c++") != before


def test_commented_includes_are_left_out_and_disabled_branches_counted(tmp_path):
    source = ('// #include "d.cuh"\n/* a block\n#include "d.cuh"\n*/\nconst char* s = "/* not a comment";\n'
              '#if 0\n#include "c.cuh" // kept: over-including is safe\n#endif\n  #  include \\\n "a.cuh"\n')
    registry = family(tmp_path, {**CHAIN, "s0.cu": source})
    assert names(stage_headers(registry.get("s0"), registry), registry) == {"a.cuh", "sub/b.cuh", "c.cuh"}
    assert strip_comments('x = "a//b"; // c\ny = R"(/*)"; /* z\n */ w') == 'x = "a//b"; \ny = R"(/*)";  \n w'


def test_the_stages_include_folders_are_searched_in_order(tmp_path):
    """The including file's folder first, then the stage's -I folders, then the family's (as nvcc does)."""
    inc = tmp_path / "fam" / "inc"
    files = {**CHAIN, "s0.cu": '#include "only_in_inc.cuh"\n#include "sub/x.cuh"\n', "sub/x.cuh": '#include "c.cuh"\n',
             "inc/only_in_inc.cuh": "// v1\n", "inc/c.cuh": "// shadows the family's c.cuh from sub/\n"}
    registry = family(tmp_path, files, f"  - {{id: s0, compile_options: {{nvcc_flags: ['-I{inc}']}}}}\n")
    assert names(stage_headers(registry.get("s0"), registry), registry) == {"inc/only_in_inc.cuh", "sub/x.cuh",
                                                                            "inc/c.cuh"}
    relative = family(tmp_path / "rel", files, "  - {id: s0, compile_options: {nvcc_flags: ['-Iinc']}}\n")
    assert stage_headers(relative.get("s0"), relative) == relative.header_files()  # where nvcc runs decides


# The real family: an INT8 header is s19's alone, and the closure holds every family file nvcc reads.

def sdpa_closure(stage_id: str) -> set[str]:
    registry = family_registry("sdpa")
    return names(stage_headers(registry.get(stage_id), registry), registry)


def test_sdpa_int8_headers_are_s19s_alone():
    registry = family_registry("sdpa")
    assert "int8/tile.cuh" not in sdpa_closure("s0_baseline")
    assert "int8/tile.cuh" in sdpa_closure("s19_int8")
    assert len(sdpa_closure("s0_baseline")) < len(sdpa_closure("s18_three_turns")) < len(registry.header_files())


def nvcc_dependencies(stage_id: str) -> set[str]:
    """The family's files `nvcc -M` says the stage's translation unit reads, with the build's flags."""
    try:
        nvcc_binary()
    except BuildError:
        pytest.skip("no nvcc")
    registry = family_registry("sdpa")
    stage = registry.get(stage_id)
    cmd = nvcc_command(stage, registry, Path("unused.o"))
    at = cmd.index("-c")
    cmd = [*cmd[:at], "-M", cmd[at + 1]]  # the dependency list on stdout instead of the object
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=True).stdout
    family = registry.directory.resolve()
    deps = {Path(os.path.normpath(word)).resolve() for word in out.replace("\\\n", " ").split()[1:]}
    return {p.relative_to(family).as_posix() for p in deps if p.is_relative_to(family) and p != stage.source.resolve()}


@pytest.mark.parametrize("stage_id", ["s18_three_turns", "s19_int8", "s0_baseline"])
def test_every_header_nvcc_reads_is_in_the_closure(stage_id):
    deps = nvcc_dependencies(stage_id)
    assert deps and deps <= sdpa_closure(stage_id), deps - sdpa_closure(stage_id)


def test_include_closure_of_nothing_is_empty(tmp_path):
    assert include_closure([], tmp_path) == []
