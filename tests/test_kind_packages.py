"""A family's kind packages (FamilySettings.kind_packages): the Python a stage's run hashes is what its
input kind uses, and the family's imports keep that promise (an edit to int8/ leaves s18's runs current)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from stagelab.core.family import load_family
from stagelab.core.registry import family_registry
from stagelab.core.sources import family_package_dir, kind_python_files, result_python_files_in

ROOT = Path(__file__).resolve().parents[1]


def sdpa_files(stage_id: str) -> set[str]:
    family, registry = load_family("sdpa"), family_registry("sdpa")
    folder = family_package_dir(family)
    files = kind_python_files(result_python_files_in(folder, registry), folder, family,
                              registry.stages[stage_id].input_kind)
    return {p.relative_to(folder).parts[0] if len(p.relative_to(folder).parts) > 1 else "." for p in files}


@pytest.mark.parametrize("stage, packages", [
    ("s18_three_turns", {"."}),                 # the standard inputs: neither quantized library
    ("s9_fp8", {".", "fp8"}),
    ("s19_int8", {".", "fp8", "int8"}),         # the INT8 recipe reuses fp8/'s e4m3 helpers
])
def test_a_stage_hashes_the_python_of_its_input_kind(stage, packages):
    assert sdpa_files(stage) == packages


def test_an_edit_in_a_kind_package_changes_only_its_kinds_run_hashes(tmp_path):
    """On a family folder of its own (the repository's files are never touched)."""
    from types import SimpleNamespace

    from stagelab.core.sources import python_files_under, run_hash_of

    folder = tmp_path / "fam"
    for name in ("reference.py", "fp8/quantize.py", "int8/recipe.py"):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(f"# {name}\n")
    family = SimpleNamespace(kind_packages={"fp8": ("fp8", "int8"), "int8": ("int8",)})

    def hashes() -> dict[str, str]:
        files = python_files_under(folder)
        return {kind: run_hash_of("build", folder, kind_python_files(files, folder, family, kind))
                for kind in ("", "fp8", "int8")}

    before = hashes()
    (folder / "int8" / "recipe.py").write_text("# an edit\n")
    after_int8 = hashes()
    assert after_int8[""] == before[""] and after_int8["fp8"] == before["fp8"] and after_int8["int8"] != before["int8"]
    (folder / "fp8" / "quantize.py").write_text("# an edit\n")
    after_fp8 = hashes()
    assert after_fp8[""] == before[""] and after_fp8["fp8"] != before["fp8"] and after_fp8["int8"] != after_int8["int8"]
    (folder / "reference.py").write_text("# an edit\n")
    assert all(hashes()[kind] != after_fp8[kind] for kind in ("", "fp8", "int8"))


def imported_modules(tree: ast.AST):
    """(module name as written, level, whether inside a function) of every import in a module."""
    def walk(node, in_function):
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.ImportFrom):
                yield child.module or "", child.level, in_function
            elif isinstance(child, ast.Import):
                yield from ((alias.name, 0, in_function) for alias in child.names)
            yield from walk(child, inner)
    yield from walk(tree, False)


def kind_package_imported(name: str, level: int, path: Path, folder: Path, packages: dict) -> str | None:
    """The kind package an import reaches (relative or absolute), or None."""
    if level:
        base = path.parent
        for _ in range(level - 1):
            base = base.parent
        target = (base / name.replace(".", "/")) if name else base
    else:
        prefix = "stagelab.families." + folder.name + "."
        if not name.startswith(prefix):
            return None
        target = folder / name[len(prefix):].replace(".", "/")
    for package in packages:
        if target.resolve() == (folder / package).resolve() or (folder / package).resolve() in target.resolve().parents:
            return package
    return None


def test_the_family_imports_a_kind_package_only_on_its_kinds_paths():
    """Outside its kind packages the family imports them only inside functions (so importing the family
    loads none), and a kind package imports another only if that one serves all of its kinds."""
    family = load_family("sdpa")
    folder = family_package_dir(family)
    packages = family.kind_packages
    problems = []
    for path in sorted(folder.rglob("*.py")):
        relative = path.relative_to(folder)
        own = relative.parts[0] if len(relative.parts) > 1 and relative.parts[0] in packages else None
        for name, level, in_function in imported_modules(ast.parse(path.read_text())):
            reached = kind_package_imported(name, level, path, folder, packages)
            if reached is None or reached == own:
                continue
            if own is None and not in_function:
                problems.append(f"{relative}: imports {reached}/ at module level")
            if own is not None and not set(packages[own]) <= set(packages[reached]):
                problems.append(f"{relative}: {own}/ serves {packages[own]} but imports {reached}/ ({packages[reached]})")
    assert not problems, problems


def test_the_standard_inputs_path_loads_no_kind_package():
    """Importing the family, drawing inputs of every distribution and the float64 reference: no
    quantized library is loaded (run in a fresh interpreter)."""
    code = (
        "import sys\n"
        "from stagelab.core.family import load_family\n"
        "family = load_family('sdpa')\n"
        "problem = family.parse_problem('t', {'shape': [1, 2, 33, 64], 'causal': False})[0]\n"
        "import torch\n"
        "for d in family.distributions_for(''):\n"
        "    family.make_inputs(problem, torch.float16, 0, 'cpu', d)\n"
        "print(sorted(m for m in sys.modules if m.startswith('stagelab.families.sdpa.')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={"PYTHONPATH": str(ROOT / "lib"), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr[-2000:]
    loaded = out.stdout
    assert "stagelab.families.sdpa.inputs" in loaded and ".fp8" not in loaded and ".int8" not in loaded, loaded
